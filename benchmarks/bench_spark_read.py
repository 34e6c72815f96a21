"""Spark read benchmark: ``lakequery.spark.read`` against Spark's own Parquet reader, with
and without deletion vectors, and the ``lakequery`` Python data source (read and write).

One table of ``--rows`` rows in ``--files`` files (``id``, ``a`` int, ``b`` double, ``s``
string) is written once by lakequery (cached under ``benchmarks/data``), copied, and ~1%
of the copy's rows are deleted with deletion vectors (``id % 100 = 7``). All timings run in
one Spark session (``local[2]``; its start-up is excluded), alternating the contenders,
and report the best and the median of ``--repeat`` runs of ``SELECT sum(a), avg(b)``:

- ``spark.read.parquet`` of the plain table's data files (no Delta log at all);
- ``lakequery.spark.read`` of the plain table (snapshot + planning on the driver included);
- ``lakequery.spark.read`` of the DV table (DVs loaded, deleted rows filtered out), and of
  its twin: the same remaining rows in as many files without deletion vectors;
- the floor of any position-based DV filter in Spark: ``spark.read.parquet`` of the DV
  table's files producing ``_metadata.row_index`` (and deleting nothing), and the same
  through the internal column Spark fills with positions (no ``_metadata`` struct);
- ``spark.read.format("lakequery")`` of both (rows pass through Python workers);
- writes of the same ``--rows`` generated rows: ``df.write.parquet`` against
  ``df.write.format("lakequery")`` and ``lakequery.spark.write``.

CLI::

    python -m benchmarks.bench_spark_read                  # 10M rows, 16 files, best of 5
    python -m benchmarks.bench_spark_read --rows 1000000 --repeat 3 --skip-writes
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.bench_spark_write import COLUMNS, make_session

DATA = Path(__file__).resolve().parent / "data"


def build_tables(rows: int, files: int) -> tuple[str, str]:
    """(plain table, DV table) of ``rows`` rows in ``files`` files, cached by size."""

    root = DATA / f"spark_read_{rows}_{files}"
    plain, dv = root / "plain", root / "dv"
    if (dv / "_delta_log").is_dir():
        return str(plain), str(dv)
    _build(plain, dv, root, rows, files)
    return str(plain), str(dv)


def build_twin(rows: int, files: int) -> str:
    """The DV table's remaining rows in ``files`` files without deletion vectors."""
    import pyarrow.parquet as pq

    import lakequery as lq

    plain, _ = build_tables(rows, files)
    twin = DATA / f"spark_read_{rows}_{files}" / "twin"
    if (twin / "_delta_log").is_dir():
        return str(twin)
    shutil.rmtree(twin, ignore_errors=True)
    scan = lq.DeltaTable(plain).snapshot().scan()
    for location in scan.plan().location_list:  # one file per file, as in the DV table
        table = pq.read_table(location)
        keep = table.column("id").to_numpy() % 100 != 7
        lq.write(str(twin), table.filter(pa.array(keep)), mode="append")
    return str(twin)


