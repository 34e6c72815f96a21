"""Scan benchmark: lakequery scans vs raw DuckDB / Polars over the *same* Parquet file list.

Tables come from ``synth_data`` (``flat``: unpartitioned, ``part``: partitioned by ``region``).
The raw side gets the live file list for free (``deltalake.DeltaTable(path).file_uris()``, taken
once outside the timings), so it is the "perfect catalog" lower bound for each engine.

Queries (same SQL text on both sides; Polars runs it through ``pl.SQLContext``):

* ``agg``: ``GROUP BY category`` with ``SUM(value)``, ``COUNT(*)``, ``AVG(qty)`` over all rows.
* ``id_range``: ``COUNT/SUM`` over a 0.5% ``id`` range. lakequery gets the same predicate as its
  scan ``filter=`` and should prune files by stats (we report planned vs total files, and
  deltalake's own ``file_uris(file_pruning_predicate=...)`` count for reference). Raw DuckDB /
  Polars see every file and prune row groups from the Parquet footers themselves.
* ``region_eq`` (partitioned table only): ``WHERE region = 'eu'`` ``GROUP BY category``; a
  partition filter (raw side uses hive partitioning on the paths).

Columns per (table, query, engine):

* ``raw``: DuckDB ``con.read_parquet(files).query(...)`` / ``pl.scan_parquet(files)``,
* ``lakequery``: ``snap.scan(filter=...).to_duckdb(con)`` / ``.to_polars()`` + the same query, on
  a snapshot loaded once beforehand,
* ``lakequery e2e``: the same including ``lq.DeltaTable(path).snapshot()`` every time.

Each timing is the best of ``--repeat`` (default 5) runs after one untimed warm-up, all in one
process; the raw and lakequery runs alternate, so both see the same machine load. Results of the two sides are compared (floats with a relative tolerance of 1e-9).

CLI::

    python -m benchmarks.bench_scan                              # all tables under data/scan
    python -m benchmarks.bench_scan --tables benchmarks/data/scan/flat_5m --repeat 5
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

HERE = Path(__file__).resolve().parent
DEFAULT_SCAN_DIR = HERE / "data" / "scan"

AGG_SQL = (
    "SELECT category, SUM(value) AS sum_value, COUNT(*) AS n, AVG(qty) AS avg_qty "
    "FROM t GROUP BY category ORDER BY category"
)
REGION_FILTER = "region = 'eu'"
REGION_SQL = (
    "SELECT category, COUNT(*) AS n, SUM(value) AS sum_value "
    f"FROM t WHERE {REGION_FILTER} GROUP BY category ORDER BY category"
)


def queries(manifest: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(name, SQL over view ``t``, lakequery scan filter) for a table."""
    rows = manifest["rows"]
    lo = rows // 2 + 1234
    hi = lo + rows // 200
    id_filter = f"id >= {lo} AND id < {hi}"
    out = [
        ("agg", AGG_SQL, None),
        ("id_range", f"SELECT COUNT(*) AS n, SUM(value) AS s FROM t WHERE {id_filter}", id_filter),
    ]
    if manifest.get("partition_by"):
        out.append(("region_eq", REGION_SQL, REGION_FILTER))
    return out


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    result = fn()  # warm-up (page cache, lazy inits), also the result we compare
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def best_of_pair(
    a: Callable[[], Any], b: Callable[[], Any], repeat: int
) -> tuple[float, Any, float, Any]:
    """Best times of two runs taken alternately (both sides see the same machine load)."""
    res_a, res_b = a(), b()  # warm-up, also the results we compare
    best_a = best_b = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        a()
        best_a = min(best_a, time.perf_counter() - t0)
        t0 = time.perf_counter()
        b()
        best_b = min(best_b, time.perf_counter() - t0)
    return best_a, res_a, best_b, res_b


def normalise(rows: Any) -> list[tuple[Any, ...]]:
    if isinstance(rows, pl.DataFrame):
        rows = rows.rows()
    return [tuple(r) for r in rows]


def results_match(a: Any, b: Any, rel: float = 1e-9) -> bool:
    """Row-wise equality, floats compared with a relative tolerance (summation order differs)."""
    ra, rb = normalise(a), normalise(b)
    if len(ra) != len(rb):
        return False
    for x, y in zip(ra, rb, strict=True):
        if len(x) != len(y):
            return False
        for u, v in zip(x, y, strict=True):
            if isinstance(u, float) or isinstance(v, float):
                if u is None or v is None or not math.isclose(u, v, rel_tol=rel, abs_tol=1e-9):
                    return False
            elif u != v:
                return False
    return True


def lakequery_module() -> Any:
    try:
        import lakequery as lq
    except Exception as e:  # pragma: no cover - depends on work in progress
        raise RuntimeError(f"lakequery is not importable: {e!r}") from e
    if not hasattr(lq, "DeltaTable"):
        raise RuntimeError(
            "lakequery API missing: expected lakequery.DeltaTable(uri).snapshot().scan(...) "
            "(lakequery.DeltaTable is not defined yet)"
        )
    return lq


def planned_files(snap: Any, filt: str | None) -> int | None:
    plan = snap.scan(filter=filt).plan()
    for attr in ("num_files",):
        n = getattr(plan, attr, None)
        if isinstance(n, int):
            return n
    tasks = getattr(plan, "tasks", None) or getattr(plan, "files", None)
    if tasks is not None:
        try:
            return len(tasks)
        except TypeError:
            return None
    return None


def deltalake_pruned(path: str, filt: str | None, total: int) -> int | None:
    if filt is None:
        return total
    try:
        from deltalake import DeltaTable

        return len(DeltaTable(path).file_uris(file_pruning_predicate=filt))
    except Exception:
        return None


