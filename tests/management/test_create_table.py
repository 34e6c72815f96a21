"""``DeltaTable.create``: empty tables in one commit, the smallest protocol for the
configuration, the three modes; read back by lakequery and by ``deltalake``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from readers_kit import deltalake_table, rows
from tablekit import read_actions

import lakequery as lq
from lakequery.errors import AppendOnlyError, SchemaError, TableAlreadyExistsError
from lakequery.protocol.schema import parse_schema

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.date32())])


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "table")


def commit(uri: str, version: int) -> list[dict[str, Any]]:
    return read_actions(Path(uri) / "_delta_log" / f"{version:020d}.json")


def test_empty_partitioned_table_in_one_commit(uri: str) -> None:
    dt = lq.DeltaTable.create(
        uri, SCHEMA, partition_by=["day"], name="events", description="the events"
    )
    actions = commit(uri, 0)
    assert sorted(next(iter(a)) for a in actions) == ["commitInfo", "metaData", "protocol"]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "CREATE TABLE"
    assert json.loads(info["operationParameters"]["partitionBy"]) == ["day"]
    snap = dt.snapshot()
    assert (snap.version, snap.num_files, snap.partition_columns) == (0, 0, ["day"])
    assert snap.metadata.name == "events" and snap.metadata.description == "the events"
    empty = snap.scan().to_arrow()
    assert empty.num_rows == 0 and empty.schema.names == ["id", "name", "day"]
    theirs = deltalake.DeltaTable(uri)
    assert theirs.metadata().partition_columns == ["day"]
    assert theirs.metadata().name == "events"
    assert [f.name for f in theirs.schema().fields] == ["id", "name", "day"]
    assert deltalake_table(uri).num_rows == 0


def test_writes_after_create_read_by_both(uri: str) -> None:
    lq.DeltaTable.create(uri, SCHEMA, partition_by="day")
    data = pa.table(
        {"id": [1, 2], "name": ["a", None], "day": pa.array([0, 1], pa.int32()).cast(pa.date32())}
    )
    assert lq.write(uri, data, mode="append").version == 1
    ours = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    assert rows(ours) == rows(deltalake_table(uri).select(ours.column_names)) == rows(data)


@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        ({}, (3, 7, ["deletionVectors"], ["deletionVectors"])),
        ({"delta.enableDeletionVectors": "false"}, (1, 1, None, None)),
        (
            {"delta.enableDeletionVectors": "false", "delta.appendOnly": "true"},
            (1, 2, None, None),
        ),
        (
            {"delta.enableDeletionVectors": "false", "delta.enableChangeDataFeed": "true"},
            (1, 4, None, None),
        ),
        (
            {"delta.enableDeletionVectors": "false", "delta.columnMapping.mode": "name"},
            (2, 5, None, None),
        ),
        (
            {"delta.enableDeletionVectors": "false", "delta.enableRowTracking": "true"},
            (1, 7, None, ["domainMetadata", "rowTracking"]),
        ),
        (
            {"delta.enableDeletionVectors": "false", "delta.feature.appendOnly": "supported"},
            (1, 2, None, None),
        ),
        (
            {"delta.enableChangeDataFeed": "true"},
            (3, 7, ["deletionVectors"], ["changeDataFeed", "deletionVectors"]),
        ),
    ],
)
def test_protocol_is_what_the_configuration_needs(
    uri: str, configuration: dict[str, str], expected: tuple[Any, ...]
) -> None:
    dt = lq.DeltaTable.create(uri, SCHEMA, configuration=configuration)
    proto = dt.snapshot().protocol
    got = (
        proto.min_reader_version,
        proto.min_writer_version,
        list(proto.reader_features) if proto.reader_features is not None else None,
        list(proto.writer_features) if proto.writer_features is not None else None,
    )
    assert got == expected
    theirs = deltalake.DeltaTable(uri).protocol()
    assert (theirs.min_reader_version, theirs.min_writer_version) == expected[:2]
    stored = dt.snapshot().metadata.configuration
    assert not any(k.startswith("delta.feature.") for k in stored)  # pseudo-properties
    if configuration.get("delta.enableRowTracking") == "true":
        assert stored["delta.rowTracking.materializedRowIdColumnName"]
    if configuration.get("delta.columnMapping.mode") == "name":
        assert stored["delta.columnMapping.maxColumnId"] == "3"
    assert deltalake_table(uri).num_rows == 0


def test_schema_features_from_a_delta_schema(uri: str) -> None:
    """A Delta ``StructType`` keeps column metadata: a generated column needs the
    ``generatedColumns`` feature (writer 4), a timestamp_ntz column ``timestampNtz``."""
    schema = parse_schema(
        json.dumps(
            {
                "type": "struct",
                "fields": [
                    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
                    {
                        "name": "twice",
                        "type": "long",
                        "nullable": True,
                        "metadata": {"delta.generationExpression": "id * 2"},
                    },
                ],
            }
        )
    )
    config = {"delta.enableDeletionVectors": "false"}
    proto = lq.DeltaTable.create(uri, schema, configuration=config).snapshot().protocol
    assert (proto.min_reader_version, proto.min_writer_version) == (1, 4)
    lq.write(uri, pa.table({"id": [3]}), mode="append")
    assert lq.DeltaTable(uri).snapshot().scan().to_arrow()["twice"].to_pylist() == [6]
    other = uri + "-ntz"
    ntz = pa.schema([("t", pa.timestamp("us"))])
    proto = lq.DeltaTable.create(other, ntz, configuration=config).snapshot().protocol
    assert proto.writer_features == ("timestampNtz",)
    assert proto.reader_features == ("timestampNtz",)


def test_modes(uri: str) -> None:
    first = lq.DeltaTable.create(uri, SCHEMA)
    table_id = first.snapshot().metadata.id
    with pytest.raises(TableAlreadyExistsError):
        lq.DeltaTable.create(uri, SCHEMA)
    other = pa.schema([("x", pa.string())])
    lq.DeltaTable.create(uri, other, mode="ignore")  # IF NOT EXISTS: left as it is
    assert lq.DeltaTable(uri).snapshot().version == 0
    assert lq.DeltaTable(uri).snapshot().schema.names == ["id", "name", "day"]
    lq.write(uri, pa.table({"id": [1]}), mode="append", schema_mode="merge")
    replaced = lq.DeltaTable.create(
        uri, other, mode="overwrite", configuration={"delta.enableChangeDataFeed": "true"}
    ).snapshot()
    assert replaced.version == 2 and replaced.num_files == 0
    assert replaced.schema.names == ["x"] and replaced.metadata.id == table_id
    assert replaced.metadata.configuration["delta.enableChangeDataFeed"] == "true"
    assert replaced.protocol.supports("changeDataFeed")
    assert next(a for a in commit(uri, 2) if "commitInfo" in a)["commitInfo"]["operation"] == (
        "CREATE OR REPLACE TABLE"
    )
    assert deltalake_table(uri).num_rows == 0
    # the version before the replace keeps its row
    assert lq.DeltaTable(uri).snapshot(version=1).scan().to_arrow().num_rows == 1


def test_replace_keeps_where_in_commit_timestamps_began(uri: str) -> None:
    """Versions before the enablement have no in-commit timestamp: a replacing table that
    keeps them on keeps the enablement version and time, or readers would look for one."""
    lq.DeltaTable.create(uri, SCHEMA)
    ict = {"delta.enableInCommitTimestamps": "true"}
    lq.DeltaTable(uri).alter.set_properties(ict)
    began = {
        k: v
        for k, v in lq.DeltaTable(uri).snapshot().metadata.configuration.items()
        if k.startswith("delta.inCommitTimestampEnablement")
    }
    assert began["delta.inCommitTimestampEnablementVersion"] == "1"
    lq.DeltaTable.create(uri, SCHEMA, mode="overwrite", configuration=ict)
    config = lq.DeltaTable(uri).snapshot().metadata.configuration
    assert {k: config.get(k) for k in began} == began
    lq.DeltaTable.create(uri, SCHEMA, mode="overwrite")  # turned off: nothing kept
    config = lq.DeltaTable(uri).snapshot().metadata.configuration
    assert not any(k.startswith("delta.inCommitTimestampEnablement") for k in config)


def test_replace_refuses_an_append_only_table(uri: str) -> None:
    lq.write(uri, pa.table({"id": [1]}), configuration={"delta.appendOnly": "true"})
    with pytest.raises(AppendOnlyError):
        lq.DeltaTable.create(uri, SCHEMA, mode="overwrite")
    assert lq.DeltaTable(uri).snapshot().version == 0


def test_overwrite_and_ignore_create_a_missing_table(uri: str) -> None:
    assert lq.DeltaTable.create(uri, SCHEMA, mode="ignore").snapshot().version == 0
    assert lq.DeltaTable.create(uri + "2", SCHEMA, mode="overwrite").snapshot().version == 0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"partition_by": ["nope"]}, SchemaError),
        ({"partition_by": ["id", "name", "day"]}, SchemaError),
        ({"mode": "append"}, ValueError),
        ({"schema": {"id": "long"}}, TypeError),
    ],
)
def test_bad_input_writes_nothing(uri: str, kwargs: dict[str, Any], error: type) -> None:
    args = {"schema": SCHEMA, **kwargs}
    with pytest.raises(error):
        lq.DeltaTable.create(uri, **args)
    assert not (Path(uri) / "_delta_log").exists()


def test_create_assigns_its_own_column_ids_and_they_only_grow(tmp_path: Path) -> None:
    # a schema taken from a column-mapped table kept its ids while maxColumnId said 0, so
    # later columns reused them (deltalake refused the table); CREATE OR REPLACE restarted
    # the ids at 1
    config = {"delta.columnMapping.mode": "name"}
    source = str(tmp_path / "source")
    lq.write(source, pa.table({"a": [1], "b": [2], "c": [3]}), configuration=config)
    schema = lq.DeltaTable(source).snapshot().scan(columns=["c"]).to_arrow().schema
    uri = str(tmp_path / "t")
    table = lq.DeltaTable.create(uri, schema, configuration=config)
    table.alter.add_columns([pa.field("x", pa.int64()), pa.field("y", pa.int64())])
    ids = [f.metadata["delta.columnMapping.id"] for f in table.snapshot().metadata.schema]
    assert ids == [1, 2, 3]
    lq.DeltaTable.create(
        uri, pa.schema([("z", pa.int64())]), configuration=config, mode="overwrite"
    )
    snap = lq.DeltaTable(uri).snapshot()
    assert [f.metadata["delta.columnMapping.id"] for f in snap.metadata.schema] == [4]
    assert snap.metadata.configuration["delta.columnMapping.maxColumnId"] == "4"
