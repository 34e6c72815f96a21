"""``lq.convert_to_delta`` (CONVERT TO DELTA) of plain and Hive-partitioned Parquet folders
written by pyarrow: the table equals reading the Parquet, the footers' statistics are
right (checked against the data itself) and skip files, ``deltalake`` reads it."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from readers_kit import deltalake_table, rows

import lakequery as lq
from lakequery.errors import SchemaError, SchemaMismatchError, TableAlreadyExistsError
from lakequery.management.convert import infer_partition_type

UTC = dt.timezone.utc


def sample(start: int, n: int) -> pa.Table:
    """``n`` rows of several types, with nulls in every column but ``id``."""
    ids = list(range(start, start + n))

    def some(values: list[Any]) -> list[Any]:
        return [None if i % 4 == 3 else v for i, v in zip(ids, values, strict=True)]

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "small": pa.array(some([i % 100 for i in ids]), pa.int16()),
            "s": pa.array(some([f"name-{i:04d}" for i in ids]), pa.string()),
            "day": pa.array(some([dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in ids])),
            "ts": pa.array(
                some([dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i) for i in ids]),
                pa.timestamp("us", tz="UTC"),
            ),
            "amount": pa.array(some([decimal.Decimal(i) / 8 for i in ids]), pa.decimal128(10, 3)),
            "ratio": pa.array(some([i / 3 for i in ids]), pa.float64()),
            "flag": pa.array(some([i % 2 == 0 for i in ids])),
            "nested": pa.array(some([{"x": i * 10} for i in ids])),
        }
    )


def commit(uri: str, version: int) -> list[dict[str, Any]]:
    text = (Path(uri) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def expected_stats(data: pa.Table) -> dict[str, Any]:
    """Statistics computed from the rows themselves (independent of the footers)."""

    def text(column: str, value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, decimal.Decimal):
            return float(value)
        return value

    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for name in data.column_names:
        col = data.column(name)
        if name == "nested":
            inner = pc.struct_field(col, "x")
            nulls[name] = {"x": inner.null_count}
            mm = pc.min_max(inner).as_py()
            mins[name], maxs[name] = {"x": mm["min"]}, {"x": mm["max"]}
            continue
        nulls[name] = col.null_count
        if name in ("ratio", "flag"):
            continue  # floats: no bounds from footers; booleans: none at all
        mm = pc.min_max(col).as_py()
        mins[name], maxs[name] = text(name, mm["min"]), text(name, mm["max"])
    return {"numRecords": data.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "parquet"


def test_plain_folder(folder: Path) -> None:
    folder.mkdir()
    parts = [sample(0, 40), sample(40, 25), sample(65, 30)]
    for i, part in enumerate(parts):
        pq.write_table(part, folder / f"part-{i}.parquet", row_group_size=10)
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-0.parquet.crc").write_text("junk")
    (folder / "_tmp").mkdir()
    (folder / "_tmp" / "junk.parquet").write_text("not parquet")

    dt_ = lq.convert_to_delta(str(folder), name="converted")
    snap = dt_.snapshot()
    assert (snap.version, snap.num_files, snap.partition_columns) == (0, 3, [])
    actions = commit(str(folder), 0)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "CONVERT"
    adds = {a["add"]["path"]: a["add"] for a in actions if "add" in a}
    assert sorted(adds) == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert all(a["dataChange"] for a in adds.values())
    for i, part in enumerate(parts):
        add = adds[f"part-{i}.parquet"]
        assert add["size"] == os.path.getsize(folder / f"part-{i}.parquet")
        assert json.loads(add["stats"]) == expected_stats(part)

    original = pa.concat_tables(parts)
    ours = snap.scan().to_arrow()
    assert ours.schema.names == original.schema.names
    assert rows(ours) == rows(original)
    assert rows(deltalake_table(str(folder)).select(ours.column_names)) == rows(ours)
    # the statistics skip files
    plan = snap.scan(filter="id >= 70").plan()
    assert plan.files.num_rows == 1
    assert snap.scan(filter="day < DATE '2024-01-05'").plan().files.num_rows == 1
    assert snap.scan(filter="s > 'name-0050'").plan().files.num_rows == 2
    assert sorted(snap.scan(filter="id >= 70").to_arrow()["id"].to_pylist()) == list(range(70, 95))


def hive_data() -> pa.Table:
    n = 24
    return pa.table(
        {
            "id": list(range(n)),
            "v": [f"v{i}" for i in range(n)],
            "year": [2023 + i % 2 for i in range(n)],
            "big": [None if i % 6 == 5 else 10_000_000_000 + i % 3 for i in range(n)],
            "day": [dt.date(2024, 1, 1 + i % 2) for i in range(n)],
            "tag": ["a b" if i % 3 == 0 else ("c/d=e" if i % 3 == 1 else "x%y") for i in range(n)],
            "rate": [0.5 if i % 2 else 1.25 for i in range(n)],
        }
    )


def test_hive_partitioned_folder_with_inferred_types(folder: Path) -> None:
    data = hive_data()
    keys = ["year", "big", "day", "tag", "rate"]
    ds.write_dataset(data, folder, format="parquet", partitioning=keys, partitioning_flavor="hive")
    dt_ = lq.convert_to_delta(str(folder), partition_by=keys)
    snap = dt_.snapshot()
    assert snap.partition_columns == keys
    fields = {f.name: f.type for f in snap.metadata.schema.fields}
    assert [fields[k].name for k in keys] == ["integer", "long", "date", "string", "double"]
    expected = data.cast(
        pa.schema(
            [
                ("id", pa.int64()),
                ("v", pa.string()),
                ("year", pa.int32()),
                ("big", pa.int64()),
                ("day", pa.date32()),
                ("tag", pa.string()),
                ("rate", pa.float64()),
            ]
        )
    )
    ours = snap.scan().to_arrow()
    assert ours.schema.names == expected.schema.names
    assert rows(ours) == rows(expected)
    assert rows(deltalake_table(str(folder)).select(ours.column_names)) == rows(ours)
    # partition pruning on the inferred types
    pruned = snap.scan(filter="big IS NULL AND year = 2024").plan().files
    assert pruned.num_rows > 0
    got = snap.scan(filter="big IS NULL AND year = 2024").to_arrow()
    assert sorted(got["id"].to_pylist()) == [i for i in range(24) if i % 6 == 5 and i % 2]
    assert sorted(snap.scan(filter="tag = 'c/d=e'").to_arrow()["id"].to_pylist()) == list(
        range(1, 24, 3)
    )


def test_partition_directories_of_a_column_named_with_an_underscore(folder: Path) -> None:
    """``_g=1/`` is the declared partition column's directory, not a hidden one; other
    ``_`` directories stay ignored."""
    for g, ids in ((1, [1, 2]), (2, [3])):
        (folder / f"_g={g}").mkdir(parents=True)
        pq.write_table(pa.table({"id": ids}), folder / f"_g={g}" / "part.parquet")
    (folder / "_tmp").mkdir()
    pq.write_table(pa.table({"id": [99]}), folder / "_tmp" / "junk.parquet")
    snap = lq.convert_to_delta(str(folder), partition_by=["_g"]).snapshot()
    got = sorted((r["id"], r["_g"]) for r in snap.scan().to_arrow().to_pylist())
    assert got == [(1, 1), (2, 1), (3, 2)]


def test_timestamp_partitions(folder: Path) -> None:
    """Escaped timestamp directory values (``ts=2024-01-01%2010%3A00%3A00.500000``) are
    inferred as ``timestamp`` and read as UTC."""
    times = [dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 10, 0, 0, 500000), None]
    data = pa.table({"id": [1, 2, 3], "ts": pa.array(times, pa.timestamp("us"))})
    ds.write_dataset(
        data, folder, format="parquet", partitioning=["ts"], partitioning_flavor="hive"
    )
    snap = lq.convert_to_delta(str(folder), partition_by=["ts"]).snapshot()
    assert snap.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    expected = [t.replace(tzinfo=UTC) if t else None for t in times]
    assert [r["ts"] for r in rows(snap.scan().to_arrow())] == expected
    assert [r["ts"] for r in rows(deltalake_table(str(folder)))] == expected


def test_declared_partition_types(folder: Path) -> None:
    data = pa.table({"id": [1, 2, 3], "g": ["1", "02", "3"]})
    ds.write_dataset(data, folder, format="parquet", partitioning=["g"], partitioning_flavor="hive")
    snap = lq.convert_to_delta(str(folder), partition_by=pa.schema([("g", pa.string())])).snapshot()
    assert sorted(snap.scan().to_arrow()["g"].to_pylist()) == ["02", "1", "3"]
    other = folder.parent / "other"
    ds.write_dataset(data, other, format="parquet", partitioning=["g"], partitioning_flavor="hive")
    snap = lq.convert_to_delta(str(other), partition_by={"g": "long"}).snapshot()
    assert snap.schema.field("g").type == pa.int64()
    assert sorted(snap.scan().to_arrow()["g"].to_pylist()) == [1, 2, 3]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "-2", None], "integer"),
        (["1", "9999999999"], "long"),
        (["1", "123456789012345678901234"], "decimal(24,0)"),
        (["1.5", "2"], "double"),
        (["2024-01-31", "2023-12-01"], "date"),
        (["2024-01-31 10:00:00", "2024-02-01 00:00:00.5"], "timestamp"),
        (["2024-13-45"], "string"),
        (["x", "1"], "string"),
        ([None], "string"),
    ],
)
def test_partition_type_inference(values: list[str | None], expected: str) -> None:
    assert infer_partition_type(pa.array(values, pa.string()), "c").name == expected


def test_schemas_are_merged(folder: Path) -> None:
    """Files holding different columns: the union, NULL where a file lacks a column."""
    folder.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "a": ["x", "y"]}), folder / "one.parquet")
    pq.write_table(pa.table({"id": [3], "b": [1.5]}), folder / "two.parquet")
    snap = lq.convert_to_delta(str(folder)).snapshot()
    assert snap.schema.names == ["id", "a", "b"]
    assert rows(snap.scan().to_arrow()) == [
        {"id": 1, "a": "x", "b": None},
        {"id": 2, "a": "y", "b": None},
        {"id": 3, "a": None, "b": 1.5},
    ]
    stats = {
        a["add"]["path"]: json.loads(a["add"]["stats"])
        for a in commit(str(folder), 0)
        if "add" in a
    }
    assert stats["two.parquet"]["nullCount"]["a"] == 1  # absent: NULL in every row
    assert stats["one.parquet"]["nullCount"]["b"] == 2
    assert snap.scan(filter="a = 'x'").plan().files.num_rows == 1


@pytest.mark.parametrize(
    ("layout", "kwargs", "error"),
    [
        ({"x.parquet": {"id": [1]}, "y.parquet": {"id": ["s"]}}, {}, SchemaMismatchError),
        ({"g=1/x.parquet": {"id": [1]}}, {}, SchemaError),
        ({"g=1/h=2/x.parquet": {"id": [1]}}, {"partition_by": ["g"]}, SchemaError),
        ({"h=1/x.parquet": {"id": [1]}}, {"partition_by": ["g"]}, SchemaError),
        ({"g=1/x.parquet": {"id": [1], "g": [1]}}, {"partition_by": ["g"]}, SchemaError),
        ({"g=x/x.parquet": {"id": [1]}}, {"partition_by": {"g": pa.int32()}}, SchemaError),
        ({"_only_hidden.parquet": {"id": [1]}}, {}, SchemaError),
        (
            {"x.parquet": {"id": [1]}},
            {"configuration": {"delta.columnMapping.mode": "name"}},
            SchemaError,
        ),
    ],
)
def test_refusals_write_nothing(
    folder: Path, layout: dict[str, dict[str, list[Any]]], kwargs: dict[str, Any], error: type
) -> None:
    for name, columns in layout.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), folder / name)
    with pytest.raises(error) as info:
        lq.convert_to_delta(str(folder), **kwargs)
    assert str(info.value)
    assert not (folder / "_delta_log").exists()


def test_refuses_a_file_that_is_not_parquet(folder: Path) -> None:
    folder.mkdir()
    pq.write_table(pa.table({"id": [1]}), folder / "a.parquet")
    (folder / "notes.txt").write_text("not a Parquet file")
    with pytest.raises(SchemaError, match=r"notes\.txt"):
        lq.convert_to_delta(str(folder))
    assert not (folder / "_delta_log").exists()


def test_refuses_a_delta_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1]}))
    with pytest.raises(TableAlreadyExistsError):
        lq.convert_to_delta(uri)
    assert lq.DeltaTable(uri).snapshot().version == 0


@pytest.mark.parametrize("store", ["memory", "s3"])
def test_object_storage_convert_detail_repair(store: str, request: pytest.FixtureRequest) -> None:
    """CONVERT, DESCRIBE DETAIL and FSCK on fsspec stores: one listing each, footers
    through the store's Arrow filesystem."""
    import io

    from lakequery.storage import open_storage

    if store == "s3":
        uri = request.getfixturevalue("s3_table_uri")
        options = request.getfixturevalue("s3_storage_options")
    else:
        uri, options = request.getfixturevalue("memory_table_uri"), None
    storage = open_storage(uri, options)
    layout = {"g=1/a.parquet": sample(0, 10), "g=2/b.parquet": sample(10, 5)}
    for name, data in layout.items():
        buffer = io.BytesIO()
        pq.write_table(data, buffer)
        storage.put(storage.join(name), buffer.getvalue())
    storage.put(storage.join("_SUCCESS"), b"")

    dt_ = lq.convert_to_delta(uri, partition_by=["g"], storage_options=options)
    snap = dt_.snapshot()
    assert snap.num_files == 2 and snap.schema.field("g").type == pa.int32()
    assert sorted(snap.scan().to_arrow()["id"].to_pylist()) == list(range(15))
    assert snap.scan(filter="id < 3").plan().files.num_rows == 1
    detail = dt_.detail()
    assert (detail.num_files, detail.partition_columns) == (2, ("g",))

    storage.delete(storage.join("g=2/b.parquet"))
    assert dt_.repair().files_removed == ("g=2/b.parquet",)
    assert dt_.repair(dry_run=False).version == 1
    assert sorted(dt_.snapshot().scan().to_arrow()["id"].to_pylist()) == list(range(10))


