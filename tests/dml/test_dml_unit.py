"""Exact behaviour of DELETE / UPDATE / MERGE: metrics, the commit's actions and
commitInfo, no-op statements, NULL semantics, DV vs copy-on-write, rewrite_threshold,
schema evolution, constraints, table features that refuse DML, S3, column mapping and
file pruning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from dmlkit import (
    Oracle,
    assert_same_rows,
    check_all_engines,
    commit_actions,
    deltalake_table,
)

import lakequery as lq

NO_DV = {"delta.enableDeletionVectors": "false"}


def _three_files(uri: str, configuration: dict[str, str] | None = None, **kw: Any) -> pa.Table:
    """ids 0..29 in three files of ten rows; a = id % 5 (NULL when id % 7 == 0)."""
    parts = []
    for i in range(3):
        ids = list(range(i * 10, i * 10 + 10))
        t = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "a": pa.array([None if x % 7 == 0 else x % 5 for x in ids], pa.int64()),
                "s": pa.array([f"s{x}" for x in ids], pa.string()),
            }
        )
        lq.write(
            uri,
            t,
            mode="error" if i == 0 else "append",
            configuration=configuration if i == 0 else None,
            **(kw if i == 0 else {}),
        )
        parts.append(t)
    return pa.concat_tables(parts)


def _log_versions(uri: str) -> list[int]:
    return sorted(int(p.name[:20]) for p in (Path(uri) / "_delta_log").glob("*.json"))


def _ids(uri: str, version: int | None = None) -> list[int]:
    return sorted(
        lq.DeltaTable(uri).snapshot(version=version).scan().to_arrow().column("id").to_pylist()
    )


def _data_adds(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a["add"] for a in actions if "add" in a]


# --------------------------------------------------------------------------------------------
# metrics and commitInfo
# --------------------------------------------------------------------------------------------


def test_delete_metrics_deletion_vectors(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    dt = lq.DeltaTable(uri)
    m = dt.delete("id < 5 OR id = 25")
    assert m.committed and m.version == 3
    assert (m.num_deleted_rows, m.num_updated_rows, m.num_inserted_rows) == (6, 0, 0)
    assert m.num_deletion_vectors_added == 2
    assert m.num_deletion_vectors_removed == 0
    assert m.num_added_files == 0 and m.num_removed_files == 0 and m.num_copied_rows == 0
    assert m.num_files_scanned + m.num_files_skipped == 3
    actions = commit_actions(uri, 3)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "DELETE"
    assert int(info["operationMetrics"]["numDeletedRows"]) == 6
    assert int(info["operationMetrics"]["numDeletionVectorsAdded"]) == 2
    # every add re-adds an existing file with a DV: no new data files
    adds = _data_adds(actions)
    assert len(adds) == 2 and all("deletionVector" in a for a in adds)
    removes = [a["remove"] for a in actions if "remove" in a]
    assert {r["path"] for r in removes} == {a["path"] for a in adds}
    hist = dt.history(limit=1)[0]
    assert hist.version == 3
    assert _ids(uri) == [i for i in range(30) if not (i < 5 or i == 25)]
    # deleting more rows of a file that has a DV replaces the DV
    m2 = dt.delete("id = 6")
    assert m2.num_deletion_vectors_added == 1 and m2.num_deletion_vectors_removed == 1
    assert m2.num_deleted_rows == 1


def test_history_has_operation_metrics(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    dt = lq.DeltaTable(uri)
    dt.delete("id = 1")
    dt.update("id = 2", set={"s": "'x'"})
    (
        dt.merge(pa.table({"id": [3, 100]}), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .execute()
    )
    entries = {e.version: e for e in dt.history()}
    infos = {
        v: next(a["commitInfo"] for a in commit_actions(uri, v) if "commitInfo" in a)
        for v in (3, 4, 5)
    }
    assert [infos[v]["operation"] for v in (3, 4, 5)] == ["DELETE", "UPDATE", "MERGE"]
    assert int(infos[3]["operationMetrics"]["numDeletedRows"]) == 1
    assert int(infos[4]["operationMetrics"]["numUpdatedRows"]) == 1
    om = infos[5]["operationMetrics"]
    assert int(om["numTargetRowsDeleted"]) == 1 and int(om["numTargetRowsInserted"]) == 1
    assert int(om["numSourceRows"]) == 2
    assert "predicate" in infos[5]["operationParameters"]
    assert set(entries) >= {3, 4, 5}


def test_delete_removes_fully_deleted_file_in_dv_mode(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    m = lq.DeltaTable(uri).delete("id >= 10 AND id < 20")
    assert m.num_deleted_rows == 10
    assert m.num_removed_files == 1
    assert m.num_deletion_vectors_added == 0
    actions = commit_actions(uri, m.version)
    assert not _data_adds(actions)
    assert len([a for a in actions if "remove" in a]) == 1
    assert _ids(uri) == list(range(10)) + list(range(20, 30))


def test_update_metrics_dv_and_cow(tmp_path: Path) -> None:
    dv_uri, cow_uri = str(tmp_path / "dv"), str(tmp_path / "cow")
    _three_files(dv_uri)
    _three_files(cow_uri, configuration=NO_DV)
    m = lq.DeltaTable(dv_uri).update("id % 10 = 3", set={"s": "'u'"})
    assert (m.num_updated_rows, m.num_deleted_rows, m.num_copied_rows) == (3, 0, 0)
    assert m.num_deletion_vectors_added == 3 and m.num_added_files == 1
    c = lq.DeltaTable(cow_uri).update("id % 10 = 3", set={"s": "'u'"})
    assert (c.num_updated_rows, c.num_copied_rows) == (3, 27)
    assert c.num_removed_files == 3 and c.num_deletion_vectors_added == 0
    for uri in (dv_uri, cow_uri):
        rows = lq.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist()
        assert sorted(r["id"] for r in rows if r["s"] == "u") == [3, 13, 23]
        assert len(rows) == 30
    cow_adds = _data_adds(commit_actions(cow_uri, c.version))
    assert cow_adds and not any("deletionVector" in a for a in cow_adds)
    info = next(a["commitInfo"] for a in commit_actions(cow_uri, c.version) if "commitInfo" in a)
    assert int(info["operationMetrics"]["numCopiedRows"]) == 27


def test_merge_metrics(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    src = pa.table(
        {"id": pa.array([1, 2, 15, 100, 101], pa.int64()), "s": ["x", None, "y", "n", "m"]}
    )
    m = (
        lq.DeltaTable(uri)
        .merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete(predicate="s.s IS NULL")
        .when_matched_update(set={"s": "s.s"})
        .when_not_matched_insert_all(predicate="s.id <> 101")
        .execute()
    )
    assert isinstance(m, lq.commands.merge.MergeMetrics)
    assert (m.num_source_rows, m.num_updated_rows, m.num_deleted_rows, m.num_inserted_rows) == (
        5,
        2,
        1,
        1,
    )
    rows = {r["id"]: r for r in lq.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist()}
    assert 2 not in rows and 101 not in rows
    assert rows[1]["s"] == "x" and rows[15]["s"] == "y"
    assert rows[100] == {"id": 100, "a": None, "s": "n"}
    assert len(rows) == 30


# --------------------------------------------------------------------------------------------
# no-ops and failures commit nothing
# --------------------------------------------------------------------------------------------


def test_nothing_matches_commits_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    dt = lq.DeltaTable(uri)
    before = _log_versions(uri)
    for m in (
        dt.delete("id > 1000"),
        dt.delete("a IS NULL AND a IS NOT NULL"),
        dt.update("s = 'nope'", set={"a": "1"}),
        dt.merge(pa.table({"id": [500]}), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete()
        .execute(),
        dt.merge(
            pa.table({"id": pa.array([], pa.int64())}),
            on="t.id = s.id",
            source_alias="s",
            target_alias="t",
        )
        .when_not_matched_insert_all()
        .execute(),
    ):
        assert m.committed is False
        assert m.version == 2
        assert m.num_deleted_rows == m.num_updated_rows == m.num_inserted_rows == 0
    assert _log_versions(uri) == before


def test_merge_unconditional_delete_allows_duplicate_matches(tmp_path: Path) -> None:
    """Delta's exception to the one-match rule: when the only matched clause is an
    unconditional delete, a target row matched by several source rows is deleted once
    (deltalake and Spark agree); metrics and the change feed count it once."""
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": [10, 20, 30]}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    src = pa.table({"id": pa.array([1, 1, 1, 2, 9], pa.int64()), "v": [0, 1, 2, 3, 4]})
    m = (
        lq.DeltaTable(uri)
        .merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_deleted_rows, m.num_inserted_rows) == (2, 1)
    assert _ids(uri) == [3, 9]
    feed = lq.DeltaTable(uri).changes(starting_version=1).to_arrow()
    kinds = sorted(zip(feed["_change_type"].to_pylist(), feed["id"].to_pylist(), strict=True))
    assert kinds == [("delete", 1), ("delete", 2), ("insert", 9)]


@pytest.mark.parametrize(
    "clause",
    [
        lambda b: b.when_not_matched_insert(values={"id": "s.id", "s": "t.s"}),
        lambda b: b.when_not_matched_insert_all(predicate="t.a IS NULL"),
        lambda b: b.when_not_matched_by_source_update(set={"s": "s.s"}),
        lambda b: b.when_not_matched_by_source_delete(predicate="s.id > 0"),
    ],
    ids=["insert-value", "insert-predicate", "by-source-set", "by-source-predicate"],
)
def test_merge_clauses_refer_to_the_side_they_have(tmp_path: Path, clause: Any) -> None:
    """As in Spark, WHEN NOT MATCHED has no target row and WHEN NOT MATCHED BY SOURCE no
    source row: a reference to it is refused, not read as NULL (an update of every
    unmatched target row to NULL, or inserted NULLs)."""
    uri = str(tmp_path / "t")
    _three_files(uri)
    src = pa.table({"id": pa.array([1, 300], pa.int64()), "s": ["one", "new"]})
    b = lq.DeltaTable(uri).merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
    with pytest.raises(lq.PredicateError, match=r"can refer to the (source|target) only"):
        clause(b).execute()
    assert _log_versions(uri) == [0, 1, 2]


def test_merge_source_nanoseconds_are_exact_or_refused(tmp_path: Path) -> None:
    """A nanosecond source (pandas' default unit) is stored exactly when microseconds
    hold it, else refused as lq.write refuses it: DuckDB rounded 1,999 ns to 2 us and
    dropped 1 ns, and the merge committed."""
    import pandas as pd

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1], "ts": pa.array([0], pa.timestamp("us", "UTC"))}))
    dt = lq.DeltaTable(uri)
    bad = pa.table({"id": [1, 2], "ts": pa.array([1, 1_999], pa.timestamp("ns", "UTC"))})
    merge = dt.merge(bad, on="t.id = s.id", source_alias="s", target_alias="t")
    with pytest.raises(lq.SchemaMismatchError, match="would lose data"):
        merge.when_matched_update_all().when_not_matched_insert_all().execute()
    assert _log_versions(uri) == [0]
    good = pd.DataFrame(
        {"id": [1, 2], "ts": pd.to_datetime([2_000, 5_000_000], unit="ns", utc=True)}
    )
    (
        dt.merge(good, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    got = lq.DeltaTable(uri).snapshot().scan().to_arrow().sort_by("id")
    assert got.column("ts").cast(pa.int64()).to_pylist() == [2, 5_000]


def test_merge_source_columns_differing_only_in_case_are_refused(tmp_path: Path) -> None:
    """As lq.write refuses them: an update_all took ``V`` for the table's ``v`` though
    the source also had ``v``."""
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1], "v": ["old"]}))
    src = pa.table([pa.array([1]), pa.array(["V"]), pa.array(["v"])], names=["id", "V", "v"])
    merge = lq.DeltaTable(uri).merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
    with pytest.raises(lq.SchemaError, match="differ only in case"):
        merge.when_matched_update_all().execute()
    assert _log_versions(uri) == [0]


def test_merge_conflict_commits_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    dt = lq.DeltaTable(uri)
    src = pa.table({"id": pa.array([4, 4, 50], pa.int64()), "s": ["a", "b", "c"]})
    with pytest.raises(lq.MergeConflictError):
        (
            dt.merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update(set={"s": "s.s"})
            .when_not_matched_insert_all()
            .execute()
        )
    with pytest.raises(lq.MergeConflictError):  # a conditional delete: which row decides?
        dt.merge(src, on="t.id = s.id", source_alias="s", target_alias="t").when_matched_delete(
            predicate="s.s <> 'zz'"
        ).execute()
    assert _log_versions(uri) == [0, 1, 2]
    assert _ids(uri) == list(range(30))
    # duplicates that reach no clause are fine
    m = (
        dt.merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_not_matched_insert_all()
        .execute()
    )
    assert m.num_inserted_rows == 1


def test_bad_expressions_commit_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    dt = lq.DeltaTable(uri)
    with pytest.raises(lq.errors.PredicateError):
        dt.update("id = 1", set={"nope": "1"})
    with pytest.raises(lq.errors.PredicateError):
        dt.update("id = 1", set={"a": "no_such_column + 1"})
    with pytest.raises((lq.errors.PredicateError, lq.errors.SchemaMismatchError)):
        dt.update("id = 1", set={"a": "'not a number'"})
    with pytest.raises(lq.errors.LakeQueryError):
        dt.delete("no_such_column = 1")
    assert _log_versions(uri) == [0, 1, 2]


# --------------------------------------------------------------------------------------------
# NULL semantics
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [{}, NO_DV], ids=["dv", "cow"])
@pytest.mark.parametrize(
    "predicate",
    [
        "a > 2",
        "NOT (a > 2)",
        "a <> 3",
        "a IN (1, 2)",
        "NOT (a IN (1, 2))",
        "a IS NULL",
        "a = NULL",
        "(a > 2) IS NOT TRUE",
        "coalesce(a, 0) = 0",
        "a > 2 OR s = 's7'",
        "NOT (a > 2 AND s <> 's14')",
    ],
)
def test_null_semantics_match_duckdb(
    tmp_path: Path, config: dict[str, str], predicate: str
) -> None:
    uri = str(tmp_path / "t")
    initial = _three_files(uri, configuration=config)
    for op in ("delete", "update"):
        o = Oracle(initial, 2)
        path = f"{uri}_{op}"
        import shutil

        shutil.copytree(uri, path)
        dt = lq.DeltaTable(path)
        if op == "delete":
            dt.delete(predicate)
            o.delete(predicate)
        else:
            dt.update(predicate, set={"s": "'upd'"})
            o.update(predicate, {"s": "'upd'"})
        check_all_engines(path, o.table(), what=f"{op} {predicate}")


# --------------------------------------------------------------------------------------------
# partitions, DV vs copy-on-write, rewrite_threshold
# --------------------------------------------------------------------------------------------


def _partitioned(uri: str, configuration: dict[str, str] | None = None) -> pa.Table:
    t = pa.table(
        {
            "id": pa.array(range(40), pa.int64()),
            "p": pa.array([["x", "y", "z", None][i % 4] for i in range(40)], pa.string()),
            "v": pa.array([i * 1.5 for i in range(40)], pa.float64()),
        }
    )
    lq.write(uri, t.slice(0, 20), partition_by=["p"], configuration=configuration)
    lq.write(uri, t.slice(20), mode="append")
    return t


@pytest.mark.parametrize(
    "predicate",
    ["p = 'x'", "p IS NULL", "p IN ('x', 'y')", "NOT (p = 'x')", "p <> 'z' OR p IS NULL"],
)
def test_partition_only_delete_removes_whole_files(tmp_path: Path, predicate: str) -> None:
    uri = str(tmp_path / "t")
    t = _partitioned(uri)
    o = Oracle(t, 1)
    before = {a["path"] for a in (lq.DeltaTable(uri).snapshot().files().to_pylist())}
    m = lq.DeltaTable(uri).delete(predicate)
    o.delete(predicate)
    assert m.num_deletion_vectors_added == 0 and m.num_added_files == 0
    actions = commit_actions(uri, m.version)
    assert not _data_adds(actions)
    assert m.num_removed_files == len([a for a in actions if "remove" in a]) > 0
    assert m.num_deleted_rows == 40 - o.table().num_rows
    after = {a["path"] for a in lq.DeltaTable(uri).snapshot().files().to_pylist()}
    assert after < before
    check_all_engines(uri, o.table(), what=predicate)
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")


def test_update_moves_rows_between_partitions(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = _partitioned(uri)
    o = Oracle(t, 1)
    lq.DeltaTable(uri).update("id % 3 = 0", set={"p": "CASE WHEN p IS NULL THEN 'w' ELSE NULL END"})
    o.update("id % 3 = 0", {"p": "CASE WHEN p IS NULL THEN 'w' ELSE NULL END"})
    check_all_engines(uri, o.table())
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")
    m = lq.DeltaTable(uri).delete("p = 'w'")
    o.delete("p = 'w'")
    assert m.num_deleted_rows > 0
    check_all_engines(uri, o.table())


def test_copy_on_write_flag_leaves_no_dvs(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    dt = lq.DeltaTable(uri)
    dt.delete("id = 3")  # a DV on file 1
    m = dt.delete("id = 4", copy_on_write=True)
    assert m.num_deletion_vectors_added == 0 and m.num_added_files == 1 and m.num_removed_files == 1
    assert m.num_deletion_vectors_removed == 1 and m.num_copied_rows == 8
    m = dt.update("id = 14", set={"a": "99"}, copy_on_write=True)
    assert m.num_deletion_vectors_added == 0
    live = lq.DeltaTable(uri).snapshot().files().to_pylist()
    assert all(f["deletion_vector"] is None for f in live)
    assert _ids(uri) == [i for i in range(30) if i not in (3, 4)]


def test_cow_table_leaves_no_dvs(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri, configuration=NO_DV)
    dt = lq.DeltaTable(uri)
    dt.delete("id % 4 = 0")
    dt.update("id % 4 = 1", set={"s": "'q'"})
    (
        dt.merge(pa.table({"id": [2, 200]}), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .execute()
    )
    snap = lq.DeltaTable(uri).snapshot()
    assert (
        not snap.protocol.supports("deletionVectors") or not snap.properties.enable_deletion_vectors
    )
    for v in range(3, snap.version + 1):
        assert not any("deletionVector" in a for a in _data_adds(commit_actions(uri, v)))
    assert_same_rows(deltalake_table(uri), snap.scan().to_arrow(), what="deltalake")


@pytest.mark.parametrize(
    ("threshold", "rewritten"), [(0.3, True), (0.5, False), (0.0, True), (1.0, False)]
)
def test_rewrite_threshold(tmp_path: Path, threshold: float, rewritten: bool) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    m = lq.DeltaTable(uri).delete("id < 4", rewrite_threshold=threshold)  # 4 of 10 rows
    assert m.num_deleted_rows == 4
    if rewritten:
        assert (m.num_added_files, m.num_removed_files, m.num_deletion_vectors_added) == (1, 1, 0)
        assert m.num_copied_rows == 6
    else:
        assert (m.num_added_files, m.num_removed_files, m.num_deletion_vectors_added) == (0, 0, 1)
    assert _ids(uri) == list(range(4, 30))


def test_rewrite_threshold_validated(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    with pytest.raises(ValueError):
        lq.DeltaTable(uri).delete("id = 1", rewrite_threshold=1.5)


def test_delete_everything(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    dt = lq.DeltaTable(uri)
    dt.delete("id < 3")
    m = dt.delete()
    assert m.num_deleted_rows == 27 and m.num_removed_files == 3
    assert dt.snapshot().scan().to_arrow().num_rows == 0
    assert dt.delete().committed is False
    assert _ids(uri, 3) == list(range(3, 30))


# --------------------------------------------------------------------------------------------
# schema
# --------------------------------------------------------------------------------------------


def test_merge_schema_mode_merge_adds_column(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    src = pa.table(
        {"id": pa.array([1, 300], pa.int64()), "s": ["one", "new"], "extra": pa.array([1.5, 2.5])}
    )
    m = (
        lq.DeltaTable(uri)
        .merge(src, on="t.id = s.id", source_alias="s", target_alias="t", schema_mode="merge")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (1, 1)
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.schema.names == ["id", "a", "s", "extra"]
    rows = {r["id"]: r for r in snap.scan().to_arrow().to_pylist()}
    assert rows[1] == {"id": 1, "a": 1, "s": "one", "extra": 1.5}
    assert rows[300] == {"id": 300, "a": None, "s": "new", "extra": 2.5}
    assert rows[2]["extra"] is None
    assert_same_rows(deltalake_table(uri), snap.scan().to_arrow(), what="deltalake")
    # the old version keeps the old schema
    assert lq.DeltaTable(uri).snapshot(version=2).scan().to_arrow().column_names == ["id", "a", "s"]


@pytest.mark.parametrize("schema_mode", ["merge", None])
def test_merge_schema_mode_merge_adds_struct_fields(
    tmp_path: Path, schema_mode: Literal["merge"] | None
) -> None:
    """A new field of a struct column (in a list too) is added as a new column is; it
    was dropped, with its values, even with ``schema_mode="merge"``. Without it, new
    fields are left out, as new columns are."""
    uri = str(tmp_path / "t")
    st = pa.struct([("a", pa.int64()), ("b", pa.string())])
    st3 = pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.float64())])
    base = pa.table(
        {"id": [1, 2], "s": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}], st)}
    ).append_column("l", pa.array([[{"a": 1, "b": "x"}], []], pa.list_(st)))
    rows3 = [{"a": 1, "b": "w", "c": 2.5}, {"a": 3, "b": "z", "c": 3.5}]
    src = pa.table(
        {
            "id": [1, 3],
            "s": pa.array(rows3, st3),
            "l": pa.array([[r] for r in rows3], pa.list_(st3)),
        }
    )
    lq.write(uri, base)
    m = (
        lq.DeltaTable(uri)
        .merge(src, on="t.id = s.id", source_alias="s", target_alias="t", schema_mode=schema_mode)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (1, 1)
    snap = lq.DeltaTable(uri).snapshot()
    got = {r["id"]: r for r in snap.scan().to_arrow().to_pylist()}
    if schema_mode is None:
        assert snap.schema == base.schema
        assert got[3]["s"] == {"a": 3, "b": "z"}
        return
    assert snap.schema.field("s").type == st3
    assert snap.schema.field("l").type == pa.list_(st3)
    assert got[1]["s"] == rows3[0] and got[3]["l"] == [rows3[1]]
    assert got[2]["s"] == {"a": 2, "b": "y", "c": None}
    assert_same_rows(deltalake_table(uri), snap.scan().to_arrow(), what="deltalake")


def test_merge_without_schema_mode_ignores_extra_column(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    src = pa.table({"id": pa.array([1, 300], pa.int64()), "extra": pa.array([1.5, 2.5])})
    (
        lq.DeltaTable(uri)
        .merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.schema.names == ["id", "a", "s"]
    rows = {r["id"]: r for r in snap.scan().to_arrow().to_pylist()}
    assert rows[1] == {"id": 1, "a": 1, "s": "s1"}
    assert rows[300] == {"id": 300, "a": None, "s": None}


def test_update_value_not_fitting_type(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": pa.array([1, 2], pa.int64()), "b": pa.array([1, 2], pa.int8())}))
    with pytest.raises((lq.errors.SchemaMismatchError, lq.errors.PredicateError)):
        lq.DeltaTable(uri).update("id = 1", set={"b": "1000"})
    assert _log_versions(uri) == [0]


def test_update_not_null_column(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
    lq.write(uri, pa.table({"id": [1, 2], "v": [1, 2]}, schema=schema))
    with pytest.raises((lq.errors.SchemaMismatchError, lq.errors.ConstraintViolationError)):
        lq.DeltaTable(uri).update("id = 1", set={"id": "NULL"})
    with pytest.raises((lq.errors.SchemaMismatchError, lq.errors.ConstraintViolationError)):
        (
            lq.DeltaTable(uri)
            .merge(
                pa.table({"id": [5], "v": [5]}),
                on="t.id = s.id",
                source_alias="s",
                target_alias="t",
            )
            .when_not_matched_insert(values={"v": "s.v"})
            .execute()
        )
    assert _log_versions(uri) == [0]


def test_check_constraint_on_update_and_merge(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"id": [1, 2, 3], "x": [1, 2, 3]}),
        configuration={"delta.constraints.pos": "x > 0"},
    )
    dt = lq.DeltaTable(uri)
    with pytest.raises(lq.errors.ConstraintViolationError):
        dt.update("id = 2", set={"x": "x - 5"})
    with pytest.raises(lq.errors.ConstraintViolationError):
        (
            dt.merge(
                pa.table({"id": [3, 9], "x": [1, -1]}),
                on="t.id = s.id",
                source_alias="s",
                target_alias="t",
            )
            .when_not_matched_insert_all()
            .execute()
        )
    assert _log_versions(uri) == [0]
    assert dt.update("id = 2", set={"x": "x + 5"}).num_updated_rows == 1
    assert dt.delete("x = 1").num_deleted_rows == 1
    assert sorted(
        map(tuple, (r.values() for r in dt.snapshot().scan().to_arrow().to_pylist()))
    ) == [(2, 7), (3, 3)]


# --------------------------------------------------------------------------------------------
# features that refuse DML
# --------------------------------------------------------------------------------------------


def test_append_only_refuses_delete_and_update(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri, configuration={"delta.appendOnly": "true"})
    dt = lq.DeltaTable(uri)
    with pytest.raises(lq.AppendOnlyError):
        dt.delete("id = 1")
    with pytest.raises(lq.AppendOnlyError):
        dt.delete()
    with pytest.raises(lq.AppendOnlyError):
        dt.update("id = 1", set={"a": "1"})
    with pytest.raises(lq.AppendOnlyError):
        dt.merge(
            pa.table({"id": [1]}), on="t.id = s.id", source_alias="s", target_alias="t"
        ).when_matched_delete().execute()
    assert _log_versions(uri) == [0, 1, 2]
    # an insert-only MERGE is an append
    m = (
        dt.merge(
            pa.table({"id": pa.array([1, 77], pa.int64())}),
            on="t.id = s.id",
            source_alias="s",
            target_alias="t",
        )
        .when_not_matched_insert_all()
        .execute()
    )
    assert m.num_inserted_rows == 1 and 77 in _ids(uri)


def test_row_tracking_tables_accept_every_dml(tmp_path: Path) -> None:
    # UPDATE, MERGE ... UPDATE and copy-on-write keep row ids (tests/row_tracking/ checks
    # the ids); here: they commit instead of refusing, as before issue 15
    uri = str(tmp_path / "t")
    _three_files(uri, configuration={"delta.enableRowTracking": "true"})
    dt = lq.DeltaTable(uri)
    before = dict(
        (r["id"], r["_row_id"])
        for r in dt.snapshot().scan(columns=["id"], row_tracking=True).to_arrow().to_pylist()
    )
    assert dt.update("id = 1", set={"a": "1"}).committed
    assert (
        dt.merge(pa.table({"id": [1]}), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .execute()
        .committed
    )
    assert dt.delete("id = 2", copy_on_write=True).committed
    after = dict(
        (r["id"], r["_row_id"])
        for r in dt.snapshot().scan(columns=["id"], row_tracking=True).to_arrow().to_pylist()
    )
    assert after == {k: v for k, v in before.items() if k != 2}


# --------------------------------------------------------------------------------------------
# storage, column mapping, sources
# --------------------------------------------------------------------------------------------


def test_s3_delete_and_merge(s3_table_uri: str, s3_storage_options: dict[str, Any]) -> None:
    so = s3_storage_options
    t = pa.table(
        {"id": pa.array(range(20), pa.int64()), "v": pa.array([f"v{i}" for i in range(20)])}
    )
    lq.write(s3_table_uri, t.slice(0, 10), storage_options=so)
    lq.write(s3_table_uri, t.slice(10), mode="append", storage_options=so)
    dt = lq.DeltaTable(s3_table_uri, storage_options=so)
    o = Oracle(t, 1)
    m = dt.delete("id % 3 = 0")
    o.delete("id % 3 = 0")
    assert m.num_deleted_rows == 7 and m.version == 2
    src = pa.table({"id": pa.array([1, 2, 3, 50], pa.int64()), "v": ["a", "b", "c", "d"]})
    m = (
        dt.merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    o.merge(src, "t.id = s.id", [_clause("matched", "update"), _clause("not_matched", "insert")])
    assert (m.num_updated_rows, m.num_inserted_rows) == (2, 2)
    check_all_engines(s3_table_uri, o.table(), storage_options=so)
    check_all_engines(s3_table_uri, o.states[1], version=1, storage_options=so)


def _clause(kind: str, action: str, predicate: str | None = None, assignments: Any = None) -> Any:
    from dmlkit import Clause

    return Clause(kind, action, predicate, assignments)


def test_memory_uri_dml(memory_table_uri: str) -> None:
    uri = memory_table_uri
    lq.write(uri, pa.table({"id": [1, 2, 3], "v": [1, 2, 3]}))
    dt = lq.DeltaTable(uri)
    assert dt.delete("v = 2").num_deleted_rows == 1
    assert dt.update(set={"v": "v * 10"}).num_updated_rows == 2
    assert sorted(dt.snapshot().scan().to_arrow().column("v").to_pylist()) == [10, 30]


@pytest.mark.parametrize("mapping", ["name", "id"])
@pytest.mark.parametrize("config", [{}, NO_DV], ids=["dv", "cow"])
def test_column_mapping_modes(tmp_path: Path, config: dict[str, str], mapping: str) -> None:
    uri = str(tmp_path / "t")
    t = _three_files(uri, configuration={"delta.columnMapping.mode": mapping, **config})
    o = Oracle(t, 2)
    dt = lq.DeltaTable(uri)
    dt.delete("a = 1")
    o.delete("a = 1")
    dt.update("a = 2", set={"s": "s || '!'"})
    o.update("a = 2", {"s": "s || '!'"})
    src = pa.table({"id": pa.array([0, 3, 99], pa.int64()), "a": pa.array([7, 8, 9], pa.int64())})
    (
        dt.merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    o.merge(src, "t.id = s.id", [_clause("matched", "update"), _clause("not_matched", "insert")])
    check_all_engines(uri, o.table())
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")
    # physical names are used in the data files written
    import pyarrow.parquet as pq

    for v in (3, 4, 5):
        for add in _data_adds(commit_actions(uri, v)):
            if "deletionVector" in add and add["path"] in {f["path"] for f in []}:
                continue
            names = pq.read_schema(Path(uri) / add["path"]).names
            assert "s" not in names and "id" not in names, names


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t,
        lambda t: t.to_batches()[0],
        lambda t: pl.from_arrow(t),
        lambda t: t.to_pandas(),
        lambda t: duckdb.connect().from_arrow(t),
        lambda t: pa.RecordBatchReader.from_batches(t.schema, t.to_batches()),
    ],
    ids=["table", "batch", "polars", "pandas", "duckdb", "reader"],
)
def test_merge_source_kinds(tmp_path: Path, make: Any) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    src = pa.table({"id": pa.array([1, 500], pa.int64()), "s": ["m", "n"]})
    m = (
        lq.DeltaTable(uri)
        .merge(make(src), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(set={"s": "s.s"})
        .when_not_matched_insert(values={"id": "s.id", "a": "42"})
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (1, 1)
    rows = {r["id"]: r for r in lq.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist()}
    assert rows[1]["s"] == "m" and rows[500] == {"id": 500, "a": 42, "s": None}


@pytest.mark.parametrize(
    "make",
    [
        lambda t: pa.RecordBatchReader.from_batches(t.schema, t.to_batches()),
        lambda t: iter(t.to_batches()),
    ],
    ids=["reader", "iterator"],
)
def test_merge_stream_source_runs_once(tmp_path: Path, make: Any) -> None:
    # A second execute() of a builder whose stream source is spent must not merge an
    # empty source (with a NOT MATCHED BY SOURCE DELETE that would empty the table).
    uri = str(tmp_path / "t")
    _three_files(uri)
    before = lq.DeltaTable(uri).snapshot().scan().to_arrow().num_rows
    src = pa.table({"id": pa.array([1], pa.int64()), "s": ["m"]})
    builder = (
        lq.DeltaTable(uri)
        .merge(make(src), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(set={"s": "s.s"})
        .when_not_matched_by_source_delete(predicate="t.id = 2")
    )
    m = builder.execute()
    assert m.num_updated_rows == 1 and m.num_deleted_rows == 1
    version = lq.DeltaTable(uri).snapshot().version
    with pytest.raises(ValueError, match="earlier execute"):
        builder.execute()
    assert lq.DeltaTable(uri).snapshot().version == version  # nothing committed
    assert lq.DeltaTable(uri).snapshot().scan().to_arrow().num_rows == before - 1
    # a table source can run twice: the second run matches and updates again
    again = lq.DeltaTable(uri).merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
    again = again.when_matched_update(set={"s": "s.s"})
    assert again.execute().num_updated_rows == 1
    assert again.execute().num_updated_rows == 1


@pytest.mark.parametrize(
    ("target_type", "source_type", "values"),
    [
        (pa.int64(), pa.int32(), [3, 17, 1000]),
        (pa.int32(), pa.int64(), [3, 17, 1000]),
        (pa.string(), pa.string(), ["k03", "k17", "zzz"]),
        (pa.date32(), pa.date32(), None),
        (pa.timestamp("us", tz="UTC"), pa.timestamp("us", tz="UTC"), None),
    ],
)
def test_merge_key_types(tmp_path: Path, target_type: Any, source_type: Any, values: Any) -> None:
    """Key pruning (min/max of the source keys) with different key types."""
    import datetime as dtm

    uri = str(tmp_path / "t")
    if pa.types.is_string(target_type):
        keys = [f"k{i:02d}" for i in range(30)]
    elif pa.types.is_date(target_type):
        keys = [dtm.date(2024, 1, 1) + dtm.timedelta(days=i) for i in range(30)]
        values = [keys[3], keys[17], dtm.date(2030, 1, 1)]
    elif pa.types.is_timestamp(target_type):
        base = dtm.datetime(2024, 1, 1, tzinfo=dtm.timezone.utc)
        keys = [base + dtm.timedelta(hours=i) for i in range(30)]
        values = [keys[3], keys[17], base + dtm.timedelta(days=400)]
    else:
        keys = list(range(30))
    t = pa.table({"k": pa.array(keys, target_type), "v": pa.array(range(30), pa.int64())})
    for i in range(3):
        lq.write(uri, t.slice(i * 10, 10), mode="error" if i == 0 else "append")
    src = pa.table({"k": pa.array(values, source_type), "v": pa.array([-1, -2, -3], pa.int64())})
    m = (
        lq.DeltaTable(uri)
        .merge(src, on="t.k = s.k", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (2, 1)
    o = Oracle(t, 2)
    o.merge(src, "t.k = s.k", [_clause("matched", "update"), _clause("not_matched", "insert")])
    check_all_engines(uri, o.table())


def test_merge_reads_only_overlapping_files(tmp_path: Path) -> None:
    """A 1-row upsert into a table of many files reads only the files whose key range
    overlaps the source's."""
    uri = str(tmp_path / "t")
    n_files = 40
    for i in range(n_files):
        t = pa.table(
            {
                "id": pa.array(range(i * 50, i * 50 + 50), pa.int64()),
                "v": pa.array([i] * 50, pa.int64()),
            }
        )
        lq.write(uri, t, mode="error" if i == 0 else "append")
    dt = lq.DeltaTable(uri)
    m = (
        dt.merge(
            pa.table({"id": pa.array([1234], pa.int64()), "v": pa.array([-1], pa.int64())}),
            on="t.id = s.id",
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert m.num_updated_rows == 1
    assert m.num_files_scanned <= 2 < n_files
    assert m.num_files_scanned + m.num_files_skipped == n_files
    # delete by key and update by key prune the same way
    m = dt.delete("id = 777")
    assert m.num_deleted_rows == 1 and m.num_files_scanned <= 2
    m = dt.update("id = 1999", set={"v": "0"})
    assert m.num_updated_rows == 1 and m.num_files_scanned <= 2
    v = dt.snapshot().scan(filter="id = 1234").to_arrow().to_pylist()
    assert v == [{"id": 1234, "v": -1}]
    assert dt.snapshot().scan().to_arrow().num_rows == n_files * 50 - 1


_NAN_TABLE = pa.table(
    {"id": pa.array([1, 2, 3, 4], pa.int64()), "f": pa.array([1.0, float("nan"), 5.0, None])}
)


@pytest.mark.parametrize(
    "predicate",
    [
        # lakequery writes no Parquet min/max for float columns: DuckDB would fold these
        # predicates on bounds that leave NaN out
        "f < 3",
        "NOT (f > 3)",
        "f IS NULL",
        "f = 5",
    ],
)
def test_nan_rows_where_semantics_agree(tmp_path: Path, predicate: str) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, _NAN_TABLE.slice(0, 2))
    lq.write(uri, _NAN_TABLE.slice(2), mode="append")
    o = Oracle(_NAN_TABLE, 1)
    lq.DeltaTable(uri).delete(predicate)
    o.delete(predicate)
    check_all_engines(uri, o.table(), what=predicate)


def test_nan_row_in_range_predicate_file_skipping(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, _NAN_TABLE.slice(0, 2))
    lq.write(uri, _NAN_TABLE.slice(2), mode="append")
    o = Oracle(_NAN_TABLE, 1)
    lq.DeltaTable(uri).delete("f > 3")
    o.delete("f > 3")
    check_all_engines(uri, o.table(), what="f > 3")


@pytest.mark.parametrize("predicate", ["isnan(f)", "f = 'NaN'::DOUBLE"])
def test_nan_row_selected_by_isnan(tmp_path: Path, predicate: str) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, _NAN_TABLE)
    o = Oracle(_NAN_TABLE, 0)
    lq.DeltaTable(uri).delete(predicate)
    o.delete(predicate)
    check_all_engines(uri, o.table(), what=predicate)


def test_json_commit_is_readable_by_deltalake_history(tmp_path: Path) -> None:
    import deltalake

    uri = str(tmp_path / "t")
    _three_files(uri)
    dt = lq.DeltaTable(uri)
    dt.delete("id = 1")
    dt.update("id = 2", set={"a": "0"})
    hist = deltalake.DeltaTable(uri).history()
    ops = [h["operation"] for h in hist]
    assert ops[:2] == ["UPDATE", "DELETE"]
    assert json.dumps(hist)  # serialisable


def _strip_stats(uri: str) -> None:
    """Drops ``stats`` from the adds of version 0 (stats are optional in the protocol)."""
    f = Path(uri) / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    for a in actions:
        if "add" in a:
            a["add"].pop("stats", None)
    f.write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def test_dv_delete_on_file_without_stats(tmp_path: Path) -> None:
    """Regression: a file without stats.numRecords cannot carry a DV; it is rewritten."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(10), pa.int64()), "v": pa.array(range(10), pa.int64())})
    lq.write(uri, t)
    _strip_stats(uri)
    o = Oracle(t, 0)
    lq.DeltaTable(uri).delete("id = 3")
    o.delete("id = 3")
    check_all_engines(uri, o.table())


def test_cow_delete_on_file_without_stats(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(10), pa.int64()), "v": pa.array(range(10), pa.int64())})
    lq.write(uri, t)
    _strip_stats(uri)
    o = Oracle(t, 0)
    m = lq.DeltaTable(uri).delete("id = 3", copy_on_write=True)
    o.delete("id = 3")
    assert m.num_deleted_rows == 1
    lq.DeltaTable(uri).update("id = 4", set={"v": "40"}, copy_on_write=True)
    o.update("id = 4", {"v": "40"})
    check_all_engines(uri, o.table())


def test_partition_delete_metrics_without_stats(tmp_path: Path) -> None:
    """Regression: whole-file deletes count rows of files without stats.numRecords."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(10), pa.int64()), "p": ["a", "b"] * 5})
    lq.write(uri, t, partition_by=["p"])
    _strip_stats(uri)
    m = lq.DeltaTable(uri).delete("p = 'a'")
    assert lq.DeltaTable(uri).snapshot().scan().to_arrow().num_rows == 5
    assert m.num_deleted_rows == 5
