"""lakequery against Spark's own Delta Lake (delta-spark, ``local[2]``) (issue 14, item 7).

Spark-Delta is the only other engine here that writes deletion vectors, so it is the peer
for DML with DVs. Both sides run in this one process, warm: one Spark session is started
and every Spark operation runs once on a throwaway copy before anything is timed, and
lakequery runs each operation once the same way (imports, numba kernels). **Spark's
start-up (JVM, session, first job) is excluded** from every figure; so is lakequery's
import.

Operations, on the data of the deltalake comparisons:

* ``delete`` / ``update`` / ``merge``: ``bench_dml``'s base table (``--rows`` rows in
  ``--files`` files, written by lakequery with ``delta.enableDeletionVectors``); each run
  works on a fresh copy of it (the copy is not timed), so both engines change the very
  same files and both write deletion vectors. Predicates and the 1% MERGE source are
  ``bench_dml``'s (``qty = 7``; ``qty = 3`` with ``value = value + 1, qty = qty * 2``;
  ``id`` matched, update all / insert all). The MERGE source is in memory on both sides
  (an Arrow table; a cached Spark DataFrame).
* ``zorder``: ``bench_maintenance``'s Z-order data (``--zorder-rows`` rows, four numeric
  columns + payload, 8 files written by lakequery); ``OPTIMIZE ... ZORDER BY (a, b)`` vs
  ``optimize(z_order_by=["a", "b"])``, both with the same target file size (Spark's
  ``spark.databricks.delta.optimize.maxFileSize``).
* ``write``: ``bench_write``'s rows (``--write-rows``, default 10M) from one Parquet file
  on disk into a new table: ``spark.read.parquet(src).write.format("delta")`` vs
  ``lq.write(uri, pyarrow.parquet.read_table(src))``. Codecs differ (Spark: snappy,
  lakequery: zstd), as each engine's default.

Sides alternate (lakequery first in odd repeats). After every operation the table is read
by lakequery and count(*) / sum(id) checked against the expected values, so a fast wrong
answer cannot win. Ratios are lakequery / Spark-Delta medians (< 1 means lakequery is
faster).

CLI::

    python -m benchmarks.bench_spark_delta                     # 5M DML rows, 10M write, 3 repeats
    python -m benchmarks.bench_spark_delta --rows 500000 --write-rows 1000000 --repeat 1
    python -m benchmarks.bench_spark_delta --ops delete,merge
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks import bench_dml, bench_maintenance, bench_write

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_WORKDIR = HERE / "data" / "spark_delta"
OPS = ("delete", "update", "merge", "zorder", "write")


def make_session(memory: str) -> Any:
    """Spark with delta-spark's jars (``make delta-jars`` fetches them), set up as the
    test suite's (loopback only, ``local[2]``, a snapshot's state in 2 partitions: tuned
    for one machine), with ``memory`` for the driver."""
    sys.path.insert(0, str(REPO / "tests" / "delta_spark"))
    from sparkkit import delta_session  # the test suite's session: one set of settings

    return delta_session("lakequery-bench-spark-delta", **{"spark.driver.memory": memory})


def _copy(src: Path, dst: Path) -> str:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return str(dst)


def _check(uri: str, column: str = "id") -> dict[str, int]:
    """count(*) and sum(``column``) as lakequery reads the table."""
    import lakequery as lq

    con = lq.DeltaTable(uri).snapshot().scan(columns=[column]).to_duckdb()
    ((count, total),) = con.aggregate(f"count(*), sum({column})").fetchall()
    return {"count": int(count), "sum_id": int(total)}


class Ops:
    """The timed operations of each side on a table path (everything else set up before)."""

    def __init__(self, spark: Any, rows: int, zorder_target: int) -> None:
        self.spark = spark
        self.source = bench_dml.merge_source(rows)
        self.spark_source = spark.createDataFrame(self.source).cache()
        self.spark_source.count()
        self.spark_source.createOrReplaceTempView("merge_source")
        self.zorder_target = zorder_target

    def lakequery(self, op: str, uri: str, src: str | None = None) -> None:
        import lakequery as lq

        if op == "write":
            assert src is not None
            lq.write(uri, pq.read_table(src))
            return
        dt = lq.DeltaTable(uri)
        if op == "delete":
            dt.delete(bench_dml.DELETE_PRED)
        elif op == "update":
            dt.update(bench_dml.UPDATE_PRED, set=bench_dml.UPDATE_SET)
        elif op == "merge":
            (
                dt.merge(self.source, on="t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        elif op == "zorder":
            dt.optimize(z_order_by=["a", "b"], target_file_size=self.zorder_target)

    def spark_delta(self, op: str, uri: str, src: str | None = None) -> None:
        t = f"delta.`{uri}`"
        if op == "write":
            self.spark.read.parquet(src).write.format("delta").save(uri)
        elif op == "delete":
            self.spark.sql(f"DELETE FROM {t} WHERE {bench_dml.DELETE_PRED}")
        elif op == "update":
            sets = ", ".join(f"{k} = {v}" for k, v in bench_dml.UPDATE_SET.items())
            self.spark.sql(f"UPDATE {t} SET {sets} WHERE {bench_dml.UPDATE_PRED}")
        elif op == "merge":
            self.spark.sql(
                f"MERGE INTO {t} AS t USING merge_source AS s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )
        elif op == "zorder":
            self.spark.conf.set(
                "spark.databricks.delta.optimize.maxFileSize", str(self.zorder_target)
            )
            self.spark.sql(f"OPTIMIZE {t} ZORDER BY (a, b)")


def _zorder_base(work: Path, rows: int) -> Path:
    import lakequery as lq

    base = work / f"zorder_{rows}"
    if not (base / "_delta_log").exists():
        data = bench_maintenance._zorder_rows(rows)
        per = -(-rows // 8)
        for k in range(8):
            lq.write(str(base), data.slice(k * per, per), mode="append")
    return base


def _write_source(work: Path, rows: int) -> Path:
    src = work / f"write_src_{rows}.parquet"
    if not src.exists():
        pq.write_table(bench_write.make_data(rows), src)
    return src


def run(
    ops: list[str],
    rows: int,
    files: int,
    zorder_rows: int,
    write_rows: int,
    repeat: int,
    work: Path,
    memory: str,
) -> list[dict[str, Any]]:
    work.mkdir(parents=True, exist_ok=True)
    dml_base = work / "dml"
    bench_dml.build_bases(rows, files, dml_base, "zstd", regen=False)
    zbase = _zorder_base(work, zorder_rows)
    zorder_target = max(1 << 20, bench_maintenance._size(zbase) // 8)
    src = str(_write_source(work, write_rows)) if "write" in ops else None
    spark = make_session(memory)
    runner = Ops(spark, rows, zorder_target)
    expected_write = {"count": write_rows, "sum_id": write_rows * (write_rows - 1) // 2}

    def base_of(op: str) -> Path | None:
        if op in ("delete", "update", "merge"):
            return dml_base / "base_lakequery"
        return zbase if op == "zorder" else None

    expected_zorder = _check(str(zbase), "c")

    def expect(op: str) -> dict[str, int]:
        if op in ("delete", "update", "merge"):
            return bench_dml.expected(op, rows)
        return expected_write if op == "write" else expected_zorder

    def once(side: str, op: str) -> float:
        base = base_of(op)
        target = work / f"run_{side}"
        if base is None:
            shutil.rmtree(target, ignore_errors=True)
            uri = str(target)
        else:
            uri = _copy(base, target)
        fn: Callable[[str, str, str | None], None] = getattr(runner, side)
        start = time.perf_counter()
        fn(op, uri, src)
        seconds = time.perf_counter() - start
        want, got = expect(op), _check(uri, "c" if op == "zorder" else "id")
        if got != want:
            raise SystemExit(f"{side} {op}: got {got}, expected {want}")
        return seconds

    results = []
    for op in ops:
        for side in ("lakequery", "spark_delta"):  # warm-up, untimed
            once(side, op)
        times: dict[str, list[float]] = {"lakequery": [], "spark_delta": []}
        for k in range(repeat):
            order = ("lakequery", "spark_delta") if k % 2 == 0 else ("spark_delta", "lakequery")
            for side in order:
                times[side].append(once(side, op))
        lq_s, sp_s = (statistics.median(times[s]) for s in ("lakequery", "spark_delta"))
        row = {
            "op": op,
            "rows": write_rows if op == "write" else zorder_rows if op == "zorder" else rows,
            "lakequery_s": round(lq_s, 3),
            "spark_delta_s": round(sp_s, 3),
            "ratio": round(lq_s / sp_s, 3),
            "lakequery_best_s": round(min(times["lakequery"]), 3),
            "spark_delta_best_s": round(min(times["spark_delta"]), 3),
        }
        print(row, flush=True)
        results.append(row)
    spark.stop()
    return results


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| operation | rows | lakequery (median s) | Spark-Delta (median s) | ratio | best: lq / Spark |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['op']} | {r['rows']:,} | {r['lakequery_s']} | {r['spark_delta_s']} | "
            f"{r['ratio']}x | {r['lakequery_best_s']} / {r['spark_delta_best_s']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000, help="DML base table rows")
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--zorder-rows", type=int, default=2_000_000)
    ap.add_argument("--write-rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--memory", default="6g", help="Spark driver memory")
    ap.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = ap.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o]
    unknown = set(ops) - set(OPS)
    if unknown:
        ap.error(f"unknown operations {sorted(unknown)}; choose from {OPS}")
    results = run(
        ops,
        args.rows,
        args.files,
        args.zorder_rows,
        args.write_rows,
        args.repeat,
        args.workdir,
        args.memory,
    )
    print(markdown(results))


if __name__ == "__main__":
    main()