def test_int96_timestamps_are_instants(tmp_path: Path) -> None:
    # Spark's legacy encoding of its TimestampType, read by Arrow without a zone: it was
    # declared timestamp_ntz (and brought the timestampNtz feature)
    folder = tmp_path / "int96"
    folder.mkdir()
    stamp = dt.datetime(2024, 11, 3, 5, 30)
    ns = pa.timestamp("ns")
    t = pa.table(
        {
            "id": [1],
            "ts": pa.array([stamp], ns),
            "s": pa.array([{"ts": stamp}], pa.struct([("ts", ns)])),
            "l": pa.array([[stamp]], pa.list_(ns)),
        }
    )
    pq.write_table(t, folder / "part-0.parquet", use_deprecated_int96_timestamps=True)
    lq.convert_to_delta(str(folder))
    snap = lq.DeltaTable(str(folder)).snapshot()
    schema = snap.metadata.schema
    assert schema["ts"].type.name == "timestamp"
    assert schema["s"].type["ts"].type.name == "timestamp"  # nested ones too
    assert schema["l"].type.element.name == "timestamp"
    assert not snap.protocol.supports("timestampNtz")
    expected = stamp.replace(tzinfo=dt.timezone.utc)
    assert snap.scan().to_arrow().column("ts").to_pylist() == [expected]