def _build(plain: Path, dv: Path, root: Path, rows: int, files: int) -> None:
    import lakequery as lq

    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(0)
    per = rows // files
    for i in range(files):
        ids = np.arange(i * per, (i + 1) * per)
        table = pa.table(
            {
                "id": ids,
                "a": rng.integers(0, 1000, per, dtype=np.int32),
                "b": rng.random(per),
                "s": pa.array(np.char.add("k", (ids % 1000).astype(str))),
            }
        )
        lq.write(str(plain), table, mode="append")
    shutil.copytree(plain, dv)
    lq.DeltaTable(str(dv)).delete("id % 100 = 7")


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def run(rows: int, files: int, repeat: int, writes: bool) -> list[tuple[str, list[float]]]:
    from pyspark.sql import functions as F

    import lakequery as lq
    import lakequery.spark as lqs

    spark = make_session("local[2]", "6g")
    plain, dv = build_tables(rows, files)
    locations = lq.DeltaTable(plain).snapshot().scan().plan().location_list
    has_source = hasattr(lqs, "register")
    if has_source:
        lqs.register(spark)

    def agg(df: Any) -> Any:
        return df.agg(F.sum("a"), F.avg("b")).collect()

    twin = build_twin(rows, files)
    dv_locations = lq.DeltaTable(dv).snapshot().scan().plan().location_list
    positions = F.col("_metadata.row_index")
    contenders: list[tuple[str, Callable[[], Any]]] = [
        ("spark.read.parquet (files)", lambda: agg(spark.read.parquet(*locations))),
        ("lakequery.spark.read", lambda: agg(lqs.read(spark, plain))),
        ("lakequery.spark.read, twin without DVs", lambda: agg(lqs.read(spark, twin))),
        ("lakequery.spark.read, 1% DV", lambda: agg(lqs.read(spark, dv))),
        (
            "spark.read.parquet (DV files) + row_index",
            lambda: agg(spark.read.parquet(*dv_locations).where(positions >= 0)),
        ),
        # Spark's internal name for the column its Parquet reader fills with positions
        # (what _metadata.row_index is built from, without the per-row _metadata struct)
        (
            "spark.read.parquet (DV files) + internal row index column",
            lambda: agg(
                spark.read.schema("a int, b double, _tmp_metadata_row_index long")
                .parquet(*dv_locations)
                .where("_tmp_metadata_row_index >= 0")
            ),
        ),
    ]
    if has_source:
        contenders += [
            ('format("lakequery")', lambda: agg(spark.read.format("lakequery").load(plain))),
            ('format("lakequery"), 1% DV', lambda: agg(spark.read.format("lakequery").load(dv))),
        ]
    results: dict[str, list[float]] = {name: [] for name, _ in contenders}
    for _name, fn in contenders:  # warm-up: JIT, Python workers, page cache
        fn()
    for _ in range(repeat):
        for name, fn in contenders:
            results[name] += timed(fn, 1)
    if writes:
        source = spark.range(0, rows, 1, 8).selectExpr(*COLUMNS)
        scratch = Path(tempfile.mkdtemp(prefix="lq-spark-bench-"))
        count = iter(range(10**6))

        def target() -> str:
            return str(scratch / f"t{next(count)}")

        writers: list[tuple[str, Callable[[], Any]]] = [
            (
                "df.write.parquet (zstd)",
                lambda: source.write.option("compression", "zstd").parquet(target()),
            ),
            ("lakequery.spark.write", lambda: lqs.write(source, target())),
        ]
        if has_source:
            writers.append(
                (
                    'df.write.format("lakequery")',
                    lambda: source.write.format("lakequery").mode("append").save(target()),
                )
            )
        for name, _ in writers:
            results[name] = []
        for _ in range(max(1, repeat // 2)):
            for name, fn in writers:
                results[name] += timed(fn, 1)
        shutil.rmtree(scratch, ignore_errors=True)
    spark.stop()
    return list(results.items())


def report(results: list[tuple[str, list[float]]]) -> str:
    best = {name: min(ts) for name, ts in results}
    lines = ["| contender | best s | median s | best ratio |", "|---|---|---|---|"]
    bases = {
        "lakequery.spark.read": "spark.read.parquet (files)",
        "lakequery.spark.read, twin without DVs": "spark.read.parquet (files)",
        "lakequery.spark.read, 1% DV": "lakequery.spark.read, twin without DVs",
        "spark.read.parquet (DV files) + row_index": "spark.read.parquet (files)",
        "spark.read.parquet (DV files) + internal row index column": "spark.read.parquet (files)",
        'format("lakequery")': "lakequery.spark.read",
        'format("lakequery"), 1% DV': "lakequery.spark.read, 1% DV",
        "lakequery.spark.write": "df.write.parquet (zstd)",
        'df.write.format("lakequery")': "df.write.parquet (zstd)",
    }
    for name, ts in results:
        base = bases.get(name)
        ratio = f"{best[name] / best[base]:.2f}x {base}" if base in best else ""
        lines.append(f"| {name} | {min(ts):.3f} | {statistics.median(ts):.3f} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-writes", action="store_true")
    args = parser.parse_args()
    print(report(run(args.rows, args.files, args.repeat, not args.skip_writes)))


if __name__ == "__main__":
    main()
