"""Commit throughput: 1, 4 and 8 local writer processes appending to ONE table.

Every writer process appends ``--commits`` small batches (``--rows`` rows each, one
``lq.write(..., mode="append")`` = one commit each). All writers of a run are released
together (they import and warm up first). Reported per writer count: commits per
second overall (all commits / wall time from the release to the last commit), total
retries (sum of ``attempts - 1``), and whether versions ended up contiguous with every
row present once.

CLI::

    python -m benchmarks.bench_commits                          # 1, 4, 8 writers x 20 commits
    python -m benchmarks.bench_commits --writers 1 4 8 --commits 30 --rows 1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def _writer(uri: str, index: int, commits: int, rows: int, barrier: Any, queue: Any) -> None:
    import pyarrow as pa

    import lakequery as lq

    lq.DeltaTable(uri).snapshot()  # warm up imports and caches
    batches = [
        pa.table({"id": pa.array([index * 1_000_000 + c * 1_000 + r for r in range(rows)])})
        for c in range(commits)
    ]
    barrier.wait(timeout=300)
    attempts = []
    for batch in batches:
        attempts.append(lq.write(uri, batch, mode="append").attempts)
    queue.put((index, time.perf_counter(), attempts))


def run(writers: int, commits: int, rows: int, workdir: Path) -> dict[str, Any]:
    import pyarrow as pa

    import lakequery as lq

    uri = str(workdir / f"w{writers}")
    shutil.rmtree(uri, ignore_errors=True)
    lq.write(uri, pa.table({"id": pa.array([-1], pa.int64())}))
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers + 1)
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(uri, i, commits, rows, barrier, queue))
        for i in range(writers)
    ]
    for p in procs:
        p.start()
    barrier.wait(timeout=300)
    start = time.perf_counter()
    results = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    end = max(t for _, t, _ in results)
    total = writers * commits
    retries = sum(a - 1 for _, _, attempts in results for a in attempts)
    log = Path(uri) / "_delta_log"
    versions = sorted(
        int(p.name[:20]) for p in log.iterdir() if re.fullmatch(r"\d{20}\.json", p.name)
    )
    ids = [int(i or 0) for i in lq.DeltaTable(uri).snapshot().scan().to_arrow()["id"].to_pylist()]
    return {
        "writers": writers,
        "commits": total,
        "seconds": end - start,
        "commits_per_s": total / (end - start),
        "retries": retries,
        "max_attempts": max(a for _, _, attempts in results for a in attempts),
        "versions_contiguous": versions == list(range(total + 1)),
        "rows_exact": sorted(ids) == sorted({*ids}) and len(ids) == total * rows + 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--commits", type=int, default=20, help="commits per writer")
    parser.add_argument("--rows", type=int, default=1, help="rows per commit")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp dir")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_commits_"))
    out = []
    try:
        for n in args.writers:
            out.append(run(n, args.commits, args.rows, workdir))
            print(json.dumps(out[-1]), flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    bad = [r for r in out if not (r["versions_contiguous"] and r["rows_exact"])]
    if bad:
        raise SystemExit(f"inconsistent table after the run: {bad}")


if __name__ == "__main__":
    main()
