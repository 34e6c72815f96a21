"""ADD COLUMNS, RENAME COLUMN, DROP COLUMN(S): the schema and column mapping committed,
the protocol exactly as needed, and the rows as every lakequery engine and ``deltalake``
read them, before and after appends in the new shape."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from altkit import (
    assert_engines,
    config_of,
    deltalake_rows,
    plain_table,
    protocol_of,
)

import lakequery as lq
from lakequery.protocol.column_mapping import ID_KEY, PHYSICAL_NAME_KEY
from lakequery.protocol.schema import PrimitiveType, StructField

ROWS = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]


def test_add_columns_then_append(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    result = dt.alter.add_columns([pa.field("n", pa.float64()), pa.field("t", pa.string())])
    assert (result.version, result.operation, result.features_added) == (1, "ADD COLUMNS", ())
    assert protocol_of(uri) == (1, 1, (), ())
    assert dt.snapshot().schema.names == ["id", "v", "n", "t"]
    old = [{**r, "n": None, "t": None} for r in ROWS]
    assert_engines(uri, old)
    assert deltalake_rows(uri) == old
    lq.write(uri, pa.table({"id": [4], "v": ["d"], "n": [0.5], "t": ["x"]}), mode="append")
    new = [*old, {"id": 4, "v": "d", "n": 0.5, "t": "x"}]
    assert_engines(uri, new)
    assert deltalake_rows(uri) == new


def test_add_columns_takes_schema_and_struct_field(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.add_columns(pa.schema([("a", pa.int32())]))
    dt.alter.add_columns(StructField("b", PrimitiveType("date")))
    assert dt.snapshot().schema.names == ["id", "v", "a", "b"]
    assert dt.snapshot().schema.field("b").type == pa.date32()


def test_add_timestamp_ntz_column_adds_only_that_feature(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    result = lq.DeltaTable(uri).alter.add_columns(pa.field("ts", pa.timestamp("us")))
    assert result.features_added == ("timestampNtz",)
    assert protocol_of(uri) == (3, 7, ("timestampNtz",), ("timestampNtz",))


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (pa.field("ID", pa.int64()), "already exists"),
        (pa.field("n", pa.int64(), nullable=False), "must be nullable"),
    ],
)
def test_add_columns_refused(tmp_path: Path, field: pa.Field, message: str) -> None:
    uri = plain_table(str(tmp_path / "t"))
    with pytest.raises(lq.AlterTableError, match=message):
        lq.DeltaTable(uri).alter.add_columns(field)
    assert lq.DeltaTable(uri).snapshot().version == 0


def test_add_columns_on_mapped_table_assigns_ids(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.columnMapping.mode": "name"})
    dt = lq.DeltaTable(uri)
    dt.alter.add_columns(pa.field("n", pa.int64()))
    field = dt.snapshot().metadata.schema["n"]
    assert field.metadata[ID_KEY] == 3
    assert str(field.metadata[PHYSICAL_NAME_KEY]).startswith("col-")
    assert config_of(uri)["delta.columnMapping.maxColumnId"] == "3"
    lq.write(uri, pa.table({"id": [4], "v": ["d"], "n": [7]}), mode="append")
    expected = [{**r, "n": None} for r in ROWS] + [{"id": 4, "v": "d", "n": 7}]
    assert_engines(uri, expected)
    assert deltalake_rows(uri) == expected


def test_rename_enables_column_mapping_with_legacy_protocol(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    result = dt.alter.rename_column("v", "value")
    # Legacy writer 5 implies the lower writer versions' features (digest §5.1).
    assert result.features_added == (
        "appendOnly",
        "changeDataFeed",
        "checkConstraints",
        "columnMapping",
        "generatedColumns",
        "invariants",
    )
    # (1, 1) + column mapping: the legacy (2, 5), nothing more.
    assert protocol_of(uri) == (2, 5, (), ())
    config = config_of(uri)
    assert config["delta.columnMapping.mode"] == "name"
    assert config["delta.columnMapping.maxColumnId"] == "2"
    schema = dt.snapshot().metadata.schema
    # Existing columns keep their name as physical name: the files are not rewritten.
    assert [f.metadata[PHYSICAL_NAME_KEY] for f in schema.fields] == ["id", "v"]
    assert [f.metadata[ID_KEY] for f in schema.fields] == [1, 2]
    assert dt.snapshot().num_files == 1
    renamed = [{"id": r["id"], "value": r["v"]} for r in ROWS]
    assert_engines(uri, renamed)
    assert deltalake_rows(uri) == renamed
    lq.write(uri, pa.table({"id": [4], "value": ["d"]}), mode="append")
    renamed.append({"id": 4, "value": "d"})
    assert_engines(uri, renamed)
    assert deltalake_rows(uri) == renamed


def test_rename_on_table_features_protocol_adds_the_feature(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.enableDeletionVectors": "true"})
    lq.DeltaTable(uri).alter.rename_column("v", "w")
    assert protocol_of(uri) == (
        3,
        7,
        ("columnMapping", "deletionVectors"),
        ("columnMapping", "deletionVectors"),
    )


def test_rename_twice_and_back(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.rename_column("v", "w")
    lq.write(uri, pa.table({"id": [4], "w": ["d"]}), mode="append")
    dt.alter.rename_column("W", "v")  # case-insensitive match, as Spark
    expected = [*ROWS, {"id": 4, "v": "d"}]
    assert_engines(uri, expected)
    assert deltalake_rows(uri) == expected
    assert protocol_of(uri) == (2, 5, (), ())


def test_drop_column_then_append_and_add_back(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    assert dt.alter.drop_column("v").operation == "DROP COLUMNS"
    assert protocol_of(uri) == (2, 5, (), ())
    assert_engines(uri, [{"id": r["id"]} for r in ROWS])
    assert deltalake_rows(uri) == [{"id": r["id"]} for r in ROWS]
    # A new column of the old name gets a new physical name: the old data stays hidden.
    dt.alter.add_columns(pa.field("v", pa.string()))
    assert dt.snapshot().metadata.schema["v"].metadata[PHYSICAL_NAME_KEY] != "v"
    lq.write(uri, pa.table({"id": [4], "v": ["new"]}), mode="append")
    expected = [{"id": r["id"], "v": None} for r in ROWS] + [{"id": 4, "v": "new"}]
    assert_engines(uri, expected)
    assert deltalake_rows(uri) == expected


def test_nested_rename_and_drop(tmp_path: Path) -> None:
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "s": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]),
        }
    )
    uri = plain_table(str(tmp_path / "t"), data)
    dt = lq.DeltaTable(uri)
    dt.alter.rename_column("s.a", "alpha")
    dt.alter.drop_column("s.b")
    expected = [{"id": 1, "s": {"alpha": 1}}, {"id": 2, "s": {"alpha": 2}}]
    assert_engines(uri, expected)
    assert deltalake_rows(uri) == expected
    lq.write(uri, pa.table({"id": [3], "s": pa.array([{"alpha": 3}])}), mode="append")
    assert_engines(uri, [*expected, {"id": 3, "s": {"alpha": 3}}])
    with pytest.raises(lq.AlterTableError, match="last data column of struct 's'"):
        dt.alter.drop_column("s.alpha")


def test_rename_partition_column(tmp_path: Path) -> None:
    data = pa.table({"id": [1, 2, 3], "day": ["x", "y", "x"]})
    uri = plain_table(str(tmp_path / "t"), data, partition_by=["day"])
    dt = lq.DeltaTable(uri)
    dt.alter.rename_column("day", "d")
    assert dt.snapshot().partition_columns == ["d"]
    assert dt.snapshot().scan(filter="d = 'x'").to_arrow().num_rows == 2
    lq.write(uri, pa.table({"id": [4], "d": ["y"]}), mode="append")
    expected = [{"id": 1, "d": "x"}, {"id": 2, "d": "y"}, {"id": 3, "d": "x"}, {"id": 4, "d": "y"}]
    assert_engines(uri, expected)
    assert deltalake_rows(uri) == expected
    with pytest.raises(lq.AlterTableError, match="partition column"):
        dt.alter.drop_column("d")


def test_drop_columns_in_one_commit(tmp_path: Path) -> None:
    data = pa.table({"id": [1], "a": [2], "b": [3]})
    uri = plain_table(str(tmp_path / "t"), data)
    result = lq.DeltaTable(uri).alter.drop_columns(["a", "b"])
    assert result.version == 1
    assert_engines(uri, [{"id": 1}])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: a.rename_column("nope", "x"), "no column 'nope'"),
        (lambda a: a.rename_column("v", "ID"), "already exists"),
        (lambda a: a.rename_column("v.x", "y"), "'v' is not a struct column"),
        (lambda a: a.drop_column("v"), "referenced by constraint 'v_set'"),
        (lambda a: a.rename_column("v", "w"), "referenced by constraint 'v_set'"),
    ],
)
def test_column_changes_refused(tmp_path: Path, call, message: str) -> None:  # type: ignore[no-untyped-def]
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.add_constraint({"v_set": "v IS NOT NULL"})
    with pytest.raises(lq.AlterTableError, match=message):
        call(dt.alter)
    assert dt.snapshot().version == 1


def test_drop_last_column_refused(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), pa.table({"id": [1]}))
    with pytest.raises(lq.AlterTableError, match="last data column of the table"):
        lq.DeltaTable(uri).alter.drop_column("id")


def test_backticked_name_with_dot(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), pa.table({"id": [1], "a.b": [2]}))
    lq.DeltaTable(uri).alter.rename_column("`a.b`", "ab")
    assert_engines(uri, [{"id": 1, "ab": 2}])


@pytest.mark.parametrize(
    "metadata",
    [
        {"delta.generationExpression": "id * 2"},
        {"delta.identity.start": 1, "delta.identity.step": 1},
        {"CURRENT_DEFAULT": "0"},
    ],
)
def test_add_generated_identity_or_default_column_refused(
    tmp_path: Path, metadata: dict[str, object]
) -> None:
    uri = plain_table(str(tmp_path / "t"))
    field = StructField("g", PrimitiveType("long"), True, metadata)
    with pytest.raises(lq.AlterTableError, match="cannot be added to an existing table"):
        lq.DeltaTable(uri).alter.add_columns(field)
    assert protocol_of(uri) == (1, 1, (), ())


def test_set_column_metadata(tmp_path: Path) -> None:
    import deltalake

    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    assert dt.alter.set_column_metadata("v", {"comment": "a letter"}).operation == "CHANGE COLUMN"
    assert dt.snapshot().metadata.schema["v"].metadata == {"comment": "a letter"}
    theirs = deltalake.DeltaTable(uri).schema().fields[1]
    assert theirs.metadata == {"comment": "a letter"}
    with pytest.raises(lq.AlterTableError, match="reserved by Delta"):
        dt.alter.set_column_metadata("v", {"delta.columnMapping.id": 5})
    assert protocol_of(uri) == (1, 1, (), ())
    assert_engines(uri, ROWS)