@pytest.mark.parametrize("unit", ["ms", "ns"])
def test_timestamps_stored_in_other_units_read_alike(tmp_path: Path, unit: str) -> None:
    # MILLIS: Polars refused the files (Datetime('ms') != Datetime('us')); NANOS adjusted
    # to UTC: DuckDB 2.0 reads them as TIMESTAMPTZ_NS, which the engine cast through the
    # session's zone (a caller's connection in New York moved them by 4 hours, and
    # OPTIMIZE rewrote them so in a process in that zone)
    folder = tmp_path / unit
    folder.mkdir()
    stamp = dt.datetime(2024, 11, 3, 5, 30, tzinfo=dt.timezone.utc)
    t = pa.table(
        {
            "id": [1],
            "ts": pa.array([stamp], pa.timestamp(unit, "UTC")),
            "ntz": pa.array([stamp.replace(tzinfo=None)], pa.timestamp(unit)),
        }
    )
    pq.write_table(t, folder / "part-0.parquet", coerce_timestamps=None if unit == "ns" else "ms")
    lq.convert_to_delta(str(folder))
    scan = lq.DeltaTable(str(folder)).snapshot().scan()
    expected = [(1, stamp, stamp.replace(tzinfo=None))]
    assert [tuple(r.values()) for r in scan.to_arrow().to_pylist()] == expected
    assert [tuple(r.values()) for r in scan.to_polars().collect().to_dicts()] == expected
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'America/New_York'")
    rel = scan.to_duckdb(con)
    got = rel.project("id, CAST(ts AS VARCHAR), ntz").fetchall()
    assert got == [(1, "2024-11-03 01:30:00-04", stamp.replace(tzinfo=None))]
