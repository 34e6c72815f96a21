"""DML and other Delta implementations.

* ``deltalake`` (and Polars' Delta reader) read the same rows as the oracle from tables
  lakequery changed with DELETE / UPDATE / MERGE, deletion vectors included.
* lakequery's DML on tables created by ``deltalake`` (copy-on-write: no DV feature).
* lakequery's DML on copies of the deletion-vector tables of the shared conformance set
  (written by Spark, Databricks and kernel tests), against an oracle built from the
  table's rows before the statement.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import deltalake
import polars as pl
import pyarrow as pa
import pytest
from dmlkit import Clause, Oracle, assert_same_rows, check_all_engines, deltalake_table, run_merge
from tablekit import conformance_table

import lakequery as lq


def _initial(n: int = 60) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "a": pa.array([None if i % 6 == 0 else i % 4 for i in range(n)], pa.int64()),
            "s": pa.array([f"r{i}" if i % 5 else None for i in range(n)], pa.string()),
            "p": pa.array([["x", "y", None][i % 3] for i in range(n)], pa.string()),
        }
    )


def _polars_rows(uri: str) -> pa.Table:
    return pl.read_delta(uri).to_arrow()


def _dml_script(dt: lq.DeltaTable, o: Oracle) -> None:
    """The same four statements on the table and the oracle, checking after each."""
    m = dt.delete("a = 1 OR s IS NULL")
    o.delete("a = 1 OR s IS NULL")
    o.committed(m.version)
    m = dt.update("a IS NULL", set={"a": "id * 100", "s": "coalesce(s, 'was null')"})
    o.update("a IS NULL", {"a": "id * 100", "s": "coalesce(s, 'was null')"})
    o.committed(m.version)
    src = pa.table(
        {
            "id": pa.array([2, 3, 4, 7, 500, 501], pa.int64()),
            "a": pa.array([20, None, 40, 70, 5, 6], pa.int64()),
            "s": pa.array(["m2", "m3", None, "m7", "n500", "n501"], pa.string()),
        }
    )
    clauses = [
        Clause("matched", "delete", "s.s IS NULL", None),
        Clause("matched", "update", None, (("a", "s.a"), ("s", "t.s || '+' || s.s"))),
        Clause("not_matched", "insert", "s.id <> 501", None),
        Clause("not_matched_by_source", "update", "t.id % 10 = 9", (("s", "'nmbs'"),)),
    ]
    m = run_merge(dt, src, clauses)
    o.merge(src, "t.id = s.id", clauses)
    o.committed(m.version)
    if "p" in o.table().column_names:
        m = dt.delete("p = 'y'")
        o.delete("p = 'y'")
        o.committed(m.version)


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize(
    "config", [{}, {"delta.enableDeletionVectors": "false"}], ids=["dv", "cow"]
)
def test_deltalake_and_polars_read_lakequery_dml(
    tmp_path: Path, partitioned: bool, config: dict[str, str]
) -> None:
    uri = str(tmp_path / "t")
    t = _initial()
    lq.write(uri, t.slice(0, 20), partition_by=["p"] if partitioned else None, configuration=config)
    lq.write(uri, t.slice(20, 20), mode="append")
    lq.write(uri, t.slice(40), mode="append")
    o = Oracle(t, 2)
    _dml_script(lq.DeltaTable(uri), o)
    assert o.version == 6 if partitioned else 5
    for v, expected in o.states.items():
        check_all_engines(uri, expected, v)
        assert_same_rows(deltalake_table(uri, v), expected, what=f"deltalake v{v}")
    assert_same_rows(_polars_rows(uri), o.table(), what="polars.read_delta")
    assert_same_rows(pl.scan_delta(uri).collect().to_arrow(), o.table(), what="polars.scan_delta")
    # deltalake sees the DML commits in the history and the expected files
    dl = deltalake.DeltaTable(uri)
    assert dl.version() == o.version
    ops = [h["operation"] for h in dl.history()]
    assert "MERGE" in ops and "DELETE" in ops and "UPDATE" in ops


@pytest.mark.parametrize("partitioned", [False, True])
def test_dml_on_deltalake_created_table(tmp_path: Path, partitioned: bool) -> None:
    uri = str(tmp_path / "t")
    t = _initial()
    for i, part in enumerate((t.slice(0, 25), t.slice(25, 25), t.slice(50))):
        deltalake.write_deltalake(
            uri,
            part,
            mode="overwrite" if i == 0 else "append",
            partition_by=["p"] if partitioned else None,
        )
    snap = lq.DeltaTable(uri).snapshot()
    assert not snap.protocol.supports("deletionVectors")
    o = Oracle(t, 2)
    _dml_script(lq.DeltaTable(uri), o)
    for v in range(3, o.version + 1):
        for line in (Path(uri) / "_delta_log" / f"{v:020d}.json").read_text().splitlines():
            assert '"deletionVector"' not in line or '"deletionVector":null' in line.replace(
                " ", ""
            )
    for v, expected in o.states.items():
        check_all_engines(uri, expected, v)
        assert_same_rows(
            deltalake.DeltaTable(uri, version=v).to_pyarrow_table(),
            expected,
            what=f"deltalake v{v}",
        )
    assert_same_rows(_polars_rows(uri), o.table(), what="polars.read_delta")
    # deltalake can keep writing after lakequery's commits
    deltalake.write_deltalake(uri, t.slice(0, 2), mode="append")
    expected = pa.concat_tables([o.table(), t.slice(0, 2).cast(o.table().schema)])
    check_all_engines(uri, expected)


def test_deltalake_dml_after_lakequery_dml(tmp_path: Path) -> None:
    """deltalake's own DELETE on a table whose files lakequery rewrote (copy-on-write)."""
    uri = str(tmp_path / "t")
    t = _initial()
    deltalake.write_deltalake(uri, t)
    o = Oracle(t, 0)
    o.committed(lq.DeltaTable(uri).update("id < 10", set={"a": "-1"}).version)
    o.update("id < 10", {"a": "-1"})
    deltalake.DeltaTable(uri).delete("a = -1 AND id > 5")
    o.delete("a = -1 AND id > 5")
    check_all_engines(uri, o.table())


