"""``lq.write`` API behaviour end to end: modes, schema enforcement and evolution,
idempotent writes, append-only tables, constraints, commitInfo, protocols of new tables,
input kinds, file sizing and checkpoints. Every table is read back by lakequery and, where
it can, by the ``deltalake`` package."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import deltalake
import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from writekit import commit_actions, dl_rows, dl_table, lq_rows, normalize

import lakequery
from lakequery.errors import (
    AppendOnlyError,
    ConstraintViolationError,
    SchemaError,
    SchemaMismatchError,
    TableAlreadyExistsError,
)
from lakequery.protocol.features import Protocol
from lakequery.txn import Transaction


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "table")


def _versions(uri: str) -> list[str]:
    return sorted(n for n in os.listdir(Path(uri) / "_delta_log") if n.endswith(".json"))


def _ids(rows: list[dict[str, Any]]) -> list[Any]:
    return sorted(r["id"] for r in rows)


def _both_read(uri: str) -> list[Any]:
    """The rows, asserting that lakequery and deltalake read the same."""
    ours = normalize(lq_rows(uri))
    assert normalize(dl_rows(uri)) == ours
    return ours


# -- modes -----------------------------------------------------------------------------------


def test_modes(uri: str) -> None:
    first = lakequery.write(uri, pa.table({"id": [1, 2]}))
    assert (first.version, first.mode, first.num_rows, first.skipped) == (0, "error", 2, False)
    with pytest.raises(TableAlreadyExistsError):
        lakequery.write(uri, pa.table({"id": [3]}))
    with pytest.raises(TableAlreadyExistsError):
        lakequery.write(uri, pa.table({"id": [3]}), mode="error")
    ignored = lakequery.write(uri, pa.table({"id": [3]}), mode="ignore")
    assert ignored.skipped and ignored.version == 0 and ignored.num_files == 0
    assert "ignore" in ignored.message
    assert _versions(uri) == [f"{0:020d}.json"]
    assert lakequery.write(uri, pa.table({"id": [3]}), mode="append").version == 1
    assert _ids(lq_rows(uri)) == [1, 2, 3]
    over = lakequery.write(uri, pa.table({"id": [9]}), mode="overwrite")
    assert (over.version, over.num_removed_files) == (2, 2)
    assert _ids(lq_rows(uri)) == _ids(dl_rows(uri)) == [9]
    # "ignore" and "overwrite" on a missing table create it
    other = str(Path(uri).parent / "other")
    assert not lakequery.write(other, pa.table({"id": [1]}), mode="ignore").skipped
    third = str(Path(uri).parent / "third")
    assert lakequery.write(third, pa.table({"id": [1]}), mode="overwrite").version == 0
    assert _ids(lq_rows(other)) == _ids(lq_rows(third)) == [1]
    with pytest.raises(ValueError, match="mode"):
        lakequery.write(uri, pa.table({"id": [1]}), mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="predicate"):
        lakequery.write(uri, pa.table({"id": [1]}), mode="append", predicate="id = 1")


# -- schema enforcement ------------------------------------------------------------------------


def test_schema_mismatch_names_column_and_types(uri: str) -> None:
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
    ]
    schema = pa.schema(fields)
    lakequery.write(uri, pa.table({"id": [1], "name": ["a"]}, schema=schema))
    with pytest.raises(SchemaMismatchError) as wrong:
        lakequery.write(uri, pa.table({"id": [2], "name": [1.5]}), mode="append")
    assert wrong.value.column == "name"
    assert "string" in str(wrong.value) and "double" in str(wrong.value)
    assert "'name'" in str(wrong.value)
    with pytest.raises(SchemaMismatchError) as unknown:
        lakequery.write(uri, pa.table({"id": [2], "color": ["red"]}), mode="append")
    assert unknown.value.column == "color" and "merge" in str(unknown.value)
    with pytest.raises(SchemaMismatchError) as missing:
        lakequery.write(uri, pa.table({"name": ["b"]}), mode="append")
    assert missing.value.column == "id" and "long" in str(missing.value)
    assert "NOT NULL" in str(missing.value)
    with pytest.raises(SchemaMismatchError) as nulls:
        lakequery.write(uri, pa.table({"id": pa.array([None], pa.int64())}), mode="append")
    assert nulls.value.column == "id"
    # nothing was committed by the refused writes; a narrower int still fits a long column
    assert len(_versions(uri)) == 1
    fits = pa.table({"id": pa.array([5], pa.int32()), "name": ["c"]})
    assert lakequery.write(uri, fits, mode="append").version == 1
    assert _both_read(uri) == normalize([{"id": 1, "name": "a"}, {"id": 5, "name": "c"}])
    with pytest.raises(SchemaError, match="partition"):
        lakequery.write(uri, fits, mode="append", partition_by=["name"])


def test_merge_adds_nullable_columns(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": [1]}), partition_by=None)
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64()),
        pa.field("note", pa.string(), nullable=False),
    ]
    strict = pa.schema(fields)
    r = lakequery.write(
        uri, pa.table({"id": [2], "note": ["n"]}, schema=strict), mode="append", schema_mode="merge"
    )
    assert r.version == 1
    meta = json.loads(lakequery.DeltaTable(uri).snapshot().metadata.schema_string)
    assert [(f["name"], f["type"], f["nullable"]) for f in meta["fields"]] == [
        ("id", "long", True),
        ("note", "string", True),
    ]
    # the old row reads the new column as null, in both readers; old versions keep the
    # old schema
    assert _both_read(uri) == normalize([{"id": 1, "note": None}, {"id": 2, "note": "n"}])
    assert lq_rows(uri, 0) == [{"id": 1}]
    assert dl_rows(uri, 0) == [{"id": 1}]
    # a later append may omit the (nullable) new column
    lakequery.write(uri, pa.table({"id": [3]}), mode="append")
    assert {r["id"]: r["note"] for r in lq_rows(uri)} == {1: None, 2: "n", 3: None}


def test_merge_adds_fields_to_structs_in_lists_and_maps(uri: str) -> None:
    """Structs gain new fields as array elements and map values too (the merge compared
    whole array types and refused them); without ``schema_mode`` the error names the
    nested field."""
    st = pa.struct([("a", pa.int64())])
    st2 = pa.struct([("a", pa.int64()), ("c", pa.string())])

    def table(i: int, t: pa.DataType) -> pa.Table:
        row = {"a": i} if t == st else {"a": i, "c": str(i)}
        return pa.table(
            {
                "id": [i],
                "l": pa.array([[row]], pa.list_(t)),
                "m": pa.array([[("k", row)]], pa.map_(pa.string(), t)),
            }
        )

    lakequery.write(uri, table(1, st))
    with pytest.raises(SchemaMismatchError, match=r"'l\.element\.c'"):
        lakequery.write(uri, table(2, st2), mode="append")
    lakequery.write(uri, table(2, st2), mode="append", schema_mode="merge")
    schema = lakequery.DeltaTable(uri).snapshot().schema
    assert schema.field("l").type == pa.list_(st2)
    assert schema.field("m").type == pa.map_(pa.string(), st2)
    want = [
        {"id": 1, "l": [{"a": 1, "c": None}], "m": [("k", {"a": 1, "c": None})]},
        {"id": 2, "l": [{"a": 2, "c": "2"}], "m": [("k", {"a": 2, "c": "2"})]},
    ]
    scan = lakequery.DeltaTable(uri).snapshot().scan()
    assert scan.to_arrow().sort_by("id").to_pylist() == want
    assert scan.to_duckdb().order("id").to_arrow_table().to_pylist() == want
    # (deltalake 1.6.6 cannot read a map whose value struct gained a field: its bug)
    dl = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(uri))
    got = pa.table(dl.execute("SELECT id, l FROM t ORDER BY id").read_all()).to_pylist()
    assert got == [{"id": r["id"], "l": r["l"]} for r in want]


def test_merge_widens_int_to_long(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": pa.array([1, 2], pa.int32()), "s": ["a", "b"]}))
    big = pa.table({"id": pa.array([2**40], pa.int64()), "s": ["c"]})
    with pytest.raises(SchemaMismatchError) as err:
        lakequery.write(uri, big, mode="append")
    assert "integer" in str(err.value) and "long" in str(err.value)
    lakequery.write(uri, big, mode="append", schema_mode="merge")
    snap = lakequery.DeltaTable(uri).snapshot()
    field = json.loads(snap.metadata.schema_string)["fields"][0]
    assert field["type"] == "long"
    assert field["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    assert snap.metadata.configuration.get("delta.enableTypeWidening") == "true"
    assert snap.protocol.supports("typeWidening")
    assert snap.schema.field("id").type == pa.int64()
    expected = normalize([{"id": 1, "s": "a"}, {"id": 2, "s": "b"}, {"id": 2**40, "s": "c"}])
    assert normalize(lq_rows(uri)) == expected
    try:
        theirs = dl_rows(uri)
    except Exception as exc:  # deltalake 1.6 implements no typeWidening reader support
        assert "typeWidening" in str(exc) or "TypeWidening" in str(exc)
    else:
        assert normalize(theirs) == expected
    # deltalake still reads the version before the widening
    assert normalize(dl_rows(uri, 0)) == normalize([{"id": 1, "s": "a"}, {"id": 2, "s": "b"}])


def test_schema_mode_overwrite_replaces_schema_and_partitioning(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    table_id = lakequery.DeltaTable(uri).snapshot().metadata.id
    with pytest.raises(ValueError, match="overwrite"):
        lakequery.write(uri, pa.table({"x": [1.0]}), mode="append", schema_mode="overwrite")
    new = pa.table({"x": [1.5, 2.5], "day": ["mon", "tue"], "n": [1, 2]})
    r = lakequery.write(uri, new, mode="overwrite", schema_mode="overwrite", partition_by=["day"])
    assert r.num_removed_files == 2
    snap = lakequery.DeltaTable(uri).snapshot()
    assert snap.metadata.id == table_id
    assert snap.partition_columns == ["day"]
    assert sorted(snap.schema.names) == ["day", "n", "x"]
    assert _both_read(uri) == normalize(new.to_pylist())
    assert normalize(dl_rows(uri, 0)) == normalize([{"id": 1, "p": "a"}, {"id": 2, "p": "b"}])


# -- idempotent writes -------------------------------------------------------------------------


def test_app_id_makes_writes_idempotent(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": [0]}))
    first = lakequery.write(
        uri, pa.table({"id": [1]}), mode="append", app_id="ingest", app_version=1
    )
    assert not first.skipped and first.version == 1
    again = lakequery.write(
        uri, pa.table({"id": [1]}), mode="append", app_id="ingest", app_version=1
    )
    assert again.skipped and again.version == 1
    assert "ingest" in again.message and "1" in again.message
    older = lakequery.write(
        uri, pa.table({"id": [1]}), mode="append", app_id="ingest", app_version=0
    )
    assert older.skipped
    other = lakequery.write(
        uri, pa.table({"id": [2]}), mode="append", app_id="other", app_version=1
    )
    newer = lakequery.write(
        uri, pa.table({"id": [3]}), mode="append", app_id="ingest", app_version=5
    )
    assert (other.version, newer.version) == (2, 3)
    snap = lakequery.DeltaTable(uri).snapshot()
    assert snap.txns == {"ingest": 5, "other": 1}
    assert _ids(lq_rows(uri)) == _ids(dl_rows(uri)) == [0, 1, 2, 3]
    assert len(_versions(uri)) == 4
    txn = [a["txn"] for a in commit_actions(uri, 3) if "txn" in a]
    assert [(t["appId"], t["version"]) for t in txn] == [("ingest", 5)]
    assert deltalake.DeltaTable(uri).transaction_version("ingest") == 5
    with pytest.raises(ValueError, match="together"):
        lakequery.write(uri, pa.table({"id": [4]}), mode="append", app_id="x")


# -- append-only, constraints, predicates ------------------------------------------------------


def test_append_only_refuses_overwrite(uri: str) -> None:
    lakequery.write(
        uri, pa.table({"id": [1], "p": ["a"]}), configuration={"delta.appendOnly": "true"}
    )
    assert lakequery.DeltaTable(uri).snapshot().protocol.supports("appendOnly")
    with pytest.raises(AppendOnlyError):
        lakequery.write(uri, pa.table({"id": [2], "p": ["a"]}), mode="overwrite")
    with pytest.raises(AppendOnlyError):
        lakequery.write(
            uri, pa.table({"id": [2], "p": ["a"]}), mode="overwrite", predicate="p = 'a'"
        )
    with pytest.raises(AppendOnlyError):  # as Spark, whatever the overwrite would remove
        lakequery.write(
            uri, pa.table({"id": [2], "p": ["z"]}), mode="overwrite", predicate="p = 'z'"
        )
    with pytest.raises(AppendOnlyError):  # a commit lifting the property removes nothing
        lakequery.write(
            uri,
            pa.table({"id": [5]}),
            mode="overwrite",
            schema_mode="overwrite",
            configuration={"delta.appendOnly": "false"},
        )
    assert lakequery.write(uri, pa.table({"id": [3], "p": ["b"]}), mode="append").version == 1
    assert _ids(lq_rows(uri)) == _ids(dl_rows(uri)) == [1, 3]
    assert len(_versions(uri)) == 2


def test_append_only_refuses_restore_to_a_version_before_it(uri: str) -> None:
    """The table as read decides: RESTORE to a version without ``delta.appendOnly`` would
    remove the rows appended since (the check read the restored metadata)."""
    lakequery.write(uri, pa.table({"id": [1, 2]}))
    dt = lakequery.DeltaTable(uri)
    dt.alter.set_properties({"delta.appendOnly": "true"})
    lakequery.write(uri, pa.table({"id": [3]}), mode="append")
    with pytest.raises(AppendOnlyError, match="RESTORE"):
        dt.restore(version=0)
    assert len(_versions(uri)) == 3
    dt.alter.set_properties({"delta.appendOnly": "false"})  # lifted first: then it may
    dt.restore(version=0)
    assert _ids(lq_rows(uri)) == [1, 2]


def test_check_constraints_enforced(uri: str) -> None:
    config = {
        **NO_DVS,
        "delta.constraints.positive": "id > 0",
        "delta.constraints.short_name": "length(name) < 4",
    }
    lakequery.write(uri, pa.table({"id": [1], "name": ["a"]}), configuration=config)
    snap = lakequery.DeltaTable(uri).snapshot()
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (1, 3)
    with pytest.raises(ConstraintViolationError) as err:
        lakequery.write(uri, pa.table({"id": [5, -1], "name": ["b", "c"]}), mode="append")
    assert err.value.constraint == "positive" and "-1" in str(err.value)
    with pytest.raises(ConstraintViolationError) as err:
        lakequery.write(uri, pa.table({"id": [5], "name": ["long"]}), mode="append")
    assert err.value.constraint == "short_name"
    with pytest.raises(ConstraintViolationError):  # violating rows are refused on create too
        lakequery.write(str(Path(uri).parent / "t2"), pa.table({"id": [0]}), configuration=config)
    assert lakequery.write(uri, pa.table({"id": [7], "name": ["ok"]}), mode="append").version == 1
    assert _both_read(uri) == normalize([{"id": 1, "name": "a"}, {"id": 7, "name": "ok"}])


def _set_schema(uri: str, protocol: Protocol, **metadata_by_column: dict[str, Any]) -> None:
    """Commits column metadata (invariants, generation expressions) to a table."""
    dt = lakequery.DeltaTable(uri)
    snap = dt.snapshot()
    doc = json.loads(snap.metadata.schema_string)
    for f in doc["fields"]:
        f["metadata"].update(metadata_by_column.get(f["name"], {}))
    txn = Transaction(dt.storage, snap, operation="CHANGE COLUMN")
    txn.set_metadata(dataclasses.replace(snap.metadata, schema_string=json.dumps(doc)))
    txn.set_protocol(protocol)
    txn.commit()


def test_invariants_enforced(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": [1], "x": [10]}))
    invariant = json.dumps({"expression": {"expression": "x < 100"}})
    _set_schema(uri, Protocol(1, 2), x={"delta.invariants": invariant})
    with pytest.raises(ConstraintViolationError) as err:
        lakequery.write(uri, pa.table({"id": [2], "x": [100]}), mode="append")
    assert "x < 100" in str(err.value)
    with pytest.raises(ConstraintViolationError):  # NULL fails an invariant too
        lakequery.write(
            uri, pa.table({"id": [2], "x": pa.array([None], pa.int64())}), mode="append"
        )
    lakequery.write(uri, pa.table({"id": [3], "x": [99]}), mode="append")
    assert _both_read(uri) == normalize([{"id": 1, "x": 10}, {"id": 3, "x": 99}])


def test_generated_columns_computed_and_checked(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": [1], "twice": [2]}))
    _set_schema(uri, Protocol(1, 4), twice={"delta.generationExpression": "id * 2"})
    lakequery.write(uri, pa.table({"id": [5]}), mode="append")  # computed
    lakequery.write(uri, pa.table({"id": [6], "twice": [12]}), mode="append")  # checked: ok
    with pytest.raises(ConstraintViolationError):
        lakequery.write(uri, pa.table({"id": [7], "twice": [13]}), mode="append")
    assert _both_read(uri) == normalize(
        [{"id": 1, "twice": 2}, {"id": 5, "twice": 10}, {"id": 6, "twice": 12}]
    )


def test_predicate_overwrite_refuses_rows_outside(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]}), partition_by=["p"])
    with pytest.raises(ConstraintViolationError) as err:
        lakequery.write(
            uri, pa.table({"id": [4, 5], "p": ["a", "b"]}), mode="overwrite", predicate="p = 'a'"
        )
    assert "p = 'a'" in str(err.value)
    with pytest.raises(ConstraintViolationError):  # a data-column predicate too
        lakequery.write(
            uri, pa.table({"id": [0], "p": ["a"]}), mode="overwrite", predicate="id > 1"
        )
    assert len(_versions(uri)) == 1
    r = lakequery.write(
        uri, pa.table({"id": [4], "p": ["a"]}), mode="overwrite", predicate="p = 'a'"
    )
    assert r.num_removed_files == 1
    assert _ids(lq_rows(uri)) == _ids(dl_rows(uri)) == [2, 4]
    # a data predicate keeps the non-matching rows of the files it rewrites
    r = lakequery.write(
        uri, pa.table({"id": [10], "p": ["b"]}), mode="overwrite", predicate="id >= 3"
    )
    assert _ids(lq_rows(uri)) == _ids(dl_rows(uri)) == [2, 10]


@pytest.fixture
def new_york_engine_zone() -> Any:
    """The engine database's zone as on a machine in New York (DuckDB takes it from the
    system when the database opens)."""
    from lakequery.duckdb_databases import engine_database

    db = engine_database()
    (old,) = db.execute("SELECT current_setting('TimeZone')").fetchone() or ("UTC",)
    db.execute("SET GLOBAL TimeZone = 'America/New_York'")
    yield
    db.execute(f"SET GLOBAL TimeZone = '{old}'")


@pytest.mark.usefixtures("new_york_engine_zone")
def test_predicate_overwrite_replaces_what_the_filter_selects(uri: str) -> None:
    """The rows an overwrite replaces, the rows it keeps and the check of the new rows all
    follow lakequery's predicate language, as ``scan(filter=)`` does: the raw text was
    run by DuckDB in the machine's zone (05:00 UTC read as before 03:00 New York time:
    row 2 deleted) and with DOUBLE literals against FLOAT columns (0.1f > 0.1: row 1
    deleted)."""
    utc = dt.timezone.utc
    ts = pa.timestamp("us", tz="UTC")
    at = [dt.datetime(2024, 1, 1, h, tzinfo=utc) for h in (2, 5, 1)]
    lakequery.write(uri, pa.table({"id": [1, 2], "ts": pa.array(at[:2], ts)}))
    pred = "ts < TIMESTAMP '2024-01-01 03:00:00'"
    assert _ids(lakequery.DeltaTable(uri).snapshot().scan(filter=pred).to_arrow().to_pylist()) == [
        1
    ]
    lakequery.write(
        uri, pa.table({"id": [10], "ts": pa.array(at[2:], ts)}), mode="overwrite", predicate=pred
    )
    assert _ids(lq_rows(uri)) == [2, 10]
    with pytest.raises(ConstraintViolationError, match="predicate"):  # 04:00 UTC
        late = [dt.datetime(2024, 1, 1, 4, tzinfo=utc)]
        lakequery.write(
            uri, pa.table({"id": [11], "ts": pa.array(late, ts)}), mode="overwrite", predicate=pred
        )

    f32 = f"{uri}/f32"
    lakequery.write(f32, pa.table({"id": [1, 2], "f": pa.array([0.1, 5.0], pa.float32())}))
    new = pa.table({"id": [10], "f": pa.array([7.0], pa.float32())})
    lakequery.write(f32, new, mode="overwrite", predicate="f > 0.1e0")
    assert _ids(lq_rows(f32)) == [1, 10]


def test_predicate_overwrite_takes_quoted_column_names(uri: str) -> None:
    """A double-quoted name is a column, as in every filter (it was read as a Spark
    string literal by the check of the new rows)."""
    lakequery.write(uri, pa.table({"my col": [1, 2], "id": [1, 2]}))
    new = pa.table({"my col": [1], "id": [9]})
    lakequery.write(uri, new, mode="overwrite", predicate='"my col" = 1')
    assert _ids(lq_rows(uri)) == [2, 9]


@pytest.mark.parametrize("schema_mode", [None, "merge"])
def test_nested_field_names_match_without_case(uri: str, schema_mode: str | None) -> None:
    """``s.X`` is the table's ``s.x`` (Delta names are case-insensitive), in structs, in
    lists of structs and in map values: the check accepted it and the cast wrote nulls
    (structs), or the check refused it (lists)."""
    st = pa.struct([("x", pa.int32()), ("y", pa.string())])
    up = pa.struct([("Y", pa.string()), ("X", pa.int32())])

    def table(i: int, t: pa.DataType) -> pa.Table:
        row = {"x": i, "y": str(i)} if t == st else {"X": i, "Y": str(i)}
        return pa.table(
            {
                "id": [i],
                "s": pa.array([row], t),
                "l": pa.array([[row]], pa.list_(t)),
                "m": pa.array([[("k", row)]], pa.map_(pa.string(), t)),
            }
        )

    lakequery.write(uri, table(1, st))
    lakequery.write(uri, table(2, up), mode="append", schema_mode=schema_mode)
    want = [
        {
            "id": i,
            "s": {"x": i, "y": str(i)},
            "l": [{"x": i, "y": str(i)}],
            "m": [("k", {"x": i, "y": str(i)})],
        }
        for i in (1, 2)
    ]
    got = lakequery.DeltaTable(uri).snapshot().scan().to_arrow().sort_by("id").to_pylist()
    assert got == want
    assert (
        lakequery.DeltaTable(uri).snapshot().metadata.schema
        == lakequery.DeltaTable(uri).snapshot(version=0).metadata.schema
    )


# -- commitInfo and protocols ------------------------------------------------------------------


def test_commit_info_fields(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    lakequery.write(uri, pa.table({"id": [3], "p": ["a"]}), mode="append")
    lakequery.write(uri, pa.table({"id": [4], "p": ["a"]}), mode="overwrite", predicate="p = 'a'")
    history = lakequery.DeltaTable(uri).history()
    assert [e.version for e in history] == [2, 1, 0]
    create, append, overwrite = reversed(history)
    assert create.operation == "CREATE TABLE"
    assert append.operation == overwrite.operation == "WRITE"
    assert append.parameters["mode"] == "Append"
    assert overwrite.parameters["mode"] == "Overwrite"
    assert overwrite.parameters["predicate"] == "p = 'a'"
    assert int(append.metrics["numFiles"]) == 1 and int(append.metrics["numOutputRows"]) == 1
    assert int(overwrite.metrics["numRemovedFiles"]) == 2
    assert create.timestamp <= append.timestamp <= overwrite.timestamp
    info = commit_actions(uri, 1)[0]["commitInfo"]  # commitInfo is the first line
    assert info["engineInfo"].startswith("lakequery/")
    assert info["isBlindAppend"] is True and info["readVersion"] == 0
    assert info["isolationLevel"] == "WriteSerializable"
    assert isinstance(info["timestamp"], int) and info["timestamp"] > 1_600_000_000_000
    assert json.loads(info["operationParameters"]["partitionBy"]) == ["p"]
    assert all(isinstance(v, str) for v in info["operationMetrics"].values())
    txn_ids = {commit_actions(uri, v)[0]["commitInfo"]["txnId"] for v in range(3)}
    assert len(txn_ids) == 3
    over_info = commit_actions(uri, 2)[0]["commitInfo"]
    assert over_info["isBlindAppend"] is False and over_info["readVersion"] == 1
    assert "readVersion" not in commit_actions(uri, 0)[0]["commitInfo"]
    # deltalake sees the same history
    theirs = deltalake.DeltaTable(uri).history()
    assert [h["operation"] for h in theirs] == ["WRITE", "WRITE", "CREATE TABLE"]


NO_DVS = {"delta.enableDeletionVectors": "false"}


@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        # deletion vectors are on by default (DML writes them instead of rewriting files)
        ({}, (3, 7, ("deletionVectors",), ("deletionVectors",))),
        ({**NO_DVS}, (1, 1, None, None)),
        ({**NO_DVS, "delta.appendOnly": "true"}, (1, 2, None, None)),
        ({**NO_DVS, "delta.constraints.c": "id > 0"}, (1, 3, None, None)),
        ({**NO_DVS, "delta.columnMapping.mode": "name"}, (2, 5, None, None)),
        (
            {"delta.enableDeletionVectors": "true"},
            (3, 7, ("deletionVectors",), ("deletionVectors",)),
        ),
        (
            {**NO_DVS, "delta.enableRowTracking": "true"},
            (1, 7, None, ("domainMetadata", "rowTracking")),
        ),
        (
            {**NO_DVS, "delta.enableInCommitTimestamps": "true"},
            (1, 7, None, ("inCommitTimestamp",)),
        ),
    ],
)
def test_new_tables_get_the_minimal_protocol(
    uri: str, configuration: dict[str, str], expected: tuple[Any, ...]
) -> None:
    data = pa.table({"id": [1, 2], "name": ["a", "b"]})
    lakequery.write(uri, data, configuration=configuration)
    proto = lakequery.DeltaTable(uri).snapshot().protocol
    rf = tuple(sorted(proto.reader_features)) if proto.reader_features is not None else None
    wf = tuple(sorted(proto.writer_features)) if proto.writer_features is not None else None
    assert (proto.min_reader_version, proto.min_writer_version, rf, wf) == expected
    action = next(a["protocol"] for a in commit_actions(uri, 0) if "protocol" in a)
    assert action["minReaderVersion"] == expected[0]
    assert ("readerFeatures" in action) == (expected[2] is not None)
    assert ("writerFeatures" in action) == (expected[3] is not None)
    # deltalake accepts the protocol and reads the same rows
    theirs = deltalake.DeltaTable(uri).protocol()
    assert (theirs.min_reader_version, theirs.min_writer_version) == expected[:2]
    assert normalize(dl_rows(uri)) == normalize(lq_rows(uri)) == normalize(data.to_pylist())
    stored = lakequery.DeltaTable(uri).snapshot().metadata.configuration
    assert {k: v for k, v in stored.items() if k in configuration} == configuration


def test_feature_pseudo_properties_are_not_stored(uri: str) -> None:
    lakequery.write(
        uri,
        pa.table({"id": [1]}),
        configuration={**NO_DVS, "delta.feature.domainMetadata": "supported", "owner": "me"},
    )
    snap = lakequery.DeltaTable(uri).snapshot()
    assert snap.protocol == Protocol(1, 7, None, ("domainMetadata",))
    assert snap.metadata.configuration == {**NO_DVS, "owner": "me"}


# -- inputs, file sizes, checkpoints -----------------------------------------------------------


def _inputs() -> list[tuple[str, Any]]:
    def batches() -> Any:
        yield pa.record_batch({"id": [40], "s": ["iter-a"]})
        yield pa.record_batch({"id": [41], "s": ["iter-b"]})

    return [
        ("table", pa.table({"id": [10], "s": ["table"]})),
        ("batch", pa.record_batch({"id": [11], "s": ["batch"]})),
        ("reader", pa.table({"id": [12, 13], "s": ["r", "r"]}).to_reader(max_chunksize=1)),
        ("iterable", batches()),
        ("list", [pa.record_batch({"id": [50], "s": ["list"]})]),
        ("pandas", pd.DataFrame({"id": [20, 21], "s": ["pd", None]})),
        ("polars", pl.DataFrame({"id": [30], "s": ["pl"]})),
        ("lazy", pl.DataFrame({"id": [31], "s": ["lazy"]}).lazy().with_columns(pl.col("id") + 1)),
        ("duckdb", duckdb.sql("SELECT 60::BIGINT AS id, 'duck' AS s")),
    ]


def test_every_input_kind(uri: str) -> None:
    lakequery.write(uri, pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.string())}))
    expected: list[dict[str, Any]] = []
    for kind, data in _inputs():
        before = len(expected)
        if kind == "lazy":
            expected.append({"id": 32, "s": "lazy"})
        elif kind == "duckdb":
            expected.append({"id": 60, "s": "duck"})
        elif kind == "iterable":
            expected += [{"id": 40, "s": "iter-a"}, {"id": 41, "s": "iter-b"}]
        elif kind == "pandas":
            expected += data.to_dict("records")
            expected[-1]["s"] = None
        elif kind == "reader":
            expected += [{"id": 12, "s": "r"}, {"id": 13, "s": "r"}]
        elif kind in ("batch", "list"):
            rows = data.to_pylist() if kind == "batch" else data[0].to_pylist()
            expected += rows
        else:
            expected += data.to_pylist() if kind == "table" else data.to_dicts()
        result = lakequery.write(uri, data, mode="append")
        assert result.num_rows == len(expected) - before, kind
    assert _both_read(uri) == normalize(expected)
    with pytest.raises(TypeError):
        lakequery.write(uri, {"id": [1]}, mode="append")
    with pytest.raises(TypeError):
        lakequery.write(uri, iter([]), mode="append")


@pytest.mark.parametrize(
    "configuration",
    [
        {"delta.checkpointInterval": "abc"},
        {"delta.checkpointInterval": "0"},
        {"delta.appendOnly": "maybe"},
        {"delta.deletedFileRetentionDuration": "garbage"},
        {"delta.targetFileSize": "big"},
    ],
)
def test_bad_property_values_are_refused_before_committing(
    uri: str, configuration: dict[str, str]
) -> None:
    """A value was stored as given: ``delta.checkpointInterval="abc"`` committed the
    write and then failed it, and every later write, after their commits."""
    with pytest.raises(lakequery.LakeQueryError, match=next(iter(configuration))):
        lakequery.write(uri, pa.table({"id": [1]}), configuration=configuration)
    assert not os.path.exists(os.path.join(uri, "_delta_log"))
    lakequery.write(uri, pa.table({"id": [1]}), configuration={"delta.targetFileSize": "1mb"})
    with pytest.raises(lakequery.LakeQueryError, match="checkpointInterval"):
        lakequery.write(
            uri,
            pa.table({"id": [2]}),
            mode="append",
            configuration={"delta.checkpointInterval": "-1"},
        )
    assert lakequery.DeltaTable(uri).snapshot().version == 0


def test_a_bad_stored_interval_does_not_fail_writes_after_their_commit(tmp_path: Path) -> None:
    """A checkpoint interval another writer stored that lakequery cannot parse: writes
    commit and return (no checkpoint), rather than committing and raising."""
    from tablekit import TableKit

    kit = TableKit(tmp_path / "t")
    kit.create(pa.schema([("id", pa.int64())]), configuration={"delta.checkpointInterval": "x"})
    for i in range(12):
        assert lakequery.write(kit.uri, pa.table({"id": [i]}), mode="append").version == i + 1
    assert lakequery.DeltaTable(kit.uri).snapshot().num_records() == 12


def test_pandas_named_index_levels_are_columns(uri: str) -> None:
    """A named index is data (``set_index("k")``), kept as a column as ``deltalake`` and
    pyarrow do; an unnamed one (the default ``RangeIndex``) is not."""
    frame = pd.DataFrame({"k": [1, 2], "g": ["a", "b"], "v": [0.5, 1.5]})
    lakequery.write(uri, frame.set_index(["k", "g"]))
    lakequery.write(uri, pd.DataFrame({"k": [3], "g": ["c"], "v": [2.5]}), mode="append")
    snap = lakequery.DeltaTable(uri).snapshot()
    assert snap.schema.names == ["k", "g", "v"]
    want = [
        {"k": 1, "g": "a", "v": 0.5},
        {"k": 2, "g": "b", "v": 1.5},
        {"k": 3, "g": "c", "v": 2.5},
    ]
    assert _both_read(uri) == normalize(want)


def test_dictionary_columns_of_polars_and_pyarrow(uri: str) -> None:
    """Polars' Categorical and Enum columns arrive as dictionaries of view strings, which
    pyarrow cannot cast (no take kernel for string_view); they are written as strings,
    as partition columns too, like pyarrow's own dictionaries."""
    frame = pl.DataFrame(
        {
            "id": [1, 2, 3],
            "c": pl.Series(["x", "y", None], dtype=pl.Categorical),
            "e": pl.Series(["a", "b", "a"], dtype=pl.Enum(["a", "b"])),
        }
    )
    lakequery.write(uri, frame, partition_by=["c"])
    more = pa.table(
        {
            "id": [4],
            "c": pa.array(["y"]).dictionary_encode(),
            "e": pa.array(["b"], pa.string_view()).dictionary_encode(),
        }
    )
    lakequery.write(uri, more, mode="append")
    snap = lakequery.DeltaTable(uri).snapshot()
    assert [f.type for f in snap.schema] == [pa.int64(), pa.string(), pa.string()]
    want = [(1, "x", "a"), (2, "y", "b"), (3, None, "a"), (4, "y", "b")]
    assert sorted(snap.scan().to_polars().collect().rows()) == want
    assert _both_read(uri) == normalize([{"id": i, "c": c, "e": e} for i, c, e in want])


