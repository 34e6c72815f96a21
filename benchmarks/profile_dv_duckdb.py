"""Where a warm ``to_duckdb()`` query on a table with deletion vectors spends its time
(issue 16), on ``bench_latency``'s small ``dv2`` table (opened each time) and its 5M-row
DV table (snapshot loaded before). Phases, median wall milliseconds: ``open``
(``DeltaTable(p).snapshot()``), ``build`` (``scan().to_duckdb(con)``: planning, DVs,
masks, binding the relation), ``bind`` (``rel.query("t", sql)``: DuckDB binds and plans
the caller's SQL over the relation) and ``run`` (``fetchall()``). Then, from cProfile over
the builds only, what ``build`` spends in: ``deleted_rows`` (loading DVs),
``register`` (NumPy arrays handed to DuckDB), ``execute`` (statements: settings, footer
row counts) and ``sql`` (DuckDB binding the relation). Run in the benchmark environment::

    .venv-bench/bin/python -m benchmarks.profile_dv_duckdb --reps 100
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.bench_latency import DUCKDB_CONFIG, dv_tables, small_tables

CALLS = ("deleted_rows", "register", "execute", "sql")


def phases(open_: Callable[[], Any], sql: str, reps: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"open": [], "build": [], "bind": [], "run": []}
    builds = cProfile.Profile()
    for i in range(reps + 5):
        t0 = time.perf_counter()
        snap = open_()
        t1 = time.perf_counter()
        builds.enable()
        rel = snap.scan().to_duckdb(CON)
        builds.disable()
        t2 = time.perf_counter()
        bound = rel.query("t", sql)
        t3 = time.perf_counter()
        bound.fetchall()
        t4 = time.perf_counter()
        if i >= 5:
            for k, a, b in (("open", t0, t1), ("build", t1, t2), ("bind", t2, t3), ("run", t3, t4)):
                times[k].append(b - a)
    out = {k: statistics.median(v) for k, v in times.items()}
    stats = pstats.Stats(builds)
    for (_, _, name), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        key = name.replace("<built-in method _duckdb.", "").rstrip(">")
        if key in CALLS:
            out[key] = out.get(key, 0.0) + cumulative / (reps + 5)
    return out


CON: Any = None


def main() -> None:
    global CON
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--rows", type=int, default=5_000_000)
    args = parser.parse_args()
    import duckdb

    import lakequery as lq

    CON = duckdb.connect(config=DUCKDB_CONFIG)
    small = small_tables(25_000)["dv2"]
    dv, _ = dv_tables(args.rows)
    snap = lq.DeltaTable(dv).snapshot()
    runs = {
        "dv2, opened each time": (
            lambda: lq.DeltaTable(small).snapshot(),
            "SELECT count(*) AS n, sum(value) AS s FROM t",
        ),
        f"{args.rows:,}-row DV table": (
            lambda: snap,
            "SELECT category, sum(value), count(*) FROM t GROUP BY category ORDER BY category",
        ),
    }
    cols = ("open", "build", "bind", "run", *CALLS)
    print(f"lakequery from {lq.__file__}, duckdb {duckdb.__version__}")
    print("\n| table | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, (open_, sql) in runs.items():
        got = phases(open_, sql, args.reps)
        print(f"| {name} | " + " | ".join(f"{got.get(c, 0.0) * 1e3:.2f}" for c in cols) + " |")


if __name__ == "__main__":
    main()