# --------------------------------------------------------------------------------------------
# conformance tables
# --------------------------------------------------------------------------------------------

# name -> statements: ("delete", pred) / ("update", pred, sets) / ("merge", key, source rows)
CONFORMANCE_SCRIPTS: dict[str, list[tuple[Any, ...]]] = {
    "dat_deletion_vectors": [
        ("update", "letter = 'b'", {"int": "int + 1"}),
        (
            "merge",
            "letter",
            [{"letter": "b", "int": 1, "date": None}, {"letter": "q", "int": 2, "date": None}],
        ),
        ("delete", "int < 100"),
    ],
    "golden_dv_partitioned_with_checkpoint": [
        ("delete", "col1 % 3 = 0"),
        ("update", "part = 8 OR col1 > 40", {"col2": "col2 || '!'"}),
        ("delete", "part = 6"),
        (
            "merge",
            "col1",
            [{"part": 1, "col1": 38, "col2": "m"}, {"part": 2, "col1": 1000, "col2": "n"}],
        ),
    ],
    "kernelrs_cdf_table_with_dv": [
        ("delete", "value % 3 = 0"),
        ("update", "value > 5", {"value": "value * 10"}),
        ("merge", "value", [{"value": 1}, {"value": 77}]),
    ],
    "kernelrs_cdf_table_with_cdc_and_dvs": [
        ("update", "id % 2 = 0", {"comment": "comment || '-u'"}),
        ("delete", "id = 1"),
        ("merge", "id", [{"id": 3, "comment": "m"}, {"id": 99, "comment": "n"}]),
    ],
    "deltars_cdc_ict_table": [
        ("delete", "age > 40"),
        ("update", "name = 'Kate'", {"age": "age + 1"}),
        (
            "merge",
            "name",
            [
                {"name": "Kate", "birthyear": 1995, "age": 1},
                {"name": "Zed", "birthyear": 2000, "age": 2},
            ],
        ),
    ],
}


@pytest.mark.parametrize("name", sorted(CONFORMANCE_SCRIPTS))
def test_dml_on_conformance_tables(tmp_path: Path, name: str) -> None:
    source = conformance_table(name)
    assert source.is_dir(), f"conformance table {name} missing at {source}"
    root = tmp_path / name
    shutil.copytree(source, root)
    uri = str(root)
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot()
    start = snap.version
    initial = snap.scan().to_arrow()
    o = Oracle(initial, start)
    schema = snap.schema
    for i, step in enumerate(CONFORMANCE_SCRIPTS[name]):
        try:
            if step[0] == "delete":
                m = dt.delete(step[1])
                o.delete(step[1])
            elif step[0] == "update":
                m = dt.update(step[1], set=step[2])
                o.update(step[1], step[2])
            else:
                key = step[1]
                src = pa.Table.from_pylist(
                    step[2], schema=pa.schema([schema.field(c) for c in step[2][0]])
                )
                clauses = [
                    Clause("matched", "update", None, None),
                    Clause("not_matched", "insert", None, None),
                ]
                m = run_merge(dt, src, clauses) if key == "id" else _merge_on(dt, src, key, clauses)
                o.merge(src, f't."{key}" = s."{key}"', clauses)
        except lq.errors.UnsupportedFeatureError as exc:
            # refusing to write a table with a feature lakequery cannot write is fine, but
            # then nothing may have been committed
            assert i == 0, f"refused only at step {i}: {exc}"
            assert lq.DeltaTable(uri).snapshot().version == start
            pytest.skip(f"{name}: lakequery refuses to write it: {exc}")
        assert m.committed, f"{name} step {i} {step}: nothing changed"
        o.committed(m.version)
        check_all_engines(uri, o.table(), what=f"{name} step {i} {step}")
    for v, expected in o.states.items():
        check_all_engines(uri, expected, v, what=f"{name} v{v}")
    # the log stays readable by deltalake, DVs included
    assert_same_rows(deltalake_table(uri), o.table(), what=f"{name} deltalake")
    # the old versions are untouched
    assert_same_rows(
        lq.DeltaTable(uri).snapshot(version=start).scan().to_arrow(), initial, what="start"
    )


def _merge_on(dt: lq.DeltaTable, src: pa.Table, key: str, clauses: list[Clause]) -> Any:
    b = dt.merge(src, on=f't."{key}" = s."{key}"', source_alias="s", target_alias="t")
    for c in clauses:
        b = c.apply(b)
    return b.execute()