def test_target_file_size_rolls_over(uri: str) -> None:
    n = 60_000
    data = pa.table(
        {"id": pa.array(range(n), pa.int64()), "s": [f"value-{i:08d}" for i in range(n)]}
    )
    # one single big batch, and the same data as many small batches
    r = lakequery.write(uri, data.combine_chunks(), target_file_size=64 * 1024)
    assert r.num_files >= 4, r
    files = lakequery.DeltaTable(uri).snapshot().files()
    assert files.num_rows == r.num_files
    assert sum(int(x or 0) for x in files.column("num_records").to_pylist()) == n
    # no file is far above the target (one flush beyond it at most)
    assert max(int(x or 0) for x in files.column("size").to_pylist()) < 4 * 64 * 1024
    r2 = lakequery.write(
        uri, data.to_batches(max_chunksize=500), mode="overwrite", target_file_size=64 * 1024
    )
    assert r2.num_files >= 4
    sizes = [
        os.path.getsize(Path(uri) / str(p))
        for p in lakequery.DeltaTable(uri).snapshot().files().column("path").to_pylist()
    ]
    assert sum(sizes) == r2.num_bytes
    ours = lakequery.DeltaTable(uri).snapshot().scan().to_arrow().sort_by("id")
    assert ours.equals(data)
    assert dl_table(uri).sort_by("id").equals(data)


