"""SET / UNSET TBLPROPERTIES and the table features they turn on: exactly the protocol
each needs, in the same commit; unknown, reserved and malformed keys refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from altkit import assert_engines, config_of, deltalake_rows, plain_table, protocol_of
from tablekit import read_actions

import lakequery as lq


def _commit(uri: str, version: int) -> list[dict[str, Any]]:
    return read_actions(Path(uri) / "_delta_log" / f"{version:020d}.json")


@pytest.mark.parametrize(
    ("properties", "protocol"),
    [
        ({"delta.enableChangeDataFeed": "true"}, (1, 4, (), ())),
        ({"delta.appendOnly": True}, (1, 2, (), ())),
        (
            {"delta.enableDeletionVectors": "true"},
            (3, 7, ("deletionVectors",), ("deletionVectors",)),
        ),
        ({"delta.enableInCommitTimestamps": "true"}, (1, 7, (), ("inCommitTimestamp",))),
        ({"delta.enableTypeWidening": "true"}, (3, 7, ("typeWidening",), ("typeWidening",))),
        ({"delta.checkpointPolicy": "v2"}, (3, 7, ("v2Checkpoint",), ("v2Checkpoint",))),
        ({"delta.columnMapping.mode": "name"}, (2, 5, (), ())),
        ({"delta.feature.domainMetadata": "supported"}, (1, 7, (), ("domainMetadata",))),
        ({"owner": "me", "delta.logRetentionDuration": "interval 60 days"}, (1, 1, (), ())),
        ({"delta.enableChangeDataFeed": "false"}, (1, 1, (), ())),
    ],
)
def test_set_properties_upgrades_only_as_needed(
    tmp_path: Path, properties: dict[str, object], protocol: tuple[object, ...]
) -> None:
    uri = plain_table(str(tmp_path / "t"))
    result = lq.DeltaTable(uri).alter.set_properties(properties)
    assert (result.version, result.operation) == (1, "SET TBLPROPERTIES")
    assert protocol_of(uri) == protocol
    config = config_of(uri)
    for key, value in properties.items():
        if key.startswith("delta.feature."):
            assert key not in config  # a pseudo-property: protocol only
        else:
            assert config[key] == (str(value).lower() if isinstance(value, bool) else value)
    actions = _commit(uri, 1)
    assert sum("metaData" in a for a in actions) == 1
    assert sum("protocol" in a for a in actions) == (protocol != (1, 1, (), ()))
    rows = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]
    assert_engines(uri, rows)
    if "delta.checkpointPolicy" not in properties and "delta.enableTypeWidening" not in properties:
        assert deltalake_rows(uri) == rows


def test_enabling_cdf_then_dml_writes_change_files(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.set_properties({"delta.enableChangeDataFeed": "true"})
    dt.delete("id = 2")
    changes = dt.changes(starting_version=2).to_arrow()
    assert changes.column("id").to_pylist() == [2]
    assert changes.column("_change_type").to_pylist() == ["delete"]


def test_enabling_deletion_vectors_then_delete_writes_a_dv(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.set_properties({"delta.enableDeletionVectors": "true"})
    dt.delete("id = 2")
    files = dt.snapshot().files()
    assert files.column("deletion_vector").null_count == 0
    rows = [{"id": 1, "v": "a"}, {"id": 3, "v": "c"}]
    assert_engines(uri, rows)
    assert deltalake_rows(uri) == rows


def test_enabling_in_commit_timestamps_records_enablement(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    lq.DeltaTable(uri).alter.set_properties({"delta.enableInCommitTimestamps": "true"})
    config = config_of(uri)
    assert config["delta.inCommitTimestampEnablementVersion"] == "1"
    info = _commit(uri, 1)[0]["commitInfo"]
    assert isinstance(info, dict)
    assert config["delta.inCommitTimestampEnablementTimestamp"] == str(info["inCommitTimestamp"])


def test_row_tracking_backfills_row_ids_in_the_enabling_commit(tmp_path: Path) -> None:
    import deltalake

    uri = plain_table(str(tmp_path / "t"))
    lq.write(uri, pa.table({"id": [10, 11], "v": ["x", "y"]}), mode="append")
    lq.DeltaTable(uri).delete("id = 10")  # a copy-on-write rewrite: no DVs on this table
    before = lq.DeltaTable(uri).snapshot()
    result = lq.DeltaTable(uri).alter.set_properties({"delta.enableRowTracking": "true"})
    assert set(result.features_added) >= {"domainMetadata", "rowTracking"}
    actions = _commit(uri, result.version)
    readds = [a["add"] for a in actions if "add" in a]
    assert len(readds) == before.num_files and not [a for a in actions if "remove" in a]
    assert all(a["dataChange"] is False for a in readds)
    snap = lq.DeltaTable(uri).snapshot()
    rows = snap.scan(row_tracking=True).to_arrow().to_pylist()
    ids = [r["_row_id"] for r in rows]
    assert len(ids) == len(set(ids)) == before.num_records()  # one distinct id per row
    assert {r["_row_commit_version"] for r in rows} == {result.version}
    assert sorted((r["id"], r["v"]) for r in rows) == sorted(
        (r["id"], r["v"]) for r in before.scan().to_arrow().to_pylist()
    )
    # the ids stay through an UPDATE, and deltalake reads the table
    keyed = {(r["id"], r["v"]): r["_row_id"] for r in rows}
    lq.DeltaTable(uri).update("id = 11", set={"v": "'z'"})
    after = lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow().to_pylist()
    assert {r["id"]: r["_row_id"] for r in after}[11] == keyed[(11, "y")]
    assert len(deltalake.DeltaTable(uri).to_pyarrow_table()) == len(after)
    supported = plain_table(
        str(tmp_path / "u"), configuration={"delta.feature.rowTracking": "supported"}
    )
    result = lq.DeltaTable(supported).alter.enable_feature("rowTracking")
    assert "rowTracking" not in result.features_added  # supported already
    assert {"rowTracking", "domainMetadata"} <= set(protocol_of(supported)[3])
    config = config_of(supported)
    assert config["delta.enableRowTracking"] == "true"
    assert config["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")


def test_row_tracking_on_empty_table(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), pa.table({"id": pa.array([], pa.int64())}))
    result = lq.DeltaTable(uri).alter.set_properties({"delta.enableRowTracking": "true"})
    assert result.features_added == ("domainMetadata", "rowTracking")
    assert protocol_of(uri) == (1, 7, (), ("domainMetadata", "rowTracking"))
    lq.write(uri, pa.table({"id": [1, 2]}), mode="append")
    assert lq.DeltaTable(uri).snapshot().files().column("base_row_id").to_pylist() == [0]


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"delta.enableChangeDataFed": "true"}, "unknown table property"),
        ({"delta.appendOnly": "yes"}, "takes 'true' or 'false'"),
        ({"delta.enableChangeDataCapture": "true"}, "legacy alias"),
        ({"delta.logRetentionDuration": "forever"}, "takes an interval"),
        ({"delta.deletedFileRetentionDuration": "interval -1 days"}, "must not be negative"),
        ({"delta.checkpointInterval": "0"}, "must be positive"),
        ({"delta.checkpointPolicy": "v3"}, "takes one of"),
        ({"delta.targetFileSize": "huge"}, "takes a size"),
        ({"delta.columnMapping.maxColumnId": "9"}, "maintained by writers"),
        ({"delta.constraints.c": "id > 0"}, "use add_constraint"),
        ({"delta.enableIcebergCompatV2": "true"}, "cannot write under"),
        ({"delta.columnMapping.mode": "id"}, "only 'none' -> 'name'"),
        ({"delta.feature.noSuchThing": "supported"}, "unknown table feature"),
    ],
)
def test_set_properties_refused(tmp_path: Path, properties: dict[str, str], message: str) -> None:
    uri = plain_table(str(tmp_path / "t"))
    with pytest.raises(lq.AlterTableError, match=message):
        lq.DeltaTable(uri).alter.set_properties(properties)
    assert lq.DeltaTable(uri).snapshot().version == 0


def test_target_file_size_takes_sizes_as_its_reader_does(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    lq.DeltaTable(uri).alter.set_properties({"delta.targetFileSize": "64mb"})
    assert lq.DeltaTable(uri).snapshot().properties.target_file_size == 64 << 20


def test_unknown_delta_key_stored_when_asked(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    lq.DeltaTable(uri).alter.set_properties(
        {"delta.someEngineHint": "1"}, raise_if_not_exists=False
    )
    assert config_of(uri)["delta.someEngineHint"] == "1"
    assert protocol_of(uri) == (1, 1, (), ())


def test_unset_properties(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"owner": "me", "team": "x"})
    dt = lq.DeltaTable(uri)
    result = dt.alter.unset_properties(["owner"])
    assert result.operation == "UNSET TBLPROPERTIES"
    assert "owner" not in config_of(uri) and config_of(uri)["team"] == "x"
    with pytest.raises(lq.AlterTableError, match="'owner' is not set"):
        dt.alter.unset_properties("owner")
    assert dt.alter.unset_properties("owner", raise_if_not_exists=False).version == 2


def test_unset_column_mapping_refused(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(lq.AlterTableError, match="cannot be turned off"):
        lq.DeltaTable(uri).alter.unset_properties("delta.columnMapping.mode")


def test_disabling_cdf_keeps_the_feature(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.enableChangeDataFeed": "true"})
    lq.DeltaTable(uri).alter.unset_properties("delta.enableChangeDataFeed")
    assert protocol_of(uri) == (1, 4, (), ())  # features are only removed by drop_feature


def test_table_name_and_description(tmp_path: Path) -> None:
    import deltalake

    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    assert dt.alter.set_table_name("people").operation == "UPDATE TABLE METADATA"
    dt.alter.set_table_description("who is who")
    dt.alter.set_table_properties({"owner": "me"})  # deltalake's spelling
    meta = dt.snapshot().metadata
    assert (meta.name, meta.description, meta.configuration["owner"]) == (
        "people",
        "who is who",
        "me",
    )
    theirs = deltalake.DeltaTable(uri).metadata()
    assert (theirs.name, theirs.description) == ("people", "who is who")
    assert protocol_of(uri) == (1, 1, (), ())
