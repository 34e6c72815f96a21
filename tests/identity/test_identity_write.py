"""Identity columns written by ``lq.write``: generated values, high-water marks, explicit
values, and the Spark-written conformance table (digest §14, identityColumns).

Values are read back by lakequery and by ``deltalake`` (an independent reader); commit
files are read as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from tablekit import copy_conformance_table, read_actions

import lakequery as lq
from lakequery.writer.identity import Identity, identity_schema

SPARK_TABLE = "spark_identity_test_written_by_version_5"
#: deltalake's pyarrow reader refuses deletion vectors; these tables do without them.
NO_DV = {"delta.enableDeletionVectors": "false"}


def lq_table(uri: str) -> pa.Table:
    return lq.DeltaTable(uri).snapshot().scan().to_arrow()


def dl_table(uri: str) -> pa.Table:
    return deltalake.DeltaTable(uri).to_pyarrow_table()


def commit(uri: str, version: int) -> list[dict[str, Any]]:
    return read_actions(Path(uri) / "_delta_log" / f"{version:020d}.json")


def field_metadata(uri: str, column: str) -> dict[str, Any]:
    schema = json.loads(lq.DeltaTable(uri).snapshot().metadata.schema_string)
    return next(f["metadata"] for f in schema["fields"] if f["name"] == column)


def ids(table: pa.Table, column: str = "id") -> list[int]:
    return sorted(table.column(column).to_pylist())


def copy_spark_table(tmp_path: Path) -> str:
    return str(copy_conformance_table(SPARK_TABLE, tmp_path))


def test_generated_always_values_and_high_water_mark(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    r = lq.write(
        uri,
        pa.table({"v": ["a", "b", "c"]}),
        identity={"id": Identity(start=1, step=1)},
        configuration=NO_DV,
    )
    assert r.version == 0
    # the identity column is added in front, as a long; values start at `start`
    table = lq_table(uri)
    assert table.schema.field("id").type == pa.int64()
    assert table.column_names == ["id", "v"]
    assert sorted(table.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "b"},
        {"id": 3, "v": "c"},
    ]
    # exactly the metadata keys and JSON types Spark writes, mark = last value
    assert field_metadata(uri, "id") == {
        "delta.identity.start": 1,
        "delta.identity.step": 1,
        "delta.identity.allowExplicitInsert": False,
        "delta.identity.highWaterMark": 3,
    }
    # the smallest protocol with identity columns: writer 6, no table features
    proto = next(a["protocol"] for a in commit(uri, 0) if "protocol" in a)
    assert proto == {"minReaderVersion": 1, "minWriterVersion": 6}

    lq.write(uri, pa.table({"v": ["d", "e"]}), mode="append")
    actions = commit(uri, 1)
    meta = [a["metaData"] for a in actions if "metaData" in a]
    assert len(meta) == 1  # the new mark is committed with the data
    info = actions[0]["commitInfo"]
    assert info["tags"] == {"delta.identity.schemaUpdate": "true"}
    assert info["isBlindAppend"] is True
    assert field_metadata(uri, "id")["delta.identity.highWaterMark"] == 5
    assert ids(lq_table(uri)) == [1, 2, 3, 4, 5]
    theirs = dl_table(uri)
    assert ids(theirs) == [1, 2, 3, 4, 5]
    assert sorted(theirs.to_pylist(), key=lambda r: r["id"])[3:] == [
        {"id": 4, "v": "d"},
        {"id": 5, "v": "e"},
    ]


def test_negative_step_and_many_batches_and_files(tmp_path: Path) -> None:
    uri = str(tmp_path / "neg")
    lq.write(
        uri,
        pa.table({"g": pa.array([], pa.string())}),
        identity={"id": Identity(start=-10, step=-3)},
        configuration=NO_DV,
    )
    # nothing generated yet: no high-water mark, as Spark leaves a new empty table
    assert "delta.identity.highWaterMark" not in field_metadata(uri, "id")
    batches = [pa.record_batch({"g": [f"{b}-{i}" for i in range(1000)]}) for b in range(3)]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
    r = lq.write(uri, reader, mode="append", target_file_size=4096)
    assert r.num_files > 1
    expected = [-10 - 3 * k for k in range(3000)]
    table = lq_table(uri)
    assert ids(table) == sorted(expected)
    # values follow the input order across batches and files
    by_g = dict(zip(table.column("g").to_pylist(), table.column("id").to_pylist(), strict=True))
    assert [by_g[f"{b}-{i}"] for b in range(3) for i in range(1000)] == expected
    assert field_metadata(uri, "id")["delta.identity.highWaterMark"] == expected[-1]
    assert ids(dl_table(uri)) == sorted(expected)
    # the next write continues below the mark
    lq.write(uri, pa.table({"g": ["x"]}), mode="append")
    assert min(ids(lq_table(uri))) == expected[-1] - 3


def test_generated_always_refuses_explicit_values(tmp_path: Path) -> None:
    uri = str(tmp_path / "always")
    with pytest.raises(lq.IdentityColumnError, match="GENERATED ALWAYS"):
        lq.write(uri, pa.table({"id": [5], "v": ["a"]}), identity={"id": Identity()})
    assert not (Path(uri) / "_delta_log").exists()
    lq.write(uri, pa.table({"v": ["a"]}), identity={"id": Identity()})
    with pytest.raises(lq.IdentityColumnError, match="'id'") as err:
        lq.write(uri, pa.table({"ID": [7], "v": ["b"]}), mode="append")
    assert err.value.column == "id"
    assert lq.DeltaTable(uri).snapshot().version == 0
    assert ids(lq_table(uri)) == [1]


def test_by_default_keeps_explicit_values_and_generates_missing(tmp_path: Path) -> None:
    uri = str(tmp_path / "bydefault")
    spec = {"id": Identity(start=100, step=10, always=False)}
    lq.write(uri, pa.table({"id": [1, 2], "v": ["a", "b"]}), identity=spec, configuration=NO_DV)
    # explicit values are kept and, as in Spark, do not set a high-water mark
    meta = field_metadata(uri, "id")
    assert meta["delta.identity.allowExplicitInsert"] is True
    assert "delta.identity.highWaterMark" not in meta
    lq.write(uri, pa.table({"v": ["c", "d"]}), mode="append")
    lq.write(uri, pa.table({"id": [3], "v": ["e"]}), mode="append")
    lq.write(uri, pa.table({"v": ["f"]}), mode="append")
    assert ids(lq_table(uri)) == [1, 2, 3, 100, 110, 120]
    assert ids(dl_table(uri)) == [1, 2, 3, 100, 110, 120]
    assert field_metadata(uri, "id")["delta.identity.highWaterMark"] == 120
    # a write with explicit values only changes no metadata
    assert not [a for a in commit(uri, 2) if "metaData" in a]


def test_spark_table_metadata_shape_and_continued_sequence(tmp_path: Path) -> None:
    uri = copy_spark_table(tmp_path)
    spark_meta = field_metadata(uri, "id")
    before = ids(lq_table(uri))
    assert before == [1, 2, 4]
    assert spark_meta["delta.identity.highWaterMark"] == 4
    rows = pa.table({"part": pa.array([7, 8], pa.int32()), "value": ["x", "y"]})
    r = lq.write(uri, rows, mode="append")
    # the sequence continues above Spark's mark; the protocol is left alone
    assert ids(lq_table(uri)) == [1, 2, 4, 5, 6]
    assert ids(dl_table(uri)) == [1, 2, 4, 5, 6]
    ours = field_metadata(uri, "id")
    assert set(ours) == set(spark_meta)
    assert {k: type(v) for k, v in ours.items()} == {k: type(v) for k, v in spark_meta.items()}
    assert ours == {**spark_meta, "delta.identity.highWaterMark": 6}
    assert not [a for a in commit(uri, r.version) if "protocol" in a]
    # BY DEFAULT (allowExplicitInsert=true): explicit values are accepted
    lq.write(uri, pa.table({"id": [50], "part": pa.array([9], pa.int32())}), mode="append")
    assert ids(dl_table(uri)) == [1, 2, 4, 5, 6, 50]


def test_overwrite_and_delete_keep_existing_values(tmp_path: Path) -> None:
    uri = str(tmp_path / "ow")
    data = pa.table({"p": ["a", "a", "b"], "v": [1, 2, 3]})
    lq.write(uri, data, identity={"id": Identity()}, configuration=NO_DV)
    # overwrite with a predicate on a non-partition column copies the other rows
    lq.write(uri, pa.table({"p": ["c"], "v": [2]}), mode="overwrite", predicate="v = 2")
    rows = sorted(lq_table(uri).to_pylist(), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "p": "a", "v": 1},
        {"id": 3, "p": "b", "v": 3},
        {"id": 4, "p": "c", "v": 2},
    ]
    lq.DeltaTable(uri).delete("v = 1")  # copy-on-write here (no deletion vectors)
    assert ids(lq_table(uri)) == [3, 4]
    assert ids(dl_table(uri)) == [3, 4]
    assert field_metadata(uri, "id")["delta.identity.highWaterMark"] == 4


def test_declaration_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="step"):
        Identity(step=0)
    with pytest.raises(lq.IdentityColumnError, match="long"):
        identity_schema(pa.schema([("id", pa.string())]), {"id": Identity()})
    with pytest.raises(lq.IdentityColumnError, match="partition"):
        lq.write(
            str(tmp_path / "p"),
            pa.table({"id": [1], "v": [1]}),
            identity={"id": Identity(always=False)},
            partition_by=["id"],
        )
    uri = str(tmp_path / "exists")
    lq.write(uri, pa.table({"v": [1]}))
    with pytest.raises(ValueError, match="new table"):
        lq.write(uri, pa.table({"v": [2]}), mode="append", identity={"id": Identity()})


def test_schema_helper_marks_existing_long_columns() -> None:
    schema = identity_schema(
        pa.schema([("v", pa.string()), ("key", pa.int64())]),
        {"key": Identity(start=5, step=2, always=False)},
    )
    assert schema.names == ["v", "key"]
    assert dict(schema["key"].metadata) == {
        "delta.identity.start": 5,
        "delta.identity.step": 2,
        "delta.identity.allowExplicitInsert": True,
    }


def test_overflow_is_refused_and_nothing_committed(tmp_path: Path) -> None:
    uri = str(tmp_path / "big")
    lq.write(uri, pa.table({"v": [1]}), identity={"id": Identity(start=2**63 - 3)})
    lq.write(uri, pa.table({"v": [2]}), mode="append")  # 2**63 - 2
    with pytest.raises(lq.IdentityColumnError, match="overflows long"):
        lq.write(uri, pa.table({"v": [3, 4]}), mode="append")
    assert lq.DeltaTable(uri).snapshot().version == 1
    assert ids(lq_table(uri)) == [2**63 - 3, 2**63 - 2]


def test_optimize_keeps_ids_and_mark(tmp_path: Path) -> None:
    uri = str(tmp_path / "opt")
    lq.write(uri, pa.table({"v": ["a"]}), identity={"id": Identity()}, configuration=NO_DV)
    for v in "bcd":
        lq.write(uri, pa.table({"v": [v]}), mode="append")
    before = sorted(lq_table(uri).to_pylist(), key=lambda r: r["id"])
    metrics = lq.DeltaTable(uri).optimize()
    assert metrics.files_removed == 4
    assert sorted(lq_table(uri).to_pylist(), key=lambda r: r["id"]) == before
    assert ids(dl_table(uri)) == [1, 2, 3, 4]
    assert field_metadata(uri, "id")["delta.identity.highWaterMark"] == 4
    lq.write(uri, pa.table({"v": ["e"]}), mode="append")
    assert ids(lq_table(uri)) == [1, 2, 3, 4, 5]


def test_spark_data_source_refuses_to_generate(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from lakequery.spark.datasource_options import WriteOptions
    from lakequery.spark.datasource_write import plan

    uri = str(tmp_path / "spark")
    lq.write(uri, pa.table({"v": ["a"]}), identity={"id": Identity(always=False)})
    options = WriteOptions(uri=uri, mode="append")
    without_id = StructType([StructField("v", StringType())])
    with pytest.raises(lq.IdentityColumnError, match="Spark data source"):
        plan(options, without_id)
    # values given for a BY DEFAULT column need no generation: planned as usual
    with_id = StructType([StructField("id", LongType()), StructField("v", StringType())])
    assert plan(options, with_id).state is not None


def test_copying_an_identity_table_declares_nothing(tmp_path: Path) -> None:
    source = str(tmp_path / "source")
    lq.write(source, pa.table({"v": ["x", "y"]}), identity={"id": Identity()})
    rows = lq_table(source)  # its Arrow fields carry the Delta column metadata
    copy = str(tmp_path / "copy")
    lq.write(copy, rows)  # as CREATE TABLE AS SELECT: a plain long column
    assert field_metadata(copy, "id") == {}
    assert ids(lq_table(copy)) == [1, 2]
    # the values of the source's GENERATED ALWAYS column cannot go back into it
    with pytest.raises(lq.IdentityColumnError):
        lq.write(source, rows, mode="append")


def test_schema_overwrite_redeclaring_identity_keeps_the_mark(tmp_path: Path) -> None:
    uri = str(tmp_path / "replace")
    lq.write(uri, pa.table({"v": ["a", "b", "c"]}), identity={"id": Identity()})
    # replace the schema and the rows: ids handed out before stay taken
    lq.write(
        uri,
        pa.table({"v": ["d"], "w": [1]}),
        mode="overwrite",
        schema_mode="overwrite",
        identity={"id": Identity()},
    )
    got = lq_table(uri).to_pylist()
    assert [(r["id"], r["v"], r["w"]) for r in got] == [(4, "d", 1)]
    assert field_metadata(uri, "id")["delta.identity.highWaterMark"] == 4


def test_create_declares_identity_then_appends_generate(tmp_path: Path) -> None:
    uri = str(tmp_path / "created")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    dt = lq.DeltaTable.create(uri, schema, identity={"id": lq.Identity(start=10, step=5)})
    proto = dt.snapshot().protocol
    assert proto.supports("identityColumns")
    lq.write(uri, pa.table({"v": ["a", "b"]}), mode="append")
    lq.write(uri, pa.table({"v": ["c"]}), mode="append")
    got = lq.DeltaTable(uri).snapshot().scan().to_arrow().sort_by("id").to_pylist()
    assert got == [{"id": 10, "v": "a"}, {"id": 15, "v": "b"}, {"id": 20, "v": "c"}]
    with pytest.raises(lq.IdentityColumnError):
        lq.write(uri, pa.table({"id": [1], "v": ["x"]}), mode="append")


def test_spark_table_updated_merged_optimized(tmp_path: Path) -> None:
    """The Spark-written identity table through UPDATE, MERGE (inserts get ids above the
    mark) and OPTIMIZE; deltalake reads what lakequery reads after each command."""
    uri = copy_spark_table(tmp_path)
    dt = lq.DeltaTable(uri)
    dt.update("part = 2", set={"value": "'TWO'"})
    source = pa.table({"part": pa.array([3, 9], pa.int32()), "value": ["THREE", "nine"]})
    dt.merge(source, on="target.part = source.part").when_matched_update(
        {"value": "source.value"}
    ).when_not_matched_insert({"part": "source.part", "value": "source.value"}).execute()
    dt.optimize()
    got = sorted(lq_table(uri).to_pylist(), key=lambda r: r["id"])
    assert [(r["part"], r["value"]) for r in got] == [
        (1, "one"),
        (2, "TWO"),
        (3, "THREE"),
        (9, "nine"),
    ]
    new_id = got[-1]["id"]
    assert new_id > 4 and [r["id"] for r in got[:3]] == [1, 2, 4]  # kept, and a fresh id
    assert sorted(dl_table(uri).to_pylist(), key=lambda r: r["id"]) == got
    assert field_metadata(uri, "id")["delta.identity.highWaterMark"] >= new_id