def test_checkpoint_written_at_version_10(uri: str) -> None:
    for i in range(12):
        lakequery.write(
            uri,
            pa.table({"id": [i], "p": [f"v{i % 3}"]}),
            mode="append",
            partition_by=["p"] if i == 0 else None,
        )
        if i == 5:  # an overwrite in between leaves tombstones in the checkpoint
            lakequery.write(
                uri, pa.table({"id": [99], "p": ["v0"]}), mode="overwrite", predicate="p = 'v0'"
            )
    log_dir = Path(uri) / "_delta_log"
    checkpoint = log_dir / f"{10:020d}.checkpoint.parquet"
    assert checkpoint.exists()
    assert json.loads((log_dir / "_last_checkpoint").read_text())["version"] == 10
    assert not (log_dir / f"{11:020d}.checkpoint.parquet").exists()
    ckpt = pq.read_table(checkpoint)
    assert {"add", "remove", "metaData", "protocol"} <= set(ckpt.column_names)
    # both readers agree at the checkpoint, after it and before it
    for version in (9, 10, 12):
        assert normalize(lq_rows(uri, version)) == normalize(dl_rows(uri, version)), version
    expected = {99} | {i for i in range(6, 12)} | {i for i in range(6) if i % 3}
    assert set(_ids(lq_rows(uri))) == expected
    # the checkpoint alone reconstructs version 10: hide the commits before it
    for v in range(10):
        (log_dir / f"{v:020d}.json").rename(log_dir / f"{v:020d}.json.hidden")
    assert normalize(lq_rows(uri)) == normalize(dl_rows(uri))
    assert set(_ids(lq_rows(uri))) == expected


