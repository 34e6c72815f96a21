"""How long ``to_duckdb()`` takes to build its relation, and the query after it, in fresh
processes, for two lakequery source trees side by side.

Each measurement is a new interpreter (run from an empty directory, so that
``PYTHONPATH`` decides which tree is imported) that loads a table's snapshot and plans
the scan untimed, then times ``scan.to_duckdb(con)`` and ``count(*), sum(value)`` over it.
Trees alternate; medians are printed. The tables are ``bench_latency``'s
(``benchmarks/data/latency``; run ``bench_latency`` once to build them).

``--form query`` times ``rel.query("t", sql)`` instead of ``rel.aggregate(...)`` (DuckDB binds
the relation again for it). ``--untagged`` measures copies of the tables whose JSON commits
lost lakequery's schema tags, so that the engine reads every footer, as it does for tables
of other writers.

Usage (RESULTS.md §8, "Evening of 2026-11-26" and "2026-11-27")::

    git worktree add /tmp/lq-before <commit>
    .venv-bench/bin/python -m benchmarks.relation_build --before /tmp/lq-before \\
        fig4_1000000_1000 fig4_1000000_10000 small4_25000 dv2_25000
    .venv-bench/bin/python -m benchmarks.relation_build --before /tmp/lq-before --untagged \\
        fig4_1000000_10000
    .venv-bench/bin/python -m benchmarks.relation_build --before /tmp/lq-before --form query \\
        fig4_1000000_10000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bytecode import REPO, compile_sources

DATA = REPO / "benchmarks" / "data" / "latency"

_PROGRAM = """import json, sys, time
import duckdb
import lakequery as lq
scan = lq.DeltaTable(sys.argv[1]).snapshot().scan()
scan.plan()
con = duckdb.connect()
t0 = time.perf_counter()
rel = scan.to_duckdb(con)
t1 = time.perf_counter()
if sys.argv[2] == "query":
    rows = rel.query("t", "SELECT count(*), sum(value) FROM t").fetchall()
else:
    rows = rel.aggregate("count(*), sum(value)").fetchall()
t2 = time.perf_counter()
print(json.dumps({"build": t1 - t0, "query": t2 - t1, "rows": rows[0][0]}))
"""

_TAGS = re.compile(r',"tags":\{"lakequery\.parquetSchema":"[0-9a-f]*"\}')


def copy_untagged(src: Path, dest: Path) -> Path:
    """A copy of the table at ``src`` under ``dest`` without schema tags in its JSON commits
    (tables with a checkpoint are refused: their tags would stay)."""
    if list((src / "_delta_log").glob("*.checkpoint*.parquet")):
        raise SystemExit(f"{src} has a checkpoint: its schema tags would stay")
    out = dest / src.name
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("*.crc", "_SUCCESS"))
    for commit in (out / "_delta_log").glob("*.json"):
        commit.write_text(_TAGS.sub("", commit.read_text()))
    return out


def _run(tree: str, table: Path, cwd: str, form: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run(
        [sys.executable, "-c", _PROGRAM, str(table), form],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a lakequery source tree to compare")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--form", choices=["aggregate", "query"], default="aggregate")
    parser.add_argument("--untagged", action="store_true", help="copies without schema tags")
    parser.add_argument("tables", nargs="+", help="names under benchmarks/data/latency")
    args = parser.parse_args()
    before = str(Path(args.before).resolve())
    compile_sources()
    subprocess.run([sys.executable, "-m", "compileall", "-q", f"{before}/lakequery"], check=True)
    trees = {"before": before, "now": str(REPO)}
    print("| table | before: build (s) | now: build (s) | before: query (s) | now: query (s) |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as cwd:
        for name in args.tables:
            table = copy_untagged(DATA / name, Path(cwd)) if args.untagged else DATA / name
            runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
            for _ in range(args.reps):
                for label, tree in trees.items():
                    runs[label].append(_run(tree, table, cwd, args.form))
            rows = {r["rows"] for rs in runs.values() for r in rs}
            assert len(rows) == 1, f"{name}: the trees disagree on the row count {rows}"
            med = {
                (label, k): statistics.median(r[k] for r in rs)
                for label, rs in runs.items()
                for k in ("build", "query")
            }
            print(
                f"| {name} | {med[('before', 'build')]:.4f} | {med[('now', 'build')]:.4f} "
                f"| {med[('before', 'query')]:.4f} | {med[('now', 'query')]:.4f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
