"""Row ids and row commit versions across UPDATE, MERGE, DELETE (DV and copy-on-write),
OPTIMIZE and RESTORE on tables lakequery creates with ``delta.enableRowTracking``; the
tables stay readable by ``deltalake`` after every command."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rtkit import (
    COW,
    DVS,
    check_invariants,
    config_names,
    deltalake_rows,
    high_water_mark,
    latest_version,
    rows,
    tracked,
    values,
)

import lakequery as lq

CONFIGS = {"dv": DVS, "cow": COW}


def _table(tmp_path: Path, config: dict[str, str]) -> str:
    uri = str(tmp_path / "t")
    lq.write(uri, rows([1, 2, 3]), configuration=config)  # version 0: ids 0..2
    lq.write(uri, rows([4, 5]), mode="append")  # version 1: ids 3..4
    return uri


@pytest.mark.parametrize("mode", CONFIGS)
def test_update_keeps_ids_and_sets_commit_version(tmp_path: Path, mode: str) -> None:
    uri = _table(tmp_path, CONFIGS[mode])
    assert tracked(uri) == {1: (0, 0), 2: (1, 0), 3: (2, 0), 4: (3, 1), 5: (4, 1)}
    m = lq.DeltaTable(uri).update("key IN (2, 4)", set={"v": "v + 7"})
    assert m.version == 2
    assert tracked(uri) == {1: (0, 0), 2: (1, 2), 3: (2, 0), 4: (3, 2), 5: (4, 1)}
    assert values(uri) == {1: 0, 2: 7, 3: 0, 4: 7, 5: 0}
    assert deltalake_rows(uri) == values(uri)
    check_invariants(uri)
    # updating an updated row again keeps its id once more
    lq.DeltaTable(uri).update("key = 2", set={"v": "v + 1"})
    assert tracked(uri)[2] == (1, 3)
    check_invariants(uri)


@pytest.mark.parametrize("mode", CONFIGS)
def test_predicate_overwrite_keeps_the_ids_of_the_rows_it_keeps(tmp_path: Path, mode: str) -> None:
    """An overwrite with a data-column predicate copies the other rows of the files it
    touches: they keep their ids and versions, as a copy-on-write DELETE's do (they were
    given fresh ones)."""
    uri = _table(tmp_path, CONFIGS[mode])
    lq.write(uri, rows([2], value=5), mode="overwrite", predicate="key IN (2, 4)")
    assert tracked(uri) == {1: (0, 0), 2: (5, 2), 3: (2, 0), 5: (4, 1)}
    assert deltalake_rows(uri) == values(uri)
    check_invariants(uri)


@pytest.mark.parametrize("mode", CONFIGS)
def test_delete_keeps_surviving_ids_and_versions(tmp_path: Path, mode: str) -> None:
    uri = _table(tmp_path, CONFIGS[mode])
    lq.DeltaTable(uri).delete("key = 2")
    assert tracked(uri) == {1: (0, 0), 3: (2, 0), 4: (3, 1), 5: (4, 1)}
    assert deltalake_rows(uri) == values(uri)
    check_invariants(uri)


def test_copy_on_write_flag_on_a_dv_table(tmp_path: Path) -> None:
    uri = _table(tmp_path, DVS)
    lq.DeltaTable(uri).delete("key = 5", copy_on_write=True)
    lq.DeltaTable(uri).update("key = 1", set={"v": "1"}, copy_on_write=True)
    assert tracked(uri) == {1: (0, 3), 2: (1, 0), 3: (2, 0), 4: (3, 1)}
    assert deltalake_rows(uri) == values(uri)
    check_invariants(uri)


def test_rewritten_files_carry_the_materialized_columns(tmp_path: Path) -> None:
    uri = _table(tmp_path, COW)
    id_col, version_col = config_names(uri)
    lq.DeltaTable(uri).update("key = 2", set={"v": "9"})
    snap = lq.DeltaTable(uri).snapshot()
    added = [a for a in snap.files().to_pylist() if a["default_row_commit_version"] == 2]
    assert added, "the update added files"
    stored = pa.concat_tables(
        pq.read_table(Path(uri) / a["path"]).select(["key", id_col, version_col]) for a in added
    ).to_pydict()
    by_key = dict(
        zip(stored["key"], zip(stored[id_col], stored[version_col], strict=True), strict=True)
    )
    # copy-on-write survivors keep id and version; the updated row keeps its id only
    assert by_key == {1: (0, 0), 2: (1, None), 3: (2, 0)}
    # the engines never show the materialized columns as table columns
    scan = snap.scan()
    assert scan.to_arrow().column_names == ["key", "v"]
    assert scan.to_duckdb().columns == ["key", "v"]
    assert scan.to_polars().collect().columns == ["key", "v"]


@pytest.mark.parametrize("mode", CONFIGS)
def test_merge_update_insert_delete(tmp_path: Path, mode: str) -> None:
    uri = _table(tmp_path, CONFIGS[mode])
    mark = high_water_mark(uri)
    source = pa.table(
        {"key": pa.array([1, 3, 9], pa.int64()), "v": pa.array([10, -1, 90], pa.int64())}
    )
    m = (
        lq.DeltaTable(uri)
        .merge(source, on="t.key = s.key", source_alias="s", target_alias="t")
        .when_matched_delete("s.v < 0")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_deleted_rows, m.num_inserted_rows) == (1, 1, 1)
    after = tracked(uri)
    assert {k: after[k] for k in (1, 2, 4, 5)} == {1: (0, 2), 2: (1, 0), 4: (3, 1), 5: (4, 1)}
    assert 3 not in after
    new_id, new_version = after[9]
    assert new_version == 2 and new_id > mark  # a fresh id above the old high-water mark
    assert deltalake_rows(uri) == values(uri) == {1: 10, 2: 0, 4: 0, 5: 0, 9: 90}
    check_invariants(uri)


@pytest.mark.parametrize("z_order", [False, True])
def test_optimize_keeps_ids_and_versions(tmp_path: Path, z_order: bool) -> None:
    uri = _table(tmp_path, DVS)
    dt = lq.DeltaTable(uri)
    dt.update("key = 3", set={"v": "3"})  # version 2: a DV and a new file
    lq.write(uri, rows([6, 7]), mode="append")  # version 3
    before = tracked(uri)
    m = dt.optimize(z_order_by=["v"] if z_order else None)
    assert m.version == 4 and m.files_added >= 1
    assert tracked(uri) == before
    assert deltalake_rows(uri) == values(uri)
    check_invariants(uri)
    # a second optimize (the compacted file moves again only with z-order) still agrees
    dt.optimize(z_order_by=["key"] if z_order else None)
    assert tracked(uri) == before


def test_restore_brings_back_ids_and_versions(tmp_path: Path) -> None:
    uri = _table(tmp_path, COW)
    dt = lq.DeltaTable(uri)
    dt.update("key = 1", set={"v": "5"})  # version 2
    at_2 = tracked(uri)
    dt.delete("key = 4")  # version 3
    dt.optimize()  # version 4
    lq.write(uri, rows([8]), mode="append")  # version 5
    mark = high_water_mark(uri)
    dt.restore(version=2)
    assert tracked(uri) == at_2
    assert high_water_mark(uri) == mark  # RESTORE never lowers the mark
    assert deltalake_rows(uri) == values(uri)
    # rows appended after the restore get ids above every id ever handed out
    lq.write(uri, rows([9]), mode="append")
    assert tracked(uri)[9][0] > mark
    check_invariants(uri)


def test_supported_but_not_enabled_gets_fresh_ids(tmp_path: Path) -> None:
    # rowTracking in the protocol without delta.enableRowTracking: ids are not promised to
    # be stable, so rewrites need no materialized columns (and write none)
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        rows([1, 2]),
        configuration={
            "delta.feature.rowTracking": "supported",
            "delta.enableDeletionVectors": "false",
        },
    )
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.protocol.supports("rowTracking")
    lq.DeltaTable(uri).update("key = 1", set={"v": "1"})
    ids = tracked(uri)
    assert len({i for i, _ in ids.values()}) == 2
    for path in lq.DeltaTable(uri).snapshot().files().column("path").to_pylist():
        assert pq.read_schema(Path(uri) / path).names == ["key", "v"]
    check_invariants(uri)


def test_high_water_mark_counts_rewritten_files(tmp_path: Path) -> None:
    uri = _table(tmp_path, COW)
    assert high_water_mark(uri) == 4
    lq.DeltaTable(uri).update("key = 5", set={"v": "1"})  # rewrites the 2-row file
    assert high_water_mark(uri) == 6
    assert latest_version(uri) == 2
    check_invariants(uri)


def test_commits_say_row_ids_are_preserved(tmp_path: Path) -> None:
    import json

    uri = _table(tmp_path, COW)
    lq.DeltaTable(uri).update("key = 1", set={"v": "1"})
    lq.DeltaTable(uri).optimize()
    plain = str(tmp_path / "plain")
    lq.write(plain, rows([1]))
    for root, versions, tags in (
        (uri, range(4), {"delta.rowTracking.preserved": "true"}),
        (plain, range(1), None),
    ):
        for v in versions:
            first = (Path(root) / "_delta_log" / f"{v:020d}.json").read_text().splitlines()[0]
            assert json.loads(first)["commitInfo"].get("tags") == tags, (root, v)


def test_optimize_spilling_sort_keeps_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lakequery.commands.optimize as opt

    monkeypatch.setattr(opt, "SORT_MEMORY_BYTES", 1)  # nothing fits: DuckDB sorts, spilling
    uri = _table(tmp_path, DVS)
    lq.DeltaTable(uri).update("key = 4", set={"v": "-4"})
    before = tracked(uri)
    assert lq.DeltaTable(uri).optimize(z_order_by=["v"]).committed
    assert tracked(uri) == before
    assert deltalake_rows(uri) == values(uri)