# -- void columns and hidden nulls (digest §8.3) -------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (pa.table({"n": pa.nulls(2)}), "only void or partition columns"),
        (pa.table({"a": [1, 2]}).drop(["a"]), "only void or partition columns"),
        (pa.table({"n": pa.nulls(2), "p": ["x", "y"]}), "only void or partition columns"),
        (pa.table({"a": [1], "l": pa.array([[None]], pa.list_(pa.null()))}), "l.element is void"),
        (
            pa.table({"a": [1], "m": pa.array([[("k", None)]], pa.map_(pa.string(), pa.null()))}),
            "m.value is void",
        ),
        (
            pa.table({"a": [1], "s": pa.array([{"n": None}], pa.struct([("n", pa.null())]))}),
            "struct s has no field that is not void",
        ),
    ],
)
def test_schemas_no_data_file_may_have_are_refused(
    tmp_path: Path, data: pa.Table, message: str
) -> None:
    # the rows were silently lost (a file of no columns) or pyarrow failed on struct<>
    uri = str(tmp_path / "t")
    partition_by = ["p"] if "p" in data.column_names else None
    with pytest.raises(lakequery.SchemaError, match=message):
        lakequery.write(uri, data, partition_by=partition_by)
    assert not (tmp_path / "t").exists() or not list((tmp_path / "t").rglob("*.parquet"))


