"""CHANGE COLUMN TYPE: only the allowed widenings, with the typeWidening feature and
``delta.typeChanges`` committed together; older files read up-cast by every engine and
wider values appended afterwards."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from altkit import assert_engines, config_of, plain_table, protocol_of

import lakequery as lq


def _narrow_table(tmp_path: Path) -> str:
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "f": pa.array([1.5, 2.5], pa.float32()),
            "d": pa.array([1, 2], pa.int16()),
            "s": pa.array([{"x": 1}, {"x": 2}], pa.struct([("x", pa.int8())])),
        }
    )
    return plain_table(str(tmp_path / "t"), data)


def test_widen_int_to_long_then_append_wider(tmp_path: Path) -> None:
    uri = _narrow_table(tmp_path)
    dt = lq.DeltaTable(uri)
    result = dt.alter.change_column_type("id", "long")
    assert (result.version, result.operation, result.features_added) == (
        1,
        "CHANGE COLUMN",
        ("typeWidening",),
    )
    assert protocol_of(uri) == (3, 7, ("typeWidening",), ("typeWidening",))
    assert config_of(uri)["delta.enableTypeWidening"] == "true"
    field = dt.snapshot().metadata.schema["id"]
    assert field.metadata["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    assert dt.snapshot().num_files == 1  # no data file rewritten
    big = 2**40
    lq.write(
        uri,
        pa.table(
            {
                "id": pa.array([big], pa.int64()),
                "f": pa.array([3.5], pa.float32()),
                "d": pa.array([3], pa.int16()),
                "s": pa.array([{"x": 3}], pa.struct([("x", pa.int8())])),
            }
        ),
        mode="append",
    )
    expected = [
        {"id": 1, "f": 1.5, "d": 1, "s": {"x": 1}},
        {"id": 2, "f": 2.5, "d": 2, "s": {"x": 2}},
        {"id": big, "f": 3.5, "d": 3, "s": {"x": 3}},
    ]
    assert_engines(uri, expected)
    assert dt.snapshot().scan(filter=f"id = {big}").to_arrow().num_rows == 1


def test_deltalake_refuses_type_widening_by_name(tmp_path: Path) -> None:
    """deltalake 1.x does not implement the typeWidening reader feature: the independent
    reader must refuse the table naming it (never read it wrongly)."""
    import deltalake

    uri = _narrow_table(tmp_path)
    lq.DeltaTable(uri).alter.change_column_type("id", pa.int64())
    dt = deltalake.DeltaTable(uri)
    assert "typeWidening" in dt.protocol().reader_features
    with pytest.raises(Exception, match=r"(?i)type ?widening"):
        deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all()


def test_several_widenings_nested_and_decimal(tmp_path: Path) -> None:
    uri = _narrow_table(tmp_path)
    dt = lq.DeltaTable(uri)
    dt.alter.change_column_type("f", "double")
    dt.alter.change_column_type("d", "decimal(12,2)")
    dt.alter.change_column_type("s.x", "short")
    dt.alter.change_column_type("s.x", "integer")
    schema = dt.snapshot().metadata.schema
    assert schema["s"].type["x"].metadata["delta.typeChanges"] == [
        {"fromType": "byte", "toType": "short"},
        {"fromType": "short", "toType": "integer"},
    ]
    assert protocol_of(uri) == (3, 7, ("typeWidening",), ("typeWidening",))
    table = dt.snapshot().scan().to_arrow()
    assert table.schema.field("d").type == pa.decimal128(12, 2)
    assert table.schema.field("s").type == pa.struct([("x", pa.int32())])
    from decimal import Decimal

    expected = [
        {"id": 1, "f": 1.5, "d": Decimal("1.00"), "s": {"x": 1}},
        {"id": 2, "f": 2.5, "d": Decimal("2.00"), "s": {"x": 2}},
    ]
    assert_engines(uri, expected)


def test_date_to_timestamp_ntz_adds_timestamp_ntz(tmp_path: Path) -> None:
    import datetime as dtm

    uri = plain_table(str(tmp_path / "t"), pa.table({"id": [1], "day": [dtm.date(2026, 1, 2)]}))
    lq.DeltaTable(uri).alter.change_column_type("day", "timestamp_ntz")
    assert protocol_of(uri)[2] == ("timestampNtz", "typeWidening")
    assert_engines(uri, [{"id": 1, "day": dtm.datetime(2026, 1, 2)}])


@pytest.mark.parametrize(
    ("column", "new_type", "message"),
    [
        ("id", "short", "is not a type widening"),
        ("id", "string", "is not a type widening"),
        ("f", "long", "is not a type widening"),
        ("id", "integer", "already integer"),
        ("s", "long", "only primitive columns"),
        ("id", "varchar", "unknown|not a known"),
        ("nope", "long", "no column 'nope'"),
    ],
)
def test_refused_type_changes(tmp_path: Path, column: str, new_type: str, message: str) -> None:
    uri = _narrow_table(tmp_path)
    with pytest.raises(lq.AlterTableError, match=message):
        lq.DeltaTable(uri).alter.change_column_type(column, new_type)
    assert lq.DeltaTable(uri).snapshot().version == 0
    assert protocol_of(uri) == (1, 1, (), ())


def test_partition_column_not_widened(tmp_path: Path) -> None:
    data = pa.table({"id": [1], "p": pa.array([1], pa.int32())})
    uri = plain_table(str(tmp_path / "t"), data, partition_by=["p"])
    with pytest.raises(lq.AlterTableError, match="partition column"):
        lq.DeltaTable(uri).alter.change_column_type("p", "long")


@pytest.mark.parametrize("how", ["alter", "write"])
def test_a_void_column_takes_a_type_without_type_widening(tmp_path: Path, how: str) -> None:
    """A ``void`` column (never in data files) may take any type with no type change
    recorded (digest §8.3): the protocol stays as it was and readers without type
    widening (deltalake) still read the table."""
    import deltalake

    uri = plain_table(str(tmp_path / "t"), pa.table({"id": [1, 2], "n": pa.nulls(2)}))
    if how == "alter":
        lq.DeltaTable(uri).alter.change_column_type("n", "string")
    else:
        more = pa.table({"id": [3], "n": ["x"]})
        lq.write(uri, more, mode="append", schema_mode="merge")
    assert protocol_of(uri) == (1, 1, (), ())
    assert "delta.enableTypeWidening" not in config_of(uri)
    field = lq.DeltaTable(uri).snapshot().metadata.schema["n"]
    assert field.type.name == "string" and "delta.typeChanges" not in field.metadata
    want = [{"id": 1, "n": None}, {"id": 2, "n": None}]
    if how == "write":
        want.append({"id": 3, "n": "x"})
    assert_engines(uri, want)
    theirs = deltalake.DeltaTable(uri).to_pyarrow_table().to_pylist()
    assert sorted(theirs, key=lambda r: r["id"]) == want


def test_identity_column_type_stays_long(tmp_path: Path) -> None:
    # widening was committed, then every append failed with a raw Arrow error
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"v": ["a"]}), identity={"id": lq.Identity()})
    table = lq.DeltaTable(uri)
    with pytest.raises(lq.AlterTableError, match="identity column"):
        table.alter.change_column_type("id", "decimal(25,0)")
    assert table.snapshot().version == 0
    lq.write(uri, pa.table({"v": ["b"]}), mode="append")
    assert sorted(table.snapshot().scan().to_arrow().column("id").to_pylist()) == [1, 2]
