"""A writer process for the identity concurrency test (``python identity_worker.py <json>``).

The job names the table, the writer number, how many appends of how many rows, and a
``go`` file to wait for so that all writers start together. The first append is planned
and its files written (ids generated from the table's first high-water mark) before the
writer reports ready, so every writer's first commit races from the same version and all
but one must rebase: the collision the test checks is certain, not a matter of timing.
Each committed write is reported on stdout as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    job = json.loads(sys.argv[1])
    import pyarrow as pa

    import lakequery as lq
    from lakequery.writer import commit_write, plan_write
    from lakequery.writer.data_files import write_data_files
    from lakequery.writer.identity import commit_rebasing_identity

    def rows_of(seq: int) -> pa.Table:
        return pa.table({"v": [f"{job['writer']}-{seq}-{i}" for i in range(job["rows"])]})

    first = rows_of(0)
    plan = plan_write(job["uri"], first.schema, mode="append")
    assert plan.state is not None
    adds = write_data_files(first, plan.state)
    print(json.dumps({"ready": True}), flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(job["go"]) and time.monotonic() < deadline:
        time.sleep(0.005)
    r = commit_rebasing_identity(plan, adds, commit_write)
    print(json.dumps({"version": r.version, "attempts": r.attempts}), flush=True)
    for seq in range(1, job["appends"]):
        r = lq.write(job["uri"], rows_of(seq), mode="append")
        print(json.dumps({"version": r.version, "attempts": r.attempts}), flush=True)


if __name__ == "__main__":
    main()