@pytest.mark.parametrize("mapping", ["none", "name"])
def test_void_fields_of_structs_are_left_out_of_files(tmp_path: Path, mapping: str) -> None:
    uri = str(tmp_path / "t")
    config = {"delta.columnMapping.mode": mapping}
    inner = pa.struct([("e", pa.null()), ("f", pa.int64())])
    s = pa.struct([("x", pa.int64()), ("note", pa.null()), ("d", inner)])
    rows = [{"id": 1, "s": {"x": 1, "note": None, "d": {"e": None, "f": 3}}}, {"id": 2, "s": None}]
    table = pa.Table.from_pylist(rows, pa.schema([("id", pa.int64()), ("s", s)]))
    lakequery.write(uri, table, configuration=config)
    scan = lakequery.DeltaTable(uri).snapshot().scan()
    assert scan.to_arrow().to_pylist() == rows
    assert [dict(zip(["id", "s"], r, strict=True)) for r in scan.to_duckdb().fetchall()] == rows
    assert scan.to_polars().collect().to_dicts() == rows
    [file] = list(Path(uri).glob("*.parquet"))
    stored = pq.read_schema(file).field(1).type
    assert stored.num_fields == 2  # x and d: the void field is not stored
    got = pa.table(
        deltalake.QueryBuilder()
        .register("t", deltalake.DeltaTable(uri))
        .execute("SELECT * FROM t ORDER BY id")
        .read_all()
    )
    assert got.to_pylist() == rows


