"""Change data feed: the ``cdc`` files each DML commit writes must equal the oracle's
change of that statement (DuckDB's ``RETURNING``): deleted rows as ``delete``, updated rows
as ``update_preimage``/``update_postimage`` pairs, inserted rows as ``insert``.

Digest §13: a commit with ``cdc`` actions is read from them only; a commit without (a
whole-file delete by partition values) from its ``remove`` actions."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from dmlkit import (
    Clause,
    Oracle,
    assert_same_rows,
    assignments,
    cdc_rows,
    check_all_engines,
    commit_actions,
    create_table,
    merge_clauses,
    merge_sources,
    partition_predicates,
    predicates,
    row_batches,
    run_merge,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import lakequery as lq

CDF = {"delta.enableChangeDataFeed": "true"}
CT = "_change_type"


def _tag(t: pa.Table, change: str) -> pa.Table:
    return t.append_column(CT, pa.array([change] * t.num_rows, pa.string()))


def _by_ids(t: pa.Table, ids: list[int]) -> pa.Table:
    import pyarrow.compute as pc

    return t.filter(pc.is_in(t.column("id"), pa.array(ids, pa.int64())))


def expected_changes(o: Oracle, kind: str, arg: Any, source: pa.Table | None) -> pa.Table:
    """Runs the statement on the oracle with RETURNING; returns the expected change rows."""
    before = o.table()
    cols = before.column_names
    sel = ", ".join(f'"{c}"' for c in cols)
    if kind == "delete":
        sql = "DELETE FROM t" + (f" WHERE {arg}" if arg else "") + f" RETURNING {sel}"
        return _tag(o.con.sql(sql).to_arrow_table(), "delete").select([*cols, CT])
    if kind == "update":
        pred, sets = arg
        set_sql = ", ".join(f'"{c}" = {e}' for c, e in sets.items())
        sql = f"UPDATE t SET {set_sql}" + (f" WHERE {pred}" if pred else "") + f" RETURNING {sel}"
        post = o.con.sql(sql).to_arrow_table()
        pre = _by_ids(before, post.column("id").to_pylist())
        return pa.concat_tables(
            [_tag(pre, "update_preimage"), _tag(post, "update_postimage")]
        ).select([*cols, CT])
    assert source is not None
    clauses: list[Clause] = arg
    o.con.register("src", source)
    try:
        parts, unconditional = [], set()
        for c in clauses:
            if c.kind in unconditional:
                continue
            if c.predicate is None:
                unconditional.add(c.kind)
            parts.append(c.duckdb_sql(cols, source.column_names))
        sql = (
            "MERGE INTO t AS t USING src AS s ON (t.id = s.id) "
            + " ".join(parts)
            + f" RETURNING merge_action AS __action, {', '.join(f't.{c}' for c in sel.split(', '))}"
        )
        out = o.con.sql(sql).to_arrow_table()
    finally:
        o.con.unregister("src")
    pieces = []
    for action, change in (("DELETE", "delete"), ("INSERT", "insert")):
        rows = out.filter(pa.compute.equal(out.column("__action"), action)).drop_columns(
            ["__action"]
        )
        pieces.append(_tag(rows, change))
    post = out.filter(pa.compute.equal(out.column("__action"), "UPDATE")).drop_columns(["__action"])
    pieces.append(_tag(_by_ids(before, post.column("id").to_pylist()), "update_preimage"))
    pieces.append(_tag(post, "update_postimage"))
    return pa.concat_tables([p.cast(pieces[0].schema) for p in pieces]).select([*cols, CT])


def commit_changes(root: str, version: int, columns: list[str]) -> pa.Table:
    """The changes of one commit read as digest §13 says."""
    cdc = cdc_rows(root, version)
    if cdc is not None:
        return cdc.select([*columns, CT])
    actions = commit_actions(root, version)
    assert not [a for a in actions if "add" in a], "a DML commit with adds but no cdc files"
    # whole-file removes: their live rows at the previous version are deletes
    prev = lq.DeltaTable(root).snapshot(version=version - 1).scan().to_arrow()
    now = lq.DeltaTable(root).snapshot(version=version).scan().to_arrow()
    import pyarrow.compute as pc

    gone = prev.filter(pc.invert(pc.is_in(prev.column("id"), now.column("id"))))
    return _tag(gone.select(columns), "delete")


def _check_commit(root: str, m: Any, o: Oracle, expected: pa.Table, what: str) -> None:
    cols = [c for c in expected.column_names if c != CT]
    if not m.committed:
        assert expected.num_rows == 0, what
        return
    actual = commit_changes(root, m.version, cols)
    assert_same_rows(actual, expected, columns=[*cols, CT], what=f"cdc of {what}")
    counts = {
        c: expected.column(CT).to_pylist().count(c)
        for c in ("delete", "insert", "update_postimage")
    }
    assert (m.num_deleted_rows, m.num_inserted_rows, m.num_updated_rows) == (
        counts["delete"],
        counts["insert"],
        counts["update_postimage"],
    ), what
    if cdc_rows(root, m.version) is not None:
        assert m.num_added_change_files >= 1
        for a in commit_actions(root, m.version):
            if "cdc" in a:
                assert a["cdc"]["path"].startswith("_change_data/"), a
                assert a["cdc"]["dataChange"] is False


SETTINGS = settings(
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(data=st.data(), partitioned=st.booleans(), dv=st.booleans())
def test_cdf_of_random_dml(data: Any, partitioned: bool, dv: bool) -> None:
    batches = data.draw(row_batches(partitioned, max_batches=3), label="batches")
    config = dict(CDF) if dv else {**CDF, "delta.enableDeletionVectors": "false"}
    with tempfile.TemporaryDirectory(prefix="lq-dml-cdf-") as d:
        uri = f"{d}/t"
        version = create_table(uri, batches, partitioned=partitioned, configuration=config)
        o = Oracle(pa.concat_tables(batches), version)
        dt = lq.DeltaTable(uri)
        for _ in range(data.draw(st.integers(1, 3), label="n_ops")):
            kind = data.draw(
                st.sampled_from(
                    ["delete", "update", "merge"] + (["pdelete"] if partitioned else [])
                ),
                label="kind",
            )
            source = None
            if kind in ("delete", "pdelete"):
                arg = data.draw(
                    partition_predicates() if kind == "pdelete" else predicates(partitioned),
                    label="predicate",
                )
                m = dt.delete(arg)
                kind = "delete"
            elif kind == "update":
                arg = (
                    data.draw(st.one_of(st.none(), predicates(partitioned)), label="predicate"),
                    data.draw(assignments(partitioned), label="set"),
                )
                m = dt.update(arg[0], set=arg[1])
            else:
                ids = o.table().column("id").to_pylist()
                source = data.draw(merge_sources(ids, partitioned), label="source")
                arg = data.draw(merge_clauses(source.column_names, partitioned), label="clauses")
                m = run_merge(dt, source, arg)
            what = f"{kind} {arg}"
            expected = expected_changes(o, kind, arg, source)
            _check_commit(uri, m, o, expected, what)
            if m.committed:
                o.committed(m.version)
            check_all_engines(uri, o.table(), what=what)


def test_cdf_delete_update_merge_exact(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = pa.table(
        {"id": pa.array(range(10), pa.int64()), "v": pa.array([f"v{i}" for i in range(10)])}
    )
    lq.write(uri, t.slice(0, 5), configuration=CDF)
    lq.write(uri, t.slice(5), mode="append")
    dt = lq.DeltaTable(uri)
    m = dt.delete("id IN (1, 7)")
    assert m.num_added_change_files >= 1
    cdc = cdc_rows(uri, m.version)
    assert cdc is not None
    assert sorted(zip(cdc.column("id").to_pylist(), cdc.column(CT).to_pylist(), strict=False)) == [
        (1, "delete"),
        (7, "delete"),
    ]
    m = dt.update("id = 2", set={"v": "'two'"})
    cdc = cdc_rows(uri, m.version)
    assert sorted(zip(cdc.column("v").to_pylist(), cdc.column(CT).to_pylist(), strict=False)) == [
        ("two", "update_postimage"),
        ("v2", "update_preimage"),
    ]
    src = pa.table({"id": pa.array([3, 42], pa.int64()), "v": ["three", "new"]})
    m = (
        dt.merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete(predicate="t.id = 9")
        .execute()
    )
    cdc = cdc_rows(uri, m.version)
    got = sorted(
        zip(
            cdc.column("id").to_pylist(),
            cdc.column("v").to_pylist(),
            cdc.column(CT).to_pylist(),
            strict=False,
        )
    )
    assert got == [
        (3, "three", "update_postimage"),
        (3, "v3", "update_preimage"),
        (9, "v9", "delete"),
        (42, "new", "insert"),
    ]
    # deltalake's CDF reader agrees
    try:
        reader = deltalake.DeltaTable(uri).load_cdf(
            starting_version=m.version, ending_version=m.version
        )
        cdf = pa.table(reader.read_all()) if hasattr(reader, "read_all") else pa.table(reader)
    except Exception as exc:  # pragma: no cover - depends on deltalake's DV support
        pytest.skip(f"deltalake cannot read this table's change feed: {exc}")
    dl = sorted(
        zip(
            cdf.column("id").to_pylist(),
            cdf.column("v").to_pylist(),
            cdf.column(CT).to_pylist(),
            strict=False,
        )
    )
    assert dl == got


def test_cdf_files_not_part_of_table_data(tmp_path: Path) -> None:
    """cdc files never show up as table rows, in any engine or in deltalake."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(6), pa.int64()), "p": ["a", "b"] * 3})
    lq.write(
        uri, t, partition_by=["p"], configuration={**CDF, "delta.enableDeletionVectors": "false"}
    )
    o = Oracle(t, 0)
    lq.DeltaTable(uri).update("id < 3", set={"id": "id + 100"})
    o.update("id < 3", {"id": "id + 100"})
    check_all_engines(uri, o.table())
    dl = deltalake.DeltaTable(uri).to_pyarrow_table()
    assert_same_rows(dl, o.table(), what="deltalake")
    assert (Path(uri) / "_change_data").is_dir()
