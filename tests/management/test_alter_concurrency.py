"""Every ALTER under a concurrent writer: the ALTER plans on version 0, another writer
commits version 1, then the ALTER commits. Decided per op (lakequery.management.change):

* a concurrent append or delete never fails an ALTER: metadata-only ALTERs retry at the
  next version (or are planned again when the conflict rules count the append, as on an
  unpartitioned table), and ``add_constraint`` is planned again on the new version, so
  the appended rows are checked too;
* a concurrent metadata or protocol change raises ``MetadataChangedError`` /
  ``ProtocolChangedError`` and commits nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from altkit import alter_after_concurrent_write, plain_table

import lakequery as lq
from lakequery.management.alter import TableAlterer

OPS: dict[str, Callable[[TableAlterer], Any]] = {
    "add_columns": lambda a: a.add_columns(pa.field("n", pa.int64())),
    "rename_column": lambda a: a.rename_column("v", "w"),
    "drop_column": lambda a: a.drop_column("v"),
    "change_column_type": lambda a: a.change_column_type("id", "long"),
    "set_properties": lambda a: a.set_properties({"delta.enableChangeDataFeed": "true"}),
    "unset_properties": lambda a: a.unset_properties("owner"),
    "add_constraint": lambda a: a.add_constraint({"pos": "id > 0"}),
    "drop_constraint": lambda a: a.drop_constraint("c0"),
    "enable_feature": lambda a: a.enable_feature("deletionVectors"),
    "add_feature": lambda a: a.add_feature("domainMetadata"),
    "drop_feature": lambda a: a.drop_feature("appendOnly"),
}
OPERATIONS = {
    "add_columns": "ADD COLUMNS",
    "rename_column": "RENAME COLUMN",
    "drop_column": "DROP COLUMNS",
    "change_column_type": "CHANGE COLUMN",
    "set_properties": "SET TBLPROPERTIES",
    "unset_properties": "UNSET TBLPROPERTIES",
    "add_constraint": "ADD CONSTRAINT",
    "drop_constraint": "DROP CONSTRAINT",
    "enable_feature": "SET TBLPROPERTIES",
    "add_feature": "SET TBLPROPERTIES",
    "drop_feature": "DROP FEATURE",
}


def _rows(ids: list[int], p: str = "x") -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int32()), "v": [str(i) for i in ids], "p": [p] * len(ids)}
    )


def _table(tmp_path: Path, partitioned: bool) -> str:
    return plain_table(
        str(tmp_path / "t"),
        pa.concat_tables([_rows([1, 2], "x"), _rows([3], "y")]),
        partition_by=["p"] if partitioned else None,
        configuration={
            "owner": "me",
            "delta.constraints.c0": "id > -100",
            "delta.feature.appendOnly": "supported",
        },
    )


def _operation(uri: str, version: int) -> str:
    path = Path(uri) / "_delta_log" / f"{version:020d}.json"
    first = json.loads(path.read_text().splitlines()[0])
    return str(first["commitInfo"]["operation"])


@pytest.mark.parametrize("partitioned", [False, True], ids=["plain", "partitioned"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_alter_retries_past_concurrent_append(tmp_path: Path, op: str, partitioned: bool) -> None:
    uri = _table(tmp_path, partitioned)
    result = alter_after_concurrent_write(
        uri,
        lambda: lq.write(uri, _rows([4], "x"), mode="append"),
        OPS[op],
    )
    assert result.version == 2
    assert result.attempts >= 2
    assert _operation(uri, 1) == "WRITE"
    assert _operation(uri, 2) == OPERATIONS[op]
    snap = lq.DeltaTable(uri).snapshot()
    ids = sorted(snap.scan(columns=["id"]).to_arrow().column("id").to_pylist())
    assert ids == [1, 2, 3, 4]  # the concurrent append survives, read in the new shape
    if op == "rename_column":
        assert "w" in snap.schema.names and "v" not in snap.schema.names
        read = snap.scan(columns=["id", "w"]).to_arrow()
        w = dict(zip(read["id"].to_pylist(), read["w"].to_pylist(), strict=True))
        assert w[4] == "4"  # written as "v" concurrently, read through the mapping as "w"
    if op == "change_column_type":
        assert snap.schema.field("id").type == pa.int64()


@pytest.mark.parametrize("op", sorted(OPS))
def test_alter_retries_past_concurrent_delete(tmp_path: Path, op: str) -> None:
    uri = _table(tmp_path, partitioned=True)
    result = alter_after_concurrent_write(
        uri, lambda: lq.DeltaTable(uri).delete("p = 'y'"), OPS[op]
    )
    assert result.version == 2
    ids = sorted(lq.DeltaTable(uri).snapshot().scan(columns=["id"]).to_arrow()["id"].to_pylist())
    assert ids == [1, 2]


def test_add_constraint_checks_concurrently_appended_rows(tmp_path: Path) -> None:
    uri = _table(tmp_path, partitioned=False)
    with pytest.raises(lq.ConstraintViolationError, match="1 of 4"):
        alter_after_concurrent_write(
            uri,
            lambda: lq.write(uri, _rows([-5]), mode="append"),
            OPS["add_constraint"],
        )
    assert lq.DeltaTable(uri).snapshot().version == 1
    assert "delta.constraints.pos" not in lq.DeltaTable(uri).snapshot().metadata.configuration


def test_row_tracking_on_empty_table_vs_concurrent_append(tmp_path: Path) -> None:
    # the append lands first; the ALTER is planned again and backfills the new file
    uri = plain_table(str(tmp_path / "t"), pa.table({"id": pa.array([], pa.int64())}))
    result = alter_after_concurrent_write(
        uri,
        lambda: lq.write(uri, pa.table({"id": [1]}), mode="append"),
        lambda a: a.enable_feature("rowTracking"),
    )
    assert result.version == 2 and result.attempts >= 2
    rows = lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow().to_pylist()
    assert [(r["id"], r["_row_id"]) for r in rows] == [(1, 0)]


@pytest.mark.parametrize("op", sorted(OPS))
def test_alter_vs_concurrent_metadata_change_raises(tmp_path: Path, op: str) -> None:
    uri = _table(tmp_path, partitioned=False)
    with pytest.raises(lq.MetadataChangedError):
        alter_after_concurrent_write(
            uri,
            lambda: lq.DeltaTable(uri).alter.set_properties({"team": "other"}),
            OPS[op],
        )
    assert lq.DeltaTable(uri).snapshot().version == 1


def test_two_protocol_upgrades_conflict(tmp_path: Path) -> None:
    uri = _table(tmp_path, partitioned=False)
    with pytest.raises(lq.ProtocolChangedError):
        alter_after_concurrent_write(
            uri,
            lambda: lq.DeltaTable(uri).alter.enable_feature("deletionVectors"),
            OPS["set_properties"],
        )
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.version == 1
    assert snap.protocol.supports("deletionVectors")
    assert not snap.protocol.supports("changeDataFeed")  # the losing ALTER left nothing


def test_schema_evolving_write_vs_alter(tmp_path: Path) -> None:
    """The other direction: an append that merges a new column loses to an ALTER."""
    uri = _table(tmp_path, partitioned=False)
    wide = _rows([9]).append_column("extra", pa.array(["e"]))
    plan = lq.plan_write(uri, wide.schema, mode="append", schema_mode="merge")
    assert plan.state is not None
    adds = lq.writer.write_data_files(wide, plan.state)
    lq.DeltaTable(uri).alter.add_columns(pa.field("n", pa.int64()))
    with pytest.raises(lq.MetadataChangedError):
        lq.commit_write(plan, adds)


@pytest.mark.parametrize("op", ["add_columns", "rename_column", "add_constraint"])
def test_append_planned_before_an_alter_fails_cleanly(tmp_path: Path, op: str) -> None:
    """The other direction for a plain append: digest §17.4 step 2, so the append raises
    and leaves nothing visible; retrying it from the new version works. (An ALTER that
    only turns a feature on is adopted instead: tests/txn/test_conflicts_end_to_end.py.)"""
    uri = _table(tmp_path, partitioned=False)
    data = _rows([7])
    plan = lq.plan_write(uri, data.schema, mode="append")
    assert plan.state is not None
    adds = lq.writer.write_data_files(data, plan.state)
    OPS[op](lq.DeltaTable(uri).alter)
    with pytest.raises(lq.MetadataChangedError):
        lq.commit_write(plan, adds)
    assert lq.DeltaTable(uri).snapshot().version == 1
    # an ALTER that turns a feature on only: the append commits under it
    enabled = str(tmp_path / "enabled")
    lq.write(enabled, data)
    plan = lq.plan_write(enabled, data.schema, mode="append")
    assert plan.state is not None
    adds = lq.writer.write_data_files(data, plan.state)
    OPS["enable_feature"](lq.DeltaTable(enabled).alter)
    assert lq.commit_write(plan, adds).version == 2
    if op != "rename_column":
        lq.write(uri, data, mode="append")  # (7 passes the constraint id > 0)
        ids = lq.DeltaTable(uri).snapshot().scan(columns=["id"]).to_arrow()["id"].to_pylist()
        assert sorted(ids) == [1, 2, 3, 7]


@pytest.mark.parametrize("partitioned", [False, True], ids=["plain", "partitioned"])
def test_in_commit_timestamp_enablement_version_follows_the_retry(
    tmp_path: Path, partitioned: bool
) -> None:
    uri = _table(tmp_path, partitioned)
    result = alter_after_concurrent_write(
        uri,
        lambda: lq.write(uri, _rows([4]), mode="append"),
        lambda a: a.enable_feature("inCommitTimestamp"),
    )
    config = lq.DeltaTable(uri).snapshot().metadata.configuration
    assert result.version == 2
    assert config["delta.inCommitTimestampEnablementVersion"] == "2"
    path = Path(uri) / "_delta_log" / f"{2:020d}.json"
    info = json.loads(path.read_text().splitlines()[0])["commitInfo"]
    assert config["delta.inCommitTimestampEnablementTimestamp"] == str(info["inCommitTimestamp"])


@pytest.mark.parametrize(
    "op", ["set_properties", "add_columns", "add_constraint", "rename_column", "drop_column"]
)
def test_alter_retries_past_a_concurrent_append_of_identity_values(tmp_path: Path, op: str) -> None:
    """The append commits the identity column's new high-water mark in the metadata: the
    ALTER plans again on it (committing its own metadata would take the mark back)."""
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"v": ["a", "b"], "p": ["x", "y"]}),
        identity={"id": lq.Identity(start=1, step=1)},
        configuration={"owner": "me", "delta.constraints.c0": "id > -100"},
    )
    result = alter_after_concurrent_write(
        uri, lambda: lq.write(uri, pa.table({"v": ["c"], "p": ["x"]}), mode="append"), OPS[op]
    )
    assert result.version == 2 and result.attempts >= 2
    snap = lq.DeltaTable(uri).snapshot()
    assert sorted(snap.scan(columns=["id"]).to_arrow()["id"].to_pylist()) == [1, 2, 3]
    # the mark of the concurrent append was kept
    assert snap.metadata.schema["id"].metadata["delta.identity.highWaterMark"] == 3