@pytest.mark.parametrize(
    "typ",
    [pa.list_(pa.timestamp("us")), pa.map_(pa.string(), pa.timestamp("us"))],
)
def test_timestamp_ntz_in_arrays_and_maps_enables_the_feature(
    tmp_path: Path, typ: pa.DataType
) -> None:
    uri = str(tmp_path / "t")
    value = [dt.datetime(2024, 1, 2)] if pa.types.is_list(typ) else [("k", dt.datetime(2024, 1, 2))]
    lakequery.write(uri, pa.table({"id": [1], "c": pa.array([value], typ)}))
    assert lakequery.DeltaTable(uri).snapshot().protocol.supports("timestampNtz")
    assert len(dl_rows(uri)) == 1


@pytest.mark.parametrize("dv", ["true", "false"])
def test_null_struct_with_required_field_survives_rewrites(tmp_path: Path, dv: str) -> None:
    # DuckDB's Arrow output nulls a null struct's children too, and the Parquet writer
    # refused them for a NOT NULL field: DML rewriting such a row, and writes of DuckDB
    # relations, failed with a raw pyarrow error
    uri = str(tmp_path / "t")
    st = pa.struct([pa.field("x", pa.int32(), nullable=False)])
    inner = pa.struct([pa.field("y", st, nullable=False)])
    schema = pa.schema([("id", pa.int64()), ("st", st), ("nested", inner)])
    rows = [
        {"id": 1, "st": {"x": 1}, "nested": {"y": {"x": 5}}},
        {"id": 2, "st": None, "nested": None},
    ]
    lakequery.write(
        uri, pa.Table.from_pylist(rows, schema), configuration={"delta.enableDeletionVectors": dv}
    )
    table = lakequery.DeltaTable(uri)
    table.update(set={"id": "20"}, predicate="id = 2")
    table.delete("id = 1")
    assert table.snapshot().scan().to_arrow().to_pylist() == [
        {"id": 20, "st": None, "nested": None}
    ]
    relation = table.snapshot().scan().to_duckdb()
    lakequery.write(uri, relation, mode="append")
    got = sorted(lakequery.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist(), key=repr)
    assert got == [{"id": 20, "st": None, "nested": None}] * 2


