"""Every kind of table lakequery writes, built with lakequery's public API only.

Each builder takes a fresh table location and leaves a small table there with a few
versions; ``BUILDERS`` names them for parametrisation. ``FILTERS`` are predicates that both
Spark SQL and lakequery parse, used to exercise Spark's data skipping on lakequery's
statistics.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

import lakequery as lq

UTC = dt.timezone.utc

#: Small files, so that every table has several per version (and OPTIMIZE has work).
SMALL = 2_000

STRUCT = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())])


def rows(start: int, n: int, *, parts: tuple[str, ...] = ("a", "b")) -> pa.Table:
    """``n`` rows from id ``start``: most Delta types, nulls, NaN, unicode, and ``p``."""
    ids = list(range(start, start + n))

    def maybe(i: int, every: int, value: Any) -> Any:
        return None if i % every == every - 1 else value

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array([parts[i % len(parts)] for i in ids], pa.string()),
            "i": pa.array([maybe(i, 7, i * 3 - 50) for i in ids], pa.int32()),
            "s": pa.array([maybe(i, 5, f"s{i:04d}-é日本") for i in ids], pa.string()),
            "d": pa.array(
                [float("nan") if i % 11 == 3 else maybe(i, 13, i / 8 - 3.25) for i in ids],
                pa.float64(),
            ),
            "dec": pa.array(
                [maybe(i, 4, Decimal(i * 1125 - 7000).scaleb(-3)) for i in ids],
                pa.decimal128(12, 3),
            ),
            "dt": pa.array(
                [maybe(i, 8, dt.date(2023, 12, 30) + dt.timedelta(days=i)) for i in ids],
                pa.date32(),
            ),
            "ts": pa.array(
                [
                    maybe(i, 9, dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i * 7))
                    for i in ids
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "b": pa.array([maybe(i, 10, i % 3 == 0) for i in ids], pa.bool_()),
            "st": pa.array([maybe(i, 6, {"x": maybe(i, 4, i), "y": f"y{i}"}) for i in ids], STRUCT),
            "arr": pa.array([maybe(i, 5, [i, i + 1]) for i in ids], pa.list_(pa.int64())),
            "m": pa.array(
                [maybe(i, 6, [("k", i), ("z", -i)]) for i in ids],
                pa.map_(pa.string(), pa.int64()),
            ),
        }
    )


def wide(start: int, n: int) -> pa.Table:
    """Types and values where readers and statistics disagree easily: timestamp_ntz, small
    integers, float32 specials, binary, decimal(38, 18), long strings whose bounds are
    truncated (also inside a 4-byte character), deep nesting."""
    ids = list(range(start, start + n))
    emoji = "\U0001f600"
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ntz": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(hours=5 * i) for i in ids],
                pa.timestamp("us"),
            ),
            "i8": pa.array([(i % 200) - 100 for i in ids], pa.int8()),
            "i16": pa.array([i * 7 - 3000 for i in ids], pa.int16()),
            "f32": pa.array(
                [
                    [float("nan"), float("inf"), -0.0, float("-inf")][i % 4]
                    if i % 5 == 0
                    else i / 3
                    for i in ids
                ],
                pa.float32(),
            ),
            "bin": pa.array([bytes([i % 256, 0, 255]) for i in ids], pa.binary()),
            "d38": pa.array([Decimal(i).scaleb(-18) * 10**19 for i in ids], pa.decimal128(38, 18)),
            "ls": pa.array(
                [
                    "x" * 31 + emoji + chr(0x61 + i % 26) * 3 if i % 3 else "x" * 40 + f"{i:05d}"
                    for i in ids
                ]
            ),
            "deep": pa.array(
                [
                    [{"a": i, "b": ["p", None]}, {"a": None, "b": []}] if i % 4 else None
                    for i in ids
                ],
                pa.list_(pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])),
            ),
            "ms": pa.array(
                [[("k", {"x": i / 2})] for i in ids],
                pa.map_(pa.string(), pa.struct([("x", pa.float64())])),
            ),
        }
    )


def narrow(start: int, n: int, *, parts: tuple[str, ...] = ("a", "b")) -> pa.Table:
    """Only ``id``, ``p`` and ``s`` (for tables whose point is not the types)."""
    return rows(start, n, parts=parts).select(["id", "p", "s"])


def _write(uri: str, data: pa.Table, **kw: Any) -> int:
    kw.setdefault("target_file_size", SMALL)
    result = lq.write(uri, data, **kw)
    assert result.version is not None
    return int(result.version)


# --------------------------------------------------------------------------------------------
# writes
# --------------------------------------------------------------------------------------------


def appends(uri: str) -> None:
    _write(uri, rows(0, 40))
    _write(uri, rows(40, 30), mode="append")
    _write(uri, rows(70, 5), mode="append")


def overwrite(uri: str) -> None:
    _write(uri, rows(0, 30))
    _write(uri, rows(30, 10), mode="append")
    _write(uri, rows(100, 20), mode="overwrite")
    _write(uri, rows(200, 5), mode="append")


def overwrite_predicate_partition(uri: str) -> None:
    _write(uri, rows(0, 40, parts=("a", "b", "c")), partition_by=["p"])
    _write(uri, rows(100, 6, parts=("a",)), mode="overwrite", predicate="p = 'a'")
    _write(uri, rows(200, 6, parts=("b", "c")), mode="overwrite", predicate="p IN ('b', 'c')")


def overwrite_predicate_data(uri: str) -> None:
    # copy-on-write: the non-matching rows of the candidate files are rewritten
    _write(uri, rows(0, 40))
    _write(
        uri,
        rows(100, 8).set_column(0, "id", pa.array(range(20, 28), pa.int64())),
        mode="overwrite",
        predicate="id >= 20 AND id < 28",
    )


AWKWARD = (
    "plain",
    "with space",
    "50%",
    "a=b",
    "slash/inside",
    "colon:hash#?",
    "ünï©ødé 日本",
    "quote'\"",
    "",  # empty string: a null partition value (digest §9.1)
    "__HIVE_DEFAULT_PARTITION__x",
)


def partition_awkward_strings(uri: str) -> None:
    n = len(AWKWARD) + 1
    data = narrow(0, n * 2)
    values = [None if i % n == n - 1 else AWKWARD[i % n] for i in range(n * 2)]
    data = data.set_column(1, "p", pa.array(values, pa.string()))
    _write(uri, data, partition_by=["p"])
    _write(
        uri,
        data.slice(0, 4).set_column(0, "id", pa.array([90, 91, 92, 93], pa.int64())),
        mode="append",
    )


def partition_typed(uri: str) -> None:
    """Partitioned by date, timestamp, int, boolean and decimal, nulls included."""
    n = 12
    data = narrow(0, n)
    day = [
        None if i % 5 == 4 else dt.date(2024, 2, 28) + dt.timedelta(days=i % 3) for i in range(n)
    ]
    when = [
        None
        if i % 4 == 3
        else dt.datetime(2024, 6, 15, 19, 30, 45, 123456 * (i % 2), tzinfo=UTC)
        + dt.timedelta(hours=i % 3)
        for i in range(n)
    ]
    data = (
        data.append_column("day", pa.array(day, pa.date32()))
        .append_column("at", pa.array(when, pa.timestamp("us", tz="UTC")))
        .append_column("n", pa.array([None if i == 5 else i % 2 - 1 for i in range(n)], pa.int32()))
        .append_column("flag", pa.array([None if i == 7 else i % 2 == 0 for i in range(n)]))
        .append_column(
            "amt",
            pa.array(
                [Decimal("-1.50") if i % 2 else Decimal("10.25") for i in range(n)],
                pa.decimal128(6, 2),
            ),
        )
    )
    _write(uri, data, partition_by=["day", "at", "n", "flag", "amt"])
    more = data.slice(0, 3)
    _write(uri, more.set_column(0, "id", pa.array([100, 101, 102], pa.int64())), mode="append")


def wide_types(uri: str) -> None:
    _write(uri, wide(0, 30))
    _write(uri, wide(30, 30), mode="append")
    assert lq.DeltaTable(uri).delete("id % 4 = 1").committed
    lq.DeltaTable(uri).checkpoint()


def schema_merge(uri: str) -> None:
    _write(uri, narrow(0, 20))
    extra = narrow(20, 10).append_column("note", pa.array([f"n{i}" for i in range(10)]))
    _write(uri, extra, mode="append", schema_mode="merge")
    nested = narrow(30, 5).append_column(
        "st", pa.array([{"x": i, "y": None} for i in range(5)], STRUCT)
    )
    _write(uri, nested, mode="append", schema_mode="merge")
    deeper = narrow(35, 3).append_column(
        "st",
        pa.array(
            [{"x": i, "y": "q", "z": 1.5} for i in range(3)],
            pa.struct([("x", pa.int32()), ("y", pa.string()), ("z", pa.float64())]),
        ),
    )
    _write(uri, deeper, mode="append", schema_mode="merge")


def overwrite_schema(uri: str) -> None:
    """``schema_mode="overwrite"``: new columns, types and partitioning in one commit."""
    _write(uri, rows(0, 20), partition_by=["p"])
    new = narrow(100, 10).append_column("v", pa.array([1.5] * 10, pa.float32()))
    _write(uri, new, mode="overwrite", schema_mode="overwrite", partition_by=["s"])
    _write(
        uri, new.slice(0, 2).set_column(0, "id", pa.array([200, 201], pa.int64())), mode="append"
    )


def stats_columns(uri: str) -> None:
    """Statistics for chosen columns only (``delta.dataSkippingStatsColumns``)."""
    conf = {"delta.dataSkippingStatsColumns": "id,st.x,ts"}
    _write(uri, rows(0, 30), configuration=conf)
    _write(uri, rows(30, 30), mode="append")


def type_widening(uri: str) -> None:
    small = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "v": pa.array([1, 2], pa.int16()),
            "f": pa.array([0.5, 1.5], pa.float32()),
        }
    )
    _write(uri, small)
    wide = pa.table(
        {
            "id": pa.array([3], pa.int64()),
            "v": pa.array([70_000], pa.int32()),
            "f": pa.array([1e300], pa.float64()),
        }
    )
    _write(uri, wide, mode="append", schema_mode="merge")
    _write(uri, wide.set_column(0, "id", pa.array([4], pa.int64())), mode="append")


# --------------------------------------------------------------------------------------------
# DML
# --------------------------------------------------------------------------------------------


def _dml(
    uri: str, *, cow: bool, partitioned: bool, cdf: bool = False, conf: dict[str, str] | None = None
) -> None:
    conf = dict(conf or {})
    if cow:
        conf["delta.enableDeletionVectors"] = "false"
    if cdf:
        conf["delta.enableChangeDataFeed"] = "true"
    _write(
        uri,
        rows(0, 60, parts=("a", "b", "c")),
        configuration=conf,
        partition_by=["p"] if partitioned else None,
    )
    dt_ = lq.DeltaTable(uri)
    assert dt_.delete("id % 7 = 1").committed
    assert dt_.update("id % 5 = 0", set={"s": "'updated'", "i": "i + 1000"}).committed
    if partitioned:
        assert dt_.delete("p = 'c'").committed  # whole files
        assert dt_.update("id < 6", set={"p": "'moved'"}).committed  # rows change partition
    source = rows(50, 20, parts=("a", "z")).set_column(3, "s", pa.array(["merged"] * 20))
    m = (
        dt_.merge(source, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all(predicate="t.id % 2 = 0")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .execute()
    )
    assert m.committed
    assert dt_.delete("id BETWEEN 20 AND 24").committed  # a second DV on the same files


def dml_dv(uri: str) -> None:
    _dml(uri, cow=False, partitioned=False)


def dml_copy_on_write(uri: str) -> None:
    _dml(uri, cow=True, partitioned=False)


def dml_dv_partitioned(uri: str) -> None:
    _dml(uri, cow=False, partitioned=True)


def dml_copy_on_write_partitioned(uri: str) -> None:
    _dml(uri, cow=True, partitioned=True)


def cdf_dv(uri: str) -> None:
    _dml(uri, cow=False, partitioned=True, cdf=True)
    _write(uri, rows(300, 4, parts=("a",)), mode="append")
    _write(uri, rows(400, 4, parts=("b",)), mode="overwrite", predicate="p = 'b'")


def cdf_copy_on_write(uri: str) -> None:
    """Also with in-commit timestamps: ``_commit_timestamp`` is the ICT then."""
    _dml(
        uri, cow=True, partitioned=False, cdf=True, conf={"delta.enableInCommitTimestamps": "true"}
    )
    _write(uri, rows(300, 4), mode="overwrite")


def cdf_maintenance(uri: str) -> None:
    """The change feed across OPTIMIZE (no changes), RESTORE (files and DVs back) and
    Z-order."""
    _write(uri, rows(0, 30), configuration={"delta.enableChangeDataFeed": "true"})
    _write(uri, rows(30, 10), mode="append")
    dt_ = lq.DeltaTable(uri)
    assert dt_.delete("id % 3 = 0").committed  # v2: DVs
    assert dt_.update("id % 5 = 1", set={"s": "'u'"}).committed  # v3: DVs grow
    assert dt_.optimize().version is not None  # v4
    assert dt_.restore(version=2).version is not None  # v5: the v2 files and DVs again
    assert dt_.optimize(z_order_by=["id", "d"], target_file_size=SMALL).version is not None
    assert dt_.restore(version=3).version is not None  # v7


def cdf_column_mapping(uri: str) -> None:
    """Change data feed on a column-mapped table, across an added column."""
    _dml(uri, cow=False, partitioned=False, cdf=True, conf={"delta.columnMapping.mode": "name"})
    late = rows(500, 5).append_column("late col", pa.array(["x"] * 5))
    _write(uri, late, mode="append", schema_mode="merge")
    assert lq.DeltaTable(uri).update("id = 502", set={"late col": "'y'"}).committed


# --------------------------------------------------------------------------------------------
# table features
# --------------------------------------------------------------------------------------------


def _column_mapping(uri: str, mode: str) -> None:
    _write(uri, rows(0, 30), configuration={"delta.columnMapping.mode": mode}, partition_by=["p"])
    _write(
        uri,
        rows(30, 10).append_column("late col", pa.array([f"l{i}" for i in range(10)])),
        mode="append",
        schema_mode="merge",
    )
    dt_ = lq.DeltaTable(uri)
    assert dt_.delete("id % 4 = 0").committed
    assert dt_.update("id % 3 = 0", set={"s": "'u'"}).committed


def column_mapping_name(uri: str) -> None:
    _column_mapping(uri, "name")


def column_mapping_id(uri: str) -> None:
    _column_mapping(uri, "id")


def check_constraints(uri: str) -> None:
    conf = {
        "delta.constraints.id_positive": "id >= 0",
        "delta.constraints.s_set": "s IS NOT NULL OR id % 5 = 4",
    }
    _write(uri, narrow(0, 20), configuration=conf)
    _write(uri, narrow(20, 5), mode="append")


def generated_columns(uri: str) -> None:
    gen = {b"delta.metadata": json.dumps({"delta.generationExpression": "id * 2"}).encode()}
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("twice", pa.int64(), metadata=gen),
            pa.field("s", pa.string()),
        ]
    )
    _write(uri, pa.table({"id": [1, 2], "twice": [2, 4], "s": ["a", "b"]}, schema=schema))
    _write(uri, pa.table({"id": [3, 4], "s": ["c", "d"]}), mode="append")  # computed


def in_commit_timestamps(uri: str) -> None:
    _write(uri, narrow(0, 10), configuration={"delta.enableInCommitTimestamps": "true"})
    _write(uri, narrow(10, 10), mode="append")
    assert lq.DeltaTable(uri).delete("id < 3").committed


def row_tracking(uri: str) -> None:
    _write(uri, narrow(0, 20), configuration={"delta.enableRowTracking": "true"})
    _write(uri, narrow(20, 10), mode="append")
    assert lq.DeltaTable(uri).delete("id % 3 = 0").committed
    _write(uri, narrow(30, 3), mode="append")


# --------------------------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------------------------


def _checkpointed(uri: str, conf: dict[str, str], *, partitioned: bool = True) -> None:
    conf = {"delta.checkpointInterval": "3", **conf}
    _write(uri, rows(0, 20), configuration=conf, partition_by=["p"] if partitioned else None)
    _write(uri, rows(20, 10), mode="append")
    dt_ = lq.DeltaTable(uri)
    assert dt_.delete("id % 4 = 0").committed  # v2: checkpoint (DVs, tombstones)
    _write(uri, rows(30, 10), mode="append")
    dt_.checkpoint()  # v3: an explicit one
    _write(uri, rows(40, 5), mode="append")  # v4 after the checkpoint
    assert any(Path(uri, "_delta_log").glob("*.checkpoint.parquet"))


def checkpoint_classic(uri: str) -> None:
    _checkpointed(uri, {})


def checkpoint_stats_json_only(uri: str) -> None:
    _checkpointed(uri, {"delta.checkpoint.writeStatsAsStruct": "false"})


def checkpoint_stats_struct_only(uri: str) -> None:
    _checkpointed(
        uri,
        {
            "delta.checkpoint.writeStatsAsJson": "false",
            "delta.checkpoint.writeStatsAsStruct": "true",
        },
    )


def checkpoint_v2(uri: str) -> None:
    _checkpointed(uri, {"delta.checkpointPolicy": "v2"})


def checkpoint_column_mapping(uri: str) -> None:
    _checkpointed(uri, {"delta.columnMapping.mode": "name"})


def checkpoint_only(uri: str) -> None:
    """A checkpoint and the commits after it, nothing before: the reader must use it."""
    checkpoint_classic(uri)
    log = Path(uri, "_delta_log")
    for f in log.glob("*.json"):
        if int(f.name.split(".")[0]) < 3:
            f.unlink()
    for f in log.glob("*.crc"):
        f.unlink()


# --------------------------------------------------------------------------------------------
# maintenance
# --------------------------------------------------------------------------------------------


def _many_small(uri: str, *, partitioned: bool, conf: dict[str, str] | None = None) -> None:
    for k in range(5):
        _write(
            uri,
            rows(k * 20, 20),
            mode="append",
            configuration=conf,
            partition_by=["p"] if partitioned else None,
        )


def optimize_compaction(uri: str) -> None:
    _many_small(uri, partitioned=True)
    dt_ = lq.DeltaTable(uri)
    assert dt_.delete("id % 3 = 0").committed
    m = dt_.optimize(target_file_size=1 << 20)
    assert m.files_removed > m.files_added > 0


def optimize_zorder(uri: str) -> None:
    _many_small(uri, partitioned=False)
    m = lq.DeltaTable(uri).optimize(z_order_by=["id", "d"], target_file_size=SMALL)
    assert m.files_added > 1


def optimize_hilbert(uri: str) -> None:
    _many_small(uri, partitioned=True)
    m = lq.DeltaTable(uri).optimize(z_order_by=["i", "ts"], curve="hilbert", target_file_size=SMALL)
    assert m.files_added > 1


def restore(uri: str) -> None:
    _write(uri, rows(0, 20))
    _write(uri, rows(20, 10), mode="append")
    dt_ = lq.DeltaTable(uri)
    assert dt_.delete("id % 2 = 0").committed
    _write(uri, rows(50, 5), mode="overwrite")
    dt_.restore(version=2)  # the DV'd files come back
    dt_.restore(version=0)


def vacuum(uri: str) -> None:
    _write(uri, rows(0, 20))
    _write(uri, rows(20, 20), mode="append")
    dt_ = lq.DeltaTable(uri)
    assert dt_.delete("id < 5").committed
    assert dt_.optimize().version is not None
    _write(uri, rows(50, 10), mode="overwrite")
    result = dt_.vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    assert result.files


def log_cleanup(uri: str) -> None:
    _write(uri, narrow(0, 10), configuration={"delta.logRetentionDuration": "interval 1 days"})
    for k in range(1, 5):
        _write(uri, narrow(k * 10, 10), mode="append")
    dt_ = lq.DeltaTable(uri)
    dt_.checkpoint()  # at v4
    _write(uri, narrow(50, 10), mode="append")
    old = (dt.datetime.now(UTC) - dt.timedelta(days=5)).timestamp()
    for v in range(0, 5):
        f = Path(uri, "_delta_log", f"{v:020d}.json")
        os.utime(f, (old + v, old + v))
    assert dt_.cleanup_log().files_deleted
    assert not Path(uri, "_delta_log", f"{0:020d}.json").exists()


BUILDERS: dict[str, Callable[[str], None]] = {
    f.__name__: f
    for f in (
        appends,
        overwrite,
        overwrite_predicate_partition,
        overwrite_predicate_data,
        partition_awkward_strings,
        partition_typed,
        wide_types,
        schema_merge,
        overwrite_schema,
        stats_columns,
        type_widening,
        dml_dv,
        dml_copy_on_write,
        dml_dv_partitioned,
        dml_copy_on_write_partitioned,
        cdf_dv,
        cdf_copy_on_write,
        cdf_column_mapping,
        cdf_maintenance,
        column_mapping_name,
        column_mapping_id,
        check_constraints,
        generated_columns,
        in_commit_timestamps,
        row_tracking,
        checkpoint_classic,
        checkpoint_stats_json_only,
        checkpoint_stats_struct_only,
        checkpoint_v2,
        checkpoint_column_mapping,
        checkpoint_only,
        optimize_compaction,
        optimize_zorder,
        optimize_hilbert,
        restore,
        vacuum,
        log_cleanup,
    )
}

#: The builders whose tables have the change data feed on from version 0.
CDF_KINDS = ("cdf_dv", "cdf_copy_on_write", "cdf_column_mapping", "cdf_maintenance")

#: The kinds whose statistics are written or found differently (JSON or checkpoint
#: structs, physical names, DVs, widened or nested types, partitions, chosen columns,
#: rewritten files): filtered reads are compared on these.
FILTER_KINDS = (
    "appends",
    "partition_awkward_strings",
    "partition_typed",
    "wide_types",
    "stats_columns",
    "schema_merge",
    "type_widening",
    "dml_dv_partitioned",
    "dml_copy_on_write",
    "cdf_column_mapping",
    "column_mapping_id",
    "checkpoint_stats_json_only",
    "checkpoint_stats_struct_only",
    "checkpoint_v2",
    "checkpoint_column_mapping",
    "checkpoint_only",
    "optimize_zorder",
    "optimize_hilbert",
)

#: Predicates Spark SQL and lakequery both parse, by the columns they need.
FILTERS: dict[str, tuple[str, ...]] = {
    "id >= 33": ("id",),
    "id < 5 OR id > 70": ("id",),
    "s = 's0012-é日本'": ("s",),
    "s < 's0003'": ("s",),
    "d > 2.0": ("d",),
    "d IS NULL": ("d",),
    "ts >= TIMESTAMP '2024-01-05 10:00:00'": ("ts",),
    "dt < DATE '2024-01-10'": ("dt",),
    "dec > 10": ("dec",),
    "p = 'a'": ("p",),
    "i IS NOT NULL AND i < 0": ("i",),
    "ntz >= TIMESTAMP '2024-01-03 00:00:00'": ("ntz",),
    "ls > '" + "x" * 40 + "00040'": ("ls",),
    "ls < '" + "x" * 31 + "\U0001f600b'": ("ls",),
    "f32 > 5 OR f32 < 0": ("f32",),
    "i16 < -2900 AND i8 > -95": ("i16", "i8"),
    "d38 > 100": ("d38",),
    "st IS NULL OR st.x IS NULL": ("st",),
    "st.y = 'y5' OR st.x > 60": ("st",),
    "arr IS NULL AND m IS NOT NULL": ("arr", "m"),
    "deep IS NULL": ("deep",),
    "b IS NULL OR NOT b": ("b",),
}