def bench_table(path: Path, repeat: int) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    manifest = json.loads((path.parent / f"{path.name}.manifest.json").read_text())
    files = DeltaTable(str(path)).file_uris()
    hive = bool(manifest.get("partition_by"))
    con = duckdb.connect()

    lq: Any = None
    snap: Any = None
    lq_error: str | None = None
    try:
        lq = lakequery_module()
        snap = lq.DeltaTable(str(path)).snapshot()
    except Exception as e:
        lq_error = f"{type(e).__name__}: {e}"

    results: list[dict[str, Any]] = []
    for qname, sql, filt in queries(manifest):
        base = {"table": path.name, "query": qname, "total_files": len(files)}
        base["deltalake_pruned_files"] = deltalake_pruned(str(path), filt, len(files))
        planned: int | str | None = None
        if snap is not None:
            try:
                planned = planned_files(snap, filt)
            except Exception as e:
                planned = f"error: {type(e).__name__}: {str(e)[:60]}"

        def duck_raw(sql: str = sql) -> Any:
            return con.read_parquet(files, hive_partitioning=hive).query("t", sql).fetchall()

        def duck_lq(sql: str = sql, filt: str | None = filt) -> Any:
            return snap.scan(filter=filt).to_duckdb(con=con).query("t", sql).fetchall()

        def duck_lq_e2e(sql: str = sql, filt: str | None = filt) -> Any:
            s = lq.DeltaTable(str(path)).snapshot()
            return s.scan(filter=filt).to_duckdb(con=con).query("t", sql).fetchall()

        def pl_run(lf: pl.LazyFrame, sql: str) -> pl.DataFrame:
            return pl.SQLContext(t=lf).execute(sql).collect()

        def polars_raw(sql: str = sql) -> Any:
            return pl_run(pl.scan_parquet(files, hive_partitioning=hive), sql)

        def polars_lq(sql: str = sql, filt: str | None = filt) -> Any:
            return pl_run(snap.scan(filter=filt).to_polars(), sql)

        def polars_lq_e2e(sql: str = sql, filt: str | None = filt) -> Any:
            s = lq.DeltaTable(str(path)).snapshot()
            return pl_run(s.scan(filter=filt).to_polars(), sql)

        for engine, raw_fn, lq_fn, e2e_fn in (
            ("duckdb", duck_raw, duck_lq, duck_lq_e2e),
            ("polars", polars_raw, polars_lq, polars_lq_e2e),
        ):
            r = dict(base, engine=engine, planned_files=planned)
            if lq_error:
                r["raw_s"], raw_res = best_of(raw_fn, repeat)
                r["error"] = lq_error
            else:
                try:
                    r["raw_s"], raw_res, r["lq_s"], lq_res = best_of_pair(raw_fn, lq_fn, repeat)
                    r["lq_e2e_s"], _ = best_of(e2e_fn, repeat)
                    r["match"] = results_match(lq_res, raw_res)
                    if not r["match"]:
                        r["mismatch"] = {
                            "raw": normalise(raw_res)[:3],
                            "lakequery": normalise(lq_res)[:3],
                        }
                except Exception as e:
                    r["error"] = f"{type(e).__name__}: {e}"
            results.append(r)
            print(f"  {_fmt(r)}", file=sys.stderr, flush=True)
    con.close()
    return results


def _fmt(r: dict[str, Any]) -> str:
    s = f"{r['table']:>8} {r['query']:>9} {r['engine']:>6}: raw {r['raw_s']:.3f}s"
    if "lq_s" in r:
        s += f" lakequery {r['lq_s']:.3f}s (e2e {r['lq_e2e_s']:.3f}s) match={r['match']}"
    if "error" in r:
        s += f" lakequery ERROR {r['error']}"
    return s + f" files {r['planned_files']}/{r['total_files']}"


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| table | query | engine | raw (s) | lakequery (s) | lakequery e2e (s) | "
        "ratio lq/raw | ratio e2e/raw | files planned / total (deltalake) | match |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        files = f"{r['planned_files']} / {r['total_files']} ({r['deltalake_pruned_files']})"
        if "lq_s" in r:
            lines.append(
                f"| {r['table']} | {r['query']} | {r['engine']} | {r['raw_s']:.3f} | "
                f"{r['lq_s']:.3f} | {r['lq_e2e_s']:.3f} | {r['lq_s'] / r['raw_s']:.2f} | "
                f"{r['lq_e2e_s'] / r['raw_s']:.2f} | {files} | {r['match']} |"
            )
        else:
            err = str(r.get("error", ""))[:100]
            lines.append(
                f"| {r['table']} | {r['query']} | {r['engine']} | {r['raw_s']:.3f} | "
                f"error: {err} | | | | {files} | |"
            )
    return "\n".join(lines)


def find_tables(scan_dir: Path = DEFAULT_SCAN_DIR) -> list[Path]:
    return sorted(
        p.parent / p.name.removesuffix(".manifest.json") for p in scan_dir.glob("*.manifest.json")
    )


def run(tables: list[Path], repeat: int = 5) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for t in tables:
        results += bench_table(t, repeat)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tables", nargs="*", type=Path, help="table dirs (default: all generated)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", type=Path, help="also write raw results here")
    a = p.parse_args(argv)
    tables = a.tables or find_tables()
    if not tables:
        print(
            "no tables found; generate them with benchmarks.synth_data or run_all", file=sys.stderr
        )
        return 1
    results = run(tables, a.repeat)
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
