"""Keeping a snapshot current while another writer commits (issue 16: small tables).

A long-running reader (a service, a stream consumer, a loop of small DML) brings its
snapshot up to date after every commit someone else made. This benchmark makes one
table of ``--rows`` rows, then ``--commits`` one-row appends by ``deltalake``'s writer
(neither reader writes), and after each commit times, in turn:

* lakequery: ``snap = snap.update()`` (one LIST, the new commit only);
* ``deltalake``: ``dt.update_incremental()`` on a ``DeltaTable`` kept open.

Reported per window of ``--window`` commits: the median and the slowest update of each
side, the ratio of the medians, and the chunks of lakequery's live-file table (an update
that appended chunks forever slowed down with the number of commits it had seen, RESULTS
§8 "twelfth session"), and one ``to_duckdb()`` count at the window's end.

``--log DIR`` runs on a copy of a log-only table instead (``benchmarks/synth_log.py``, e.g.
``benchmarks/data/logs/checkpoint_200k``: 200,000 live files, no data files), committing
one ``add`` (a copy of the log's last one under a new path) per commit; no count then.

CLI::

    .venv/bin/python -m benchmarks.bench_updates                     # 600 commits
    .venv/bin/python -m benchmarks.bench_updates --commits 200 --window 50
    .venv/bin/python -m benchmarks.bench_updates --log benchmarks/data/logs/checkpoint_200k \
        --commits 90 --window 30
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any


def _data_table(uri: str, rows: int) -> Callable[[int], None]:
    import deltalake
    import pyarrow as pa

    deltalake.write_deltalake(
        uri, pa.table({"id": pa.array(range(rows), pa.int64()), "v": pa.array([1.0] * rows)})
    )

    def commit(i: int) -> None:
        one = pa.table({"id": pa.array([rows + i], pa.int64()), "v": pa.array([2.0])})
        deltalake.write_deltalake(uri, one, mode="append")

    return commit


def _log_table(uri: str, source: str) -> Callable[[int], None]:
    shutil.copytree(source, uri)
    log = os.path.join(uri, "_delta_log")
    last = max(int(n[:20]) for n in os.listdir(log) if n.endswith(".json"))
    with open(os.path.join(log, f"{last:020d}.json")) as f:
        add = next(json.loads(line)["add"] for line in f if '"add"' in line)

    def commit(i: int) -> None:
        action = dict(add, path=f"new/part-{i:05d}.parquet")
        info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
        with open(os.path.join(log, f"{last + i:020d}.json"), "x") as f:
            f.write(json.dumps(info) + "\n" + json.dumps({"add": action}) + "\n")

    return commit


def run(rows: int, commits: int, window: int, log: str | None = None) -> list[dict[str, Any]]:
    import deltalake

    import lakequery as lq

    uri = tempfile.mkdtemp(prefix="lq_updates_") + "/t"
    commit = _log_table(uri, log) if log else _data_table(uri, rows)
    snap = lq.DeltaTable(uri).snapshot()
    dt = deltalake.DeltaTable(uri)
    first = snap.version
    lq_ms: list[float] = []
    dl_ms: list[float] = []
    out = []
    for i in range(1, commits + 1):
        commit(i)
        t0 = time.perf_counter()
        snap = snap.update()
        t1 = time.perf_counter()
        dt.update_incremental()
        t2 = time.perf_counter()
        lq_ms.append((t1 - t0) * 1000)
        dl_ms.append((t2 - t1) * 1000)
        if i % window == 0:
            assert snap.version == dt.version() == first + i
            if not log:
                count = snap.scan().to_duckdb().query("t", "SELECT count(*) FROM t").fetchall()
                assert count == [(rows + i,)]
            lq_med = statistics.median(lq_ms[-window:])
            dl_med = statistics.median(dl_ms[-window:])
            out.append(
                {
                    "commits": i,
                    "lakequery_ms": round(lq_med, 2),
                    "lakequery_max_ms": round(max(lq_ms[-window:]), 1),
                    "deltalake_ms": round(dl_med, 2),
                    "deltalake_max_ms": round(max(dl_ms[-window:]), 1),
                    "ratio": round(lq_med / dl_med, 2),
                    "chunks": snap._state.files.column(0).num_chunks,
                }
            )
    shutil.rmtree(os.path.dirname(uri), ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--commits", type=int, default=600)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--log", help="a log-only table to copy (see the module docstring)")
    args = parser.parse_args()
    print(
        "| commits | lakequery `update()` median / max (ms) | deltalake "
        "`update_incremental()` median / max (ms) | ratio of medians | chunks |"
    )
    print("|---:|---:|---:|---:|---:|")
    for r in run(args.rows, args.commits, args.window, args.log):
        print(
            f"| {r['commits']} | {r['lakequery_ms']} / {r['lakequery_max_ms']} "
            f"| {r['deltalake_ms']} / {r['deltalake_max_ms']} | {r['ratio']} | {r['chunks']} |"
        )


if __name__ == "__main__":
    main()
