"""Deletion-vector benchmarks (issue: DVs end to end).

1. Scan overhead: a copy of the ``flat`` table (``synth_data``, ~5M rows, 32 files) gets
   ~1% of its rows deleted through deletion vectors (random rows in every file plus one
   contiguous run), written by lakequery's ``DeletionVectorWriter`` and committed as the
   next version. A second table holds exactly the remaining rows without DVs (same file
   count, written by ``deltalake``). The same aggregate runs over both through lakequery's
   DuckDB, Arrow and Polars paths, best of N, side by side; ``deltalake``'s QueryBuilder is
   timed on the DV table for comparison.
2. Kernel micro-benchmarks: ``udfs.dv_mask.keep_mask`` and ``keep_bits`` over 10M rows at
   0.01%, 1% and 50% deleted.

CLI::

    python -m benchmarks.bench_dv                  # uses benchmarks/data/scan/flat_5m
    python -m benchmarks.bench_dv --repeat 7
    python -m benchmarks.bench_dv --repeat 15 --duckdb-variants   # + DuckDB filters tried
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "data" / "scan" / "flat_5m"
DV_TABLE = HERE / "data" / "dv" / "flat_5m_dv"
PLAIN_TABLE = HERE / "data" / "dv" / "flat_5m_plain"
AGG = (
    "SELECT category, SUM(value) AS sum_value, COUNT(*) AS n, AVG(qty) AS avg_qty "
    "FROM t GROUP BY category ORDER BY category"
)


def _best(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _best_pair(
    a: Callable[[], Any], b: Callable[[], Any], repeat: int
) -> tuple[float, float, float, float]:
    """Best wall and process-CPU times of two runs taken alternately, so both see the same
    machine load: ``(wall a, wall b, cpu a, cpu b)``. CPU time (all threads of this
    process) is less disturbed by other processes on a shared machine than wall time."""
    a()
    b()
    wall = [float("inf"), float("inf")]
    cpu = [float("inf"), float("inf")]
    for _ in range(repeat):
        for i, fn in enumerate((a, b)):
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            wall[i] = min(wall[i], time.perf_counter() - w0)
            cpu[i] = min(cpu[i], time.process_time() - c0)
    return wall[0], wall[1], cpu[0], cpu[1]


def _commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "DELETE"}}
    lines = "\n".join(json.dumps(a) for a in [info, *actions]) + "\n"
    target = root / "_delta_log" / f"{version:020d}.json"
    with open(target, "x") as f:  # create-if-absent
        f.write(lines)


def build_tables(fraction: float = 0.01, seed: int = 7) -> dict[str, Any]:
    """Creates the DV table and its DV-free twin (once)."""
    import deltalake
    import pyarrow as pa
    import pyarrow.parquet as pq

    import lakequery as lq
    from lakequery.dv.writer import DeletionVectorWriter

    if DV_TABLE.exists() and PLAIN_TABLE.exists():
        return json.loads((DV_TABLE.parent / "manifest.json").read_text())
    if not SOURCE.exists():
        raise SystemExit(
            f"{SOURCE} is missing: run python -m benchmarks.run_all --skip-snapshot first"
        )
    shutil.rmtree(DV_TABLE.parent, ignore_errors=True)
    shutil.copytree(SOURCE, DV_TABLE)
    snap = lq.DeltaTable(str(DV_TABLE)).snapshot()
    log = [
        json.loads(line)
        for f in sorted((DV_TABLE / "_delta_log").glob("*.json"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    adds = {a["add"]["path"]: a["add"] for a in log if "add" in a}
    rng = np.random.default_rng(seed)
    writer = DeletionVectorWriter(snap.storage)
    kept: list[pa.Table] = []
    deleted_total = 0
    for i, path in enumerate(sorted(adds)):
        table = pq.read_table(DV_TABLE / path)
        n = table.num_rows
        rows = rng.choice(n, size=int(n * fraction * 0.8), replace=False)
        if i == 0:  # one contiguous run as well
            rows = np.union1d(rows, np.arange(1000, 1000 + int(n * fraction * 0.2 * 32)))
        rows = np.unique(rows)
        writer.delete_rows(adds[path], rows)
        mask = np.ones(n, dtype=bool)
        mask[rows] = False
        kept.append(table.filter(pa.array(mask)))
        deleted_total += len(rows)
    _commit(DV_TABLE, snap.version + 1, _upgrade(snap) + writer.finish())
    for part in kept:
        deltalake.write_deltalake(str(PLAIN_TABLE), part, mode="append")
    info = {"rows_deleted": deleted_total, "rows_kept": sum(t.num_rows for t in kept)}
    (DV_TABLE.parent / "manifest.json").write_text(json.dumps(info))
    return info


def _upgrade(snap: Any) -> list[dict[str, Any]]:
    """Protocol (3, 7) with deletionVectors, and the property that allows writing them."""
    meta = snap.metadata.to_action()
    meta["configuration"] = dict(meta["configuration"], **{"delta.enableDeletionVectors": "true"})
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "appendOnly", "invariants"],
    }
    return [{"protocol": protocol}, {"metaData": meta}]


def scan_overhead(repeat: int) -> list[dict[str, Any]]:
    import deltalake
    import duckdb
    import polars as pl
    import pyarrow.compute as pc

    import lakequery as lq

    out = []
    snaps = {
        name: lq.DeltaTable(str(p)).snapshot()
        for name, p in (("dv", DV_TABLE), ("plain", PLAIN_TABLE))
    }
    con = duckdb.connect()

    def run_duckdb(name: str) -> Any:
        return snaps[name].scan().to_duckdb(con).query("t", AGG).fetchall()

    def run_polars(name: str) -> Any:
        return snaps[name].scan().to_polars().sql(AGG.replace("FROM t", "FROM self")).collect()

    def run_arrow(name: str) -> Any:
        table = snaps[name].scan(columns=["category", "value", "qty"]).to_arrow()
        return table.group_by("category").aggregate([("value", "sum"), ("qty", "mean")])

    assert run_duckdb("dv") == run_duckdb("plain") or _close(run_duckdb("dv"), run_duckdb("plain"))
    for engine, fn in (("duckdb", run_duckdb), ("arrow", run_arrow), ("polars", run_polars)):
        t_dv, t_plain, c_dv, c_plain = _best_pair(
            lambda fn=fn: fn("dv"), lambda fn=fn: fn("plain"), repeat
        )
        out.append(
            {
                "engine": engine,
                "dv_s": t_dv,
                "plain_s": t_plain,
                "ratio": t_dv / t_plain,
                "cpu_ratio": c_dv / c_plain,
            }
        )
    dt = deltalake.DeltaTable(str(DV_TABLE))

    def run_qb() -> Any:
        return deltalake.QueryBuilder().register("t", dt).execute(AGG).read_all()

    t_qb = _best(run_qb, repeat)
    out.append(
        {
            "engine": "deltalake QueryBuilder (DV table)",
            "dv_s": t_qb,
            "plain_s": None,
            "ratio": None,
            "cpu_ratio": None,
        }
    )
    del pc, pl
    return out


def _close(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    return all(
        x[0] == y[0] and x[2] == y[2] and abs(x[1] - y[1]) <= 1e-6 * abs(y[1])
        for x, y in zip(a, b, strict=True)
    )


def duckdb_variants(repeat: int) -> list[dict[str, Any]]:
    """Ways to drop DV rows in DuckDB SQL, timed on the DV table's 32 files (the aggregate
    straight over ``read_parquet``), each against the plain read of the same files, all
    alternated round-robin: the cost floors (``file_row_number`` alone, a filter on it, one
    scan per file) and the filters tried."""
    import duckdb
    import pyarrow as pa

    import lakequery as lq
    from lakequery.engines.deletion import deleted_rows
    from udfs.dv_mask import keep_mask

    snap = lq.DeltaTable(str(DV_TABLE)).snapshot()
    plan = snap.scan().plan()
    deleted = deleted_rows(plan, snap.storage)
    locs = plan.location_list
    counts = dict(zip(locs, plan.files.column("num_records").to_pylist(), strict=True))
    con = duckdb.connect()
    con.execute("SET parquet_metadata_cache = true")
    files = np.repeat(np.arange(len(locs)), [len(deleted[p]) for p in locs])
    keys = files * (1 << 32) + np.concatenate([deleted[p] for p in locs])
    con.register("dv_keys", pa.table({"k": keys}))
    for i, p in enumerate(locs):
        con.register(f"keep_{i}", pa.table({"keep": keep_mask(deleted[p], 0, counts[p])}))
    keep_all = np.concatenate([keep_mask(deleted[p], 0, counts[p]) for p in locs])
    starts = np.concatenate([[0], np.cumsum([counts[p] for p in locs])])

    def keep_udf(file_index: Any, row: Any) -> Any:
        idx = starts[file_index.to_numpy().astype(np.int64)] + row.to_numpy()
        return pa.array(keep_all[idx])

    con.create_function("lq_keep", keep_udf, ["BIGINT", "BIGINT"], "BOOLEAN", type="arrow")
    every = "[" + ", ".join(f"'{p}'" for p in locs) + "]"
    rn = f"read_parquet({every}, file_row_number=true)"
    variants = {
        "plain read_parquet (baseline)": f"read_parquet({every})",
        "file_row_number >= 0 (pushed, all true)": f"(SELECT * FROM {rn} WHERE file_row_number >= 0)",
        "one read_parquet per file, UNION ALL, no filter": "("
        + " UNION ALL ".join(f"SELECT * FROM read_parquet('{p}')" for p in locs)
        + ")",
        "anti-join on (file_index, row) key (lakequery)": (
            f"(SELECT d.* FROM {rn} AS d ANTI JOIN dv_keys AS x ON x.k = "
            "CAST(d.file_index AS BIGINT) * 4294967296 + d.file_row_number)"
        ),
        "POSITIONAL JOIN keep mask, per file": "("
        + " UNION ALL ".join(
            f"SELECT * FROM read_parquet('{p}') POSITIONAL JOIN keep_{i} WHERE keep"
            for i, p in enumerate(locs)
        )
        + ")",
        "Arrow scalar UDF keep(file_index, row)": (
            f"(SELECT * FROM {rn} WHERE lq_keep(CAST(file_index AS BIGINT), file_row_number))"
        ),
    }
    agg = AGG.replace("GROUP BY category ORDER BY category", "GROUP BY category")
    runs = {
        name: (lambda src=src: con.sql(agg.replace("FROM t", f"FROM {src}")).fetchall())
        for name, src in variants.items()
    }
    for run in runs.values():
        run()
    best = dict.fromkeys(runs, float("inf"))
    cpu = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            c0, w0 = time.process_time(), time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - w0)
            cpu[name] = min(cpu[name], time.process_time() - c0)
    base = next(iter(variants))
    return [
        {"variant": k, "seconds": v, "ratio": v / best[base], "cpu_ratio": cpu[k] / cpu[base]}
        for k, v in best.items()
    ]


def kernel_micro(repeat: int) -> list[dict[str, Any]]:
    from udfs.dv_mask import keep_bits, keep_mask

    n = 10_000_000
    rng = np.random.default_rng(1)
    rows = []
    for frac in (0.0001, 0.01, 0.5):
        deleted = np.sort(rng.choice(n, size=int(n * frac), replace=False)).astype(np.int64)
        t = _best(lambda d=deleted: keep_mask(d, 0, n), repeat)
        t_bits = _best(lambda d=deleted: keep_bits(d, n), repeat)
        rows.append(
            {
                "deleted": f"{frac:.2%}",
                "rows": n,
                "seconds": t,
                "rows_per_s": n / t,
                "bits_seconds": t_bits,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--duckdb-variants", action="store_true", help="also time DV filters tried in DuckDB"
    )
    args = parser.parse_args()
    info = build_tables()
    print(f"DV table: {info['rows_deleted']} rows deleted, {info['rows_kept']} kept")
    print(
        "\n| engine | DV table (s) | same rows, no DVs (s) | ratio | CPU-time ratio |"
        "\n|---|---:|---:|---:|---:|"
    )
    for r in scan_overhead(args.repeat):
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "-"
        cpu = f"{r['cpu_ratio']:.2f}" if r["cpu_ratio"] else "-"
        plain = f"{r['plain_s']:.3f}" if r["plain_s"] else "-"
        print(f"| {r['engine']} | {r['dv_s']:.3f} | {plain} | {ratio} | {cpu} |")
    if args.duckdb_variants:
        print(
            "\n| DuckDB variant (32 DV files) | s | vs plain read | CPU-time ratio |"
            "\n|---|---:|---:|---:|"
        )
        for r in duckdb_variants(args.repeat):
            print(
                f"| {r['variant']} | {r['seconds']:.3f} | {r['ratio']:.2f} | {r['cpu_ratio']:.2f} |"
            )
    print(
        "\n| deleted | rows | keep_mask (s) | rows/s | keep_bits (s) |\n|---|---:|---:|---:|---:|"
    )
    for r in kernel_micro(args.repeat):
        print(
            f"| {r['deleted']} | {r['rows']} | {r['seconds']:.4f} | {r['rows_per_s']:.3g} "
            f"| {r['bits_seconds']:.4f} |"
        )


if __name__ == "__main__":
    main()
