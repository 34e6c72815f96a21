"""Phases of one fresh ``to_duckdb()`` read, for tables of many files (RESULTS.md §8).

Prints, for one run in this (fresh) interpreter: the snapshot, ``plan()``, building the
relation, building the statement on it (``rel.query("t", ...)`` or ``rel.aggregate(...)``)
and running it, in seconds. ``--copy-untagged DEST`` first copies the table to ``DEST`` with
lakequery's schema tags taken out of its JSON commits, so that the engine reads every footer
as it does for tables of other writers.

Usage (one fresh process per run; alternate trees with ``PYTHONPATH``)::

    .venv-bench/bin/python -m benchmarks.relation_phases benchmarks/data/latency/fig4_1000000_10000 --form query
    .venv-bench/bin/python -m benchmarks.relation_phases <table> --copy-untagged /tmp/untagged
    .venv-bench/bin/python -m benchmarks.relation_phases /tmp/untagged --form aggregate
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from pathlib import Path

AGG = "SELECT count(*) AS n, sum(value) AS s FROM t"
_TAGS = re.compile(r',"tags":\{"lakequery\.parquetSchema":"[0-9a-f]*"\}')


def copy_untagged(src: Path, dest: Path) -> None:
    """Copies the table at ``src`` to ``dest`` without schema tags in its JSON commits (no
    checkpoint may hold them: the copy refuses tables with one)."""
    if list((src / "_delta_log").glob("*.checkpoint*.parquet")):
        raise SystemExit(f"{src} has a checkpoint: its tags would stay")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.crc", "_SUCCESS"))
    for commit in (dest / "_delta_log").glob("*.json"):
        commit.write_text(_TAGS.sub("", commit.read_text()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("table")
    parser.add_argument("--form", choices=["query", "aggregate"], default="query")
    parser.add_argument("--copy-untagged", type=Path, help="write the untagged copy here and stop")
    args = parser.parse_args()
    if args.copy_untagged:
        copy_untagged(Path(args.table), args.copy_untagged)
        return 0
    t0 = time.perf_counter()
    import lakequery as lq

    snap = lq.DeltaTable(args.table).snapshot()
    t1 = time.perf_counter()
    scan = snap.scan()
    scan.plan()
    t2 = time.perf_counter()
    rel = scan.to_duckdb()
    t3 = time.perf_counter()
    if args.form == "query":
        statement = rel.query("t", AGG)
    else:
        statement = rel.aggregate("count(*) AS n, sum(value) AS s")
    t4 = time.perf_counter()
    rows = statement.fetchall()
    t5 = time.perf_counter()
    print(
        f"{args.form}: snapshot {t1 - t0:.3f} (imports included), plan {t2 - t1:.3f}, "
        f"relation {t3 - t2:.3f}, statement {t4 - t3:.3f}, run {t5 - t4:.3f}, "
        f"total {t5 - t0:.3f} s; {rows}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
