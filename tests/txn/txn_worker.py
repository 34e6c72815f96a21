"""Writer processes for the concurrency tests (run as ``python txn_worker.py <json>``).

Kept lean and self-contained: every child imports it afresh. One JSON argument holds
the job; results go to stdout (one JSON object per line, flushed at once) so that the
parent can read what a writer managed to report before it was killed.

Jobs:

* ``append``: ``appends`` appends of ``rows`` distinct ids each (``lq.write``).
* ``loop``: appends forever (until killed), reporting each committed write.
* ``checkpoint``: writes checkpoints of the latest version forever (until killed).
* ``try_commit``: one :meth:`Transaction.try_commit` of a given version, reporting the
  exact bytes it tried to create.

Every job first reports ``{"ready": true}`` and, when ``go`` names a file, waits for it to
exist, so that all writers start the race together.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from typing import Any


def ids_table(writer: int, seq: int, rows: int) -> Any:
    """Rows with ids unique per (writer, seq, row)."""
    import pyarrow as pa

    base = writer * 10_000_000 + seq * 1_000
    return pa.table(
        {
            "id": pa.array(range(base, base + rows), pa.int64()),
            "writer": pa.array([writer] * rows, pa.int32()),
            "seq": pa.array([seq] * rows, pa.int32()),
        }
    )


def emit(**record: Any) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def wait_for(go: str | None) -> None:
    if not go:
        return
    deadline = time.monotonic() + 120
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise TimeoutError(f"start signal {go} never came")
        time.sleep(0.002)


def job_append(job: dict[str, Any]) -> None:
    import lakequery as lq

    opts = job.get("storage_options")
    tables = [ids_table(job["writer"], s, job["rows"]) for s in range(job["appends"])]
    lq.DeltaTable(job["uri"], storage_options=opts).snapshot()  # warm up imports/clients
    emit(ready=True)
    wait_for(job.get("go"))
    for seq, table in enumerate(tables):
        result = lq.write(job["uri"], table, mode="append", storage_options=opts)
        emit(seq=seq, version=result.version, attempts=result.attempts)


def job_loop(job: dict[str, Any]) -> None:
    import lakequery as lq
    from lakequery.writer import data_files  # noqa: F401  (import before the race)

    opts = job.get("storage_options")
    lq.DeltaTable(job["uri"], storage_options=opts).snapshot()
    emit(ready=True)
    wait_for(job.get("go"))
    seq = 0
    while True:
        result = lq.write(
            job["uri"],
            ids_table(job["writer"], seq, job["rows"]),
            mode="append",
            storage_options=opts,
        )
        emit(seq=seq, version=result.version, attempts=result.attempts)
        seq += 1


def job_checkpoint(job: dict[str, Any]) -> None:
    import lakequery as lq

    dt = lq.DeltaTable(job["uri"], storage_options=job.get("storage_options"))
    emit(ready=True)
    wait_for(job.get("go"))
    while True:
        info = dt.checkpoint()
        emit(checkpoint=info.version)


def job_try_commit(job: dict[str, Any]) -> None:
    import lakequery as lq
    from lakequery.txn import Transaction

    dt = lq.DeltaTable(job["uri"], storage_options=job.get("storage_options"))
    snapshot = dt.snapshot()
    txn = Transaction(dt.storage, snapshot, operation="WRITE")
    txn.add_files(fake_adds(job["writer"], job["files"]))
    sent: list[bytes] = []
    put = dt.storage.put_if_absent

    def recording_put(path: str, data: bytes) -> bool:
        sent.append(data)
        return put(path, data)

    dt.storage.put_if_absent = recording_put  # type: ignore[method-assign]
    emit(ready=True)
    wait_for(job.get("go"))
    attempt = txn.try_commit(job["version"])
    emit(
        writer=job["writer"],
        committed=attempt.committed,
        version=attempt.version,
        txn_id=txn.txn_id,
        data=base64.b64encode(sent[-1]).decode(),
    )


def fake_adds(writer: int, count: int) -> list[dict[str, Any]]:
    """``count`` add actions (files that need not exist: try_commit never reads them)."""
    return [
        {
            "path": f"w{writer}-part-{i:05d}.parquet",
            "partitionValues": {},
            "size": 1000 + i,
            "modificationTime": 1,
            "dataChange": True,
            "stats": json.dumps({"numRecords": 1, "writer": writer, "pad": "x" * 64}),
        }
        for i in range(count)
    ]


JOBS = {
    "append": job_append,
    "loop": job_loop,
    "checkpoint": job_checkpoint,
    "try_commit": job_try_commit,
}

if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    JOBS[spec["job"]](spec)
