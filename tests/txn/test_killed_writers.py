"""Writers SIGKILLed at random moments never leave a table unreadable or inconsistent.

Each round starts two appending writer processes (the table checkpoints every 3
versions, so some kills land inside post-commit checkpoints) and one process that
writes checkpoints in a loop, lets them run for a random time and kills them at random,
staggered moments. The truth is derived from the log alone: a writer can be killed
between committing and reporting. After every round:

* versions are contiguous and every commit file is complete JSON;
* every added file exists, is readable and holds ``numRecords`` rows;
* lakequery and deltalake read exactly the rows of the added files, each once;
* every write a writer reported is in the table, whole;
* data files of failed (killed) commits are unreferenced orphans whose rows are absent.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from txnkit import (
    Worker,
    assert_no_duplicates,
    check_log,
    deltalake_ids,
    ids_table,
    lq_ids,
    open_table_storage,
    run_together,
    wait_until,
)

import lakequery as lq

ROUNDS = 3
ROWS = 3


def _commits(root: Path) -> int:
    return sum(1 for p in (root / "_delta_log").glob("*.json") if p.name[:20].isdigit())


def _kill_at_random(workers: list[Worker], rng: random.Random, root: Path, before: int) -> None:
    wait_until(lambda: _commits(root) > before)  # the writers got going
    time.sleep(rng.uniform(0.0, 1.2))
    for w in rng.sample(workers, len(workers)):
        os.kill(w.proc.pid, signal.SIGKILL)
        time.sleep(rng.uniform(0.0, 0.3))
    for w in workers:
        w.finish()
        assert w.proc.returncode == -signal.SIGKILL, w.stderr


def _data_files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*.parquet")
        if not str(p.relative_to(root)).startswith("_delta_log")
    }


def _verify(root: Path, reported: list[tuple[int, int]]) -> tuple[int, int]:
    uri = str(root)
    storage = open_table_storage(uri)
    log = check_log(storage)
    assert not log.removed  # append-only workload
    live = log.live_paths()
    assert len(set(live)) == len(live)
    expected: list[int] = []
    for add in log.adds:
        data = storage.read(storage.join(add["path"]))
        table = pq.read_table(io.BytesIO(data))
        assert table.num_rows == json.loads(add["stats"])["numRecords"]
        expected.extend(table.column("id").to_pylist())
    expected.sort()
    assert_no_duplicates(expected)
    assert lq_ids(uri) == expected
    assert deltalake_ids(uri) == expected
    present = set(expected)
    # every reported write is in the table, whole
    for writer, seq in reported:
        ids = ids_table(writer, seq, ROWS).column("id").to_pylist()
        assert set(ids) <= present, f"reported write {(writer, seq)} is missing"
    # a write is all or nothing: rows per (writer, seq) come in complete groups
    groups = Counter(i // 1000 for i in expected)
    assert set(groups.values()) <= {ROWS}, groups
    orphans = _data_files(root) - set(live)
    for path in orphans:
        try:
            ids = pq.read_table(root / path, columns=["id"]).column("id").to_pylist()
        except Exception:  # killed while writing it: not even a valid Parquet file
            continue
        assert not present & set(ids), f"orphan {path} holds rows that are in the table"
    return len(log.versions), len(orphans)


def test_writers_killed_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    root = tmp_path / "table"
    uri = str(root)
    lq.write(uri, ids_table(0, 0, ROWS), configuration={"delta.checkpointInterval": "3"})
    reported: list[tuple[int, int]] = [(0, 0)]
    versions = 1
    for round_ in range(ROUNDS):
        jobs = [
            {"job": "loop", "uri": uri, "writer": 10 * (round_ + 1) + k, "rows": ROWS}
            for k in range(2)
        ]
        jobs.append({"job": "checkpoint", "uri": uri})
        workers = run_together(jobs, tmp_path / f"go-{round_}")
        _kill_at_random(workers, rng, root, versions)
        for job, w in zip(jobs, workers, strict=True):
            if job["job"] == "loop":
                reported += [(int(job["writer"]), r["seq"]) for r in w.records]
        count, _ = _verify(root, reported)
        assert count >= versions  # nothing committed is ever lost
        versions = count
    # the table is still writable and checkpointable after all that
    result = lq.write(uri, ids_table(1, 0, ROWS), mode="append")
    assert result.version == versions
    lq.DeltaTable(uri).checkpoint()
    reported.append((1, 0))
    _verify(root, reported)
    assert versions > ROUNDS  # the writers did commit between kills
