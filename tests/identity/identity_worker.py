"""A writer process for the identity concurrency test (``python identity_worker.py <json>``).

The job names the table, the writer number, how many appends of how many rows, and a
``go`` file to wait for so that all writers start together. Each committed write is
reported on stdout as one JSON line.
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

    print(json.dumps({"ready": True}), flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(job["go"]) and time.monotonic() < deadline:
        time.sleep(0.005)
    for seq in range(job["appends"]):
        rows = pa.table({"v": [f"{job['writer']}-{seq}-{i}" for i in range(job["rows"])]})
        r = lq.write(job["uri"], rows, mode="append")
        print(json.dumps({"version": r.version, "attempts": r.attempts}), flush=True)


if __name__ == "__main__":
    main()
