"""``DeltaTable.history``: newest first, operation, decoded parameters, metrics, limit."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest
from tablekit import TableKit, commit_info, conformance_table, remove_action, txn_action

import lakequery as lq

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])
T0 = 1_700_000_000_000
DV_TABLE = str(conformance_table("dat_deletion_vectors"))


def at(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)


def build(root: Path) -> TableKit:
    kit = TableKit(root)
    kit.create(
        SCHEMA,
        partition_by=["day"],
        info=commit_info(
            "CREATE TABLE",
            parameters={
                "isManaged": "false",
                "partitionBy": '["day"]',
                "properties": '{"delta.appendOnly":"false"}',
            },
        ),
        mtime_ms=T0,
    )
    a = kit.write_parquet(
        pa.table({"id": pa.array([1, 2], pa.int64())}), partition_values={"day": "x"}
    )
    kit.commit(
        [a],
        info=commit_info(
            "WRITE",
            parameters={"mode": "Append", "partitionBy": "[]"},
            metrics={
                "numFiles": "1",
                "numOutputRows": "2",
                "numOutputBytes": str(a["add"]["size"]),
            },
            isBlindAppend=True,
            readVersion=0,
        ),
        mtime_ms=T0 + 1000,
    )
    kit.commit(
        [remove_action(a)],
        info=commit_info(
            "DELETE",
            parameters={"predicate": "[\"(day = 'x')\"]"},
            metrics={"numRemovedFiles": "1", "numDeletedRows": "2"},
            readVersion=1,
        ),
        mtime_ms=T0 + 2000,
    )
    kit.commit([txn_action("app", 1)], mtime_ms=T0 + 3000)  # a commit without commitInfo
    kit.commit(
        [],
        info=commit_info(
            "SET TBLPROPERTIES",
            parameters={"properties": '{"delta.logRetentionDuration":"interval 60 days"}'},
            userMetadata="tagged",
        ),
        mtime_ms=T0 + 4000,
    )
    return kit


def test_history_newest_first_with_operations(tmp_path: Path) -> None:
    kit = build(tmp_path / "t")
    history = lq.DeltaTable(kit.uri).history()
    assert [e.version for e in history] == [4, 3, 2, 1, 0]
    assert [e.operation for e in history] == [
        "SET TBLPROPERTIES",
        None,
        "DELETE",
        "WRITE",
        "CREATE TABLE",
    ]
    assert [e.timestamp for e in history] == [at(T0 + 1000 * v) for v in (4, 3, 2, 1, 0)]
    assert all(isinstance(e, lq.CommitEntry) for e in history)


def test_history_parameters_are_decoded(tmp_path: Path) -> None:
    kit = build(tmp_path / "t")
    by_version = {e.version: e for e in lq.DeltaTable(kit.uri).history()}
    assert by_version[0].parameters == {
        "isManaged": False,
        "partitionBy": ["day"],
        "properties": {"delta.appendOnly": "false"},
    }
    assert by_version[1].parameters == {"mode": "Append", "partitionBy": []}
    assert by_version[2].parameters == {"predicate": ["(day = 'x')"]}
    assert by_version[4].parameters == {
        "properties": {"delta.logRetentionDuration": "interval 60 days"}
    }
    assert by_version[3].parameters == {}


def test_history_metrics_and_raw_info(tmp_path: Path) -> None:
    kit = build(tmp_path / "t")
    by_version = {e.version: e for e in lq.DeltaTable(kit.uri).history()}
    size = json.loads(kit.commit_path(1).read_text().splitlines()[1])["add"]["size"]
    assert {k: int(v) for k, v in by_version[1].metrics.items()} == {
        "numFiles": 1,
        "numOutputRows": 2,
        "numOutputBytes": size,
    }
    assert {k: int(v) for k, v in by_version[2].metrics.items()} == {
        "numRemovedFiles": 1,
        "numDeletedRows": 2,
    }
    assert by_version[0].metrics == {}
    assert by_version[3].metrics == {}
    assert by_version[1].info["isBlindAppend"] is True
    assert by_version[1].info["readVersion"] == 0
    assert by_version[4].info["userMetadata"] == "tagged"
    assert by_version[3].info == {}


@pytest.mark.parametrize(
    ("limit", "versions"), [(1, [4]), (2, [4, 3]), (0, []), (50, [4, 3, 2, 1, 0])]
)
def test_history_limit(tmp_path: Path, limit: int, versions: list[int]) -> None:
    kit = build(tmp_path / "t")
    history = lq.DeltaTable(kit.uri).history(limit=limit)
    assert [e.version for e in history] == versions
    if history:
        assert history[0].operation == "SET TBLPROPERTIES"


def test_a_negative_history_limit_is_refused(tmp_path: Path) -> None:
    kit = build(tmp_path / "t")
    with pytest.raises(ValueError, match="limit"):
        lq.DeltaTable(kit.uri).history(limit=-1)  # it returned no commit at all


def test_history_after_log_cleanup_lists_remaining_commits(tmp_path: Path) -> None:
    kit = build(tmp_path / "t")
    kit.checkpoint(3)
    for v in range(3):
        kit.commit_path(v).unlink()
    history = lq.DeltaTable(kit.uri).history()
    assert [e.version for e in history] == [4, 3]
    assert history[0].operation == "SET TBLPROPERTIES"


def test_history_of_a_spark_table() -> None:
    history = lq.DeltaTable(DV_TABLE).history()
    assert [e.version for e in history] == [2, 1, 0]
    assert [e.operation for e in history] == ["DELETE", "WRITE", "CREATE TABLE"]
    create = history[2]
    assert create.parameters["isManaged"] is False
    assert create.parameters["partitionBy"] == []
    assert create.parameters["properties"] == {"delta.enableDeletionVectors": "true"}
    assert create.parameters["description"] is None
    delete = history[0]
    assert delete.parameters == {"predicate": ["(letter#39791 = a)"]}
    assert int(delete.metrics["numDeletedRows"]) == 4
    assert int(delete.metrics["numDeletionVectorsAdded"]) == 1
    assert delete.info["engineInfo"] == "Apache-Spark/3.5.1 Delta-Lake/3.1.0"
    assert history[1].metrics == {"numFiles": "1", "numOutputRows": "5", "numOutputBytes": "1006"}
    assert [e.version for e in lq.DeltaTable(DV_TABLE).history(limit=1)] == [2]


def test_history_of_missing_table(tmp_path: Path) -> None:
    with pytest.raises(lq.TableNotFoundError):
        lq.DeltaTable(str(tmp_path / "nothing")).history()