def test_predicate_overwrite_does_not_replace_the_schema(tmp_path: Path) -> None:
    # the kept rows' files hold the old schema: under column mapping they read as NULLs,
    # and a changed type made the table unreadable
    uri = str(tmp_path / "t")
    config = {"delta.columnMapping.mode": "name"}
    lakequery.write(
        uri, pa.table({"p": ["a", "b"], "v": ["x", "y"]}), partition_by="p", configuration=config
    )
    with pytest.raises(ValueError, match="leave one of them out"):
        lakequery.write(
            uri,
            pa.table({"p": ["a"], "v": [1.5]}),
            mode="overwrite",
            schema_mode="overwrite",
            predicate="p = 'a'",
        )
    assert lakequery.DeltaTable(uri).snapshot().version == 0


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_ids_of_the_data_are_not_taken_over(tmp_path: Path, mode: str) -> None:
    # a scan of a column-mapped table carries its ids and physical names; a table written
    # from it kept them while counting maxColumnId from 0, and a later column took an id
    # in use (the Arrow engine then read another column's values into it)
    config = {"delta.columnMapping.mode": mode}
    source = str(tmp_path / "source")
    lakequery.write(source, pa.table({"id": [1, 2], "name": ["a", "b"]}), configuration=config)
    data = lakequery.DeltaTable(source).snapshot().scan().to_arrow()
    copy = str(tmp_path / "copy")
    lakequery.write(copy, data, configuration=config)
    lakequery.write(source, data, mode="overwrite", schema_mode="overwrite")
    for uri, at_least in ((copy, 2), (source, 4)):
        table = lakequery.DeltaTable(uri)
        snap = table.snapshot()
        assert int(snap.metadata.configuration["delta.columnMapping.maxColumnId"]) >= at_least
        table.alter.add_columns([pa.field("score", pa.int64())])
        ids = [f.metadata["delta.columnMapping.id"] for f in table.snapshot().metadata.schema]
        assert len(set(ids)) == 3
        scan = table.snapshot().scan(filter="score > 0")
        assert scan.to_arrow().num_rows == 0
        assert (
            lakequery.DeltaTable(uri).snapshot().scan().to_arrow().column("score").null_count == 2
        )
    # a schema-merging append of another table's scan: its new column gets a fresh id
    other = str(tmp_path / "other")
    lakequery.write(other, pa.table({"id": [3], "extra": ["e"]}), configuration=config)
    more = lakequery.DeltaTable(other).snapshot().scan().to_arrow()
    lakequery.write(copy, more, mode="append", schema_mode="merge")
    ids = [
        f.metadata["delta.columnMapping.id"]
        for f in lakequery.DeltaTable(copy).snapshot().metadata.schema
    ]
    assert len(set(ids)) == len(ids) == 4


