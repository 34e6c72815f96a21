"""RESTORE: round trips to every version (DVs, partitions, schema changes), time-based
restore, no-op restores, and refusal once the needed files were vacuumed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from maint_tables import DV_CONFIG, assert_readers_agree, delete_rows, lakequery_rows, sample_batch

import lakequery as lq
from lakequery.errors import RestoreError


def _history_table(uri: str) -> None:
    lq.write(uri, sample_batch(0, 60), partition_by=["p"], configuration=DV_CONFIG)  # v0
    lq.write(uri, sample_batch(60, 30), mode="append")  # v1
    delete_rows(uri, lambda path, n: range(0, n, 4))  # v2: DVs
    delete_rows(uri, lambda path, n: range(1, n, 4))  # v3: bigger DVs on the same files
    lq.write(uri, sample_batch(500, 10, ("a",)), mode="overwrite", predicate="p = 'a'")  # v4
    lq.DeltaTable(uri).optimize(min_file_size=1)  # v5: DV purge


def test_round_trips_to_every_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _history_table(uri)
    latest = lq.DeltaTable(uri).snapshot().version
    states = {v: lakequery_rows(uri, version=v)["to_arrow"] for v in range(latest + 1)}
    for v in [0, 3, 1, 2, 4, latest]:
        m = lq.DeltaTable(uri).restore(version=v)
        assert m.restored_version == v
        assert_readers_agree(uri, states[v])
        info = json.loads(
            (Path(uri) / "_delta_log" / f"{m.version:020d}.json").read_text().splitlines()[0]
        )["commitInfo"]
        assert info["operation"] == "RESTORE"
        assert info["operationParameters"]["version"] == str(v)
        assert int(info["operationMetrics"]["numRestoredFiles"]) == m.files_added
    # restoring the state the table already has commits nothing
    before = lq.DeltaTable(uri).snapshot().version
    assert lq.DeltaTable(uri).restore(version=latest).version is None
    assert lq.DeltaTable(uri).snapshot().version == before


def test_restore_brings_back_the_schema(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"a": [1]}))
    lq.write(uri, pa.table({"a": [2], "b": ["x"]}), mode="append", schema_mode="merge")
    lq.DeltaTable(uri).restore(version=0)
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.schema.names == ["a"]
    assert_readers_agree(uri, [(1,)])


def test_restore_as_of_a_time(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"a": [1]}))
    time.sleep(0.05)
    middle = lq.DeltaTable(uri).history()[0].timestamp
    time.sleep(0.05)
    lq.write(uri, pa.table({"a": [2]}), mode="append")
    m = lq.DeltaTable(uri).restore(as_of=middle)
    assert m.restored_version == 0 and m.files_removed == 1 and m.files_added == 0
    assert_readers_agree(uri, [(1,)])
    with pytest.raises(ValueError):
        lq.DeltaTable(uri).restore()


def test_restore_refuses_vacuumed_versions(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"a": [1]}))
    lq.write(uri, pa.table({"a": [2]}), mode="overwrite")
    time.sleep(0.01)
    lq.DeltaTable(uri).vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    with pytest.raises(RestoreError) as err:
        lq.DeltaTable(uri).restore(version=0)
    assert err.value.version == 0 and err.value.missing
    assert lq.DeltaTable(uri).snapshot().version == 1  # nothing committed


@pytest.mark.parametrize(
    ("config", "undo", "feature"),
    [
        ({"delta.constraints.pos": "a > 0"}, "drop_constraint", "checkConstraints"),
        ({"delta.appendOnly": "true"}, "appendOnly", "appendOnly"),
        ({"delta.enableChangeDataFeed": "true"}, "enableChangeDataFeed", "changeDataFeed"),
    ],
)
def test_restore_brings_back_a_dropped_feature(
    tmp_path: Path, config: dict[str, str], undo: str, feature: str
) -> None:
    # the restored property is in force only where the protocol lists its feature
    # (Delta's RESTORE merges the two protocols)
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"a": [1, 2]}), configuration=config)
    dt = lq.DeltaTable(uri)
    if undo == "drop_constraint":
        dt.alter.drop_constraint("pos")
    else:
        dt.alter.set_properties({f"delta.{undo}": "false"})
    dt.alter.drop_feature(feature)
    assert not dt.snapshot().protocol.supports(feature)
    dt.restore(version=0)
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.protocol.supports(feature)
    assert dict(snap.metadata.configuration).items() >= config.items()
    if feature == "checkConstraints":
        with pytest.raises(lq.ConstraintViolationError):
            lq.write(uri, pa.table({"a": [-6]}), mode="append")
    if feature == "appendOnly":
        with pytest.raises(lq.AppendOnlyError):
            lq.DeltaTable(uri).delete("a = 1")
    assert_readers_agree(uri, [(1,), (2,)])


def test_restore_names_each_missing_file_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    # bitmaps too large to go inline: one DV file holds both files' vectors
    lq.write(uri, pa.table({"a": list(range(0, 4000))}), configuration=DV_CONFIG)
    lq.write(uri, pa.table({"a": list(range(4000, 8000))}), mode="append")
    lq.DeltaTable(uri).delete("a % 3 = 0")
    lq.write(uri, pa.table({"a": [9]}), mode="overwrite")
    time.sleep(0.01)
    lq.DeltaTable(uri).vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    with pytest.raises(RestoreError) as err:
        lq.DeltaTable(uri).restore(version=2)
    missing = err.value.missing
    assert len(missing) == len(set(missing)) == 3  # two data files and their DV file