@pytest.mark.parametrize(
    "data",
    [
        pa.table(
            {
                "id": [1],
                "s": pa.array([{"a": 1, "": 5}], pa.struct([("a", pa.int64()), ("", pa.int64())])),
            }
        ),
        pa.table({"id": [1], "": [2]}),
    ],
)
def test_empty_field_names_are_refused(tmp_path: Path, data: pa.Table) -> None:
    # DuckDB names such a field element2 in its Arrow output: OPTIMIZE and copy-on-write
    # DML rewrote its values as NULL, and a top-level one failed DuckDB's parser
    uri = str(tmp_path / "t")
    with pytest.raises(lakequery.SchemaError, match="empty name"):
        lakequery.write(uri, data)


def test_null_map_value_with_required_field_survives_rewrites(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    value = pa.struct([pa.field("a", pa.int64(), nullable=False)])
    m = pa.array([[("k", {"a": 1})], [("k", None)]], pa.map_(pa.string(), value))
    lakequery.write(uri, pa.table({"id": [1, 2], "m": m}))
    lakequery.DeltaTable(uri).update(set={"id": "id + 10"}, predicate="id = 2")
    got = sorted(lakequery.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist(), key=repr)
    assert got == [{"id": 1, "m": [("k", {"a": 1})]}, {"id": 12, "m": [("k", None)]}]


@pytest.mark.parametrize(
    ("later", "where"),
    [
        (pa.record_batch({"k": [2], "s": pa.array([{"a": 2, "z": "lost"}])}), "s.z"),
        (
            pa.record_batch({"k": [2], "s": pa.array([{"a": 2, "l": [{"x": 1, "y": 2}]}])}),
            "s.l.element.y",
        ),
    ],
)
def test_struct_fields_of_a_later_batch_the_table_lacks(
    tmp_path: Path, later: pa.RecordBatch, where: str
) -> None:
    """A stream is planned from its first batch; a struct field only a later batch has
    is refused, as in one batch, never dropped (a cast to fewer fields drops them)."""
    uri = str(tmp_path / "t")
    first = pa.record_batch({"k": [1], "s": pa.array([{"a": 1, "l": [{"x": 0}]}])})
    if "l" not in later.column("s").type.names:
        first = pa.record_batch({"k": [1], "s": pa.array([{"a": 1}])})
    with pytest.raises(lakequery.SchemaMismatchError, match=where.replace(".", r"\.")):
        lakequery.write(uri, iter([first, later]))
    assert not (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").exists()  # no commit


def test_a_value_for_a_void_struct_field_in_a_later_batch(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    void = pa.struct([("a", pa.null()), ("b", pa.int64())])
    first = pa.record_batch({"k": [1], "s": pa.array([{"a": None, "b": 1}], void)})
    later = pa.record_batch({"k": [2], "s": pa.array([{"a": "lost", "b": 2}])})
    with pytest.raises(lakequery.SchemaMismatchError, match=r"s\.a"):
        lakequery.write(uri, iter([first, later]))


def test_duckdb_huge_integers_are_exact_or_refused(tmp_path: Path) -> None:
    """DuckDB's Arrow export spells HUGEINT and UHUGEINT as decimal128(38, 0) from their
    raw bits: a UHUGEINT past 2**127 came out negative. They are cast by DuckDB first."""
    con = duckdb.connect()
    uri = str(tmp_path / "ok")
    rel = con.sql(
        "SELECT sum(x) AS s, CAST(12345678901234567890123 AS UHUGEINT) AS u, "
        "CAST(-170141183460469231731687303715884105 AS HUGEINT) AS h FROM range(10) t(x)"
    )
    lakequery.write(uri, rel)
    got = lakequery.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist()
    assert got == [
        {"s": 45, "u": 12345678901234567890123, "h": -170141183460469231731687303715884105}
    ]
    for value, kind in [(2**128 - 1, "UHUGEINT"), (2**127 - 1, "HUGEINT")]:
        big = con.sql(f"SELECT CAST({value} AS {kind}) AS v")
        with pytest.raises(lakequery.SchemaError, match="DECIMAL"):
            lakequery.write(str(tmp_path / kind), big)


def test_values_without_a_delta_type_are_refused_by_name(tmp_path: Path) -> None:
    """An Arrow opaque column (DuckDB's VARINT) or a Polars Object column holds bytes
    only its producer can read: refused, naming the column, never stored as binary."""
    varint = duckdb.connect().sql("SELECT CAST(123 AS VARINT) AS big, 1 AS k")
    with pytest.raises(lakequery.SchemaError, match="big"):
        lakequery.write(str(tmp_path / "v"), varint)
    objects = pl.DataFrame(
        {"o": [object(), "x"], "k": [1, 2]}, schema={"o": pl.Object, "k": pl.Int64}
    )
    with pytest.raises(lakequery.SchemaError, match="'o'"):
        lakequery.write(str(tmp_path / "o"), objects)


def test_polars_categoricals_inside_lists_and_structs(tmp_path: Path) -> None:
    """Polars exports Categorical and Enum as dictionaries of string views, which pyarrow
    cannot cast: decoded inside lists and structs as at the top level."""
    frame = pl.DataFrame(
        {
            "l": pl.Series([["a", "b"], None], dtype=pl.List(pl.Categorical)),
            "s": pl.Series([{"c": "a"}, {"c": None}], dtype=pl.Struct({"c": pl.Categorical})),
            "e": pl.Series([["x"], ["y"]], dtype=pl.List(pl.Enum(["x", "y"]))),
        }
    )
    uri = str(tmp_path / "t")
    lakequery.write(uri, frame)
    snap = lakequery.DeltaTable(uri).snapshot()
    assert [str(snap.schema.field(n).type) for n in ("l", "s", "e")] == [
        "list<element: string>",
        "struct<c: string>",
        "list<element: string>",
    ]
    assert snap.scan().to_arrow().to_pylist() == [
        {"l": ["a", "b"], "s": {"c": "a"}, "e": ["x"]},
        {"l": None, "s": {"c": None}, "e": ["y"]},
    ]
