"""Property tests: random tables and random DELETE / UPDATE / MERGE sequences must leave
the table equal to the same statements run by DuckDB on an in-memory copy (the oracle),
read through every engine at every version, and through ``deltalake`` at the end.

Modes: deletion vectors (merge-on-read, the default for tables lakequery creates),
copy-on-write tables (DVs disabled), ``copy_on_write=True`` on a DV table, and
``rewrite_threshold`` (a mix of DVs and rewritten files).
"""

from __future__ import annotations

import tempfile
from typing import Any

import pyarrow as pa
import pytest
from dmlkit import (
    Oracle,
    assert_same_rows,
    assignments,
    check_all_engines,
    check_commit,
    create_table,
    deltalake_table,
    merge_clauses,
    merge_sources,
    partition_predicates,
    predicates,
    row_batches,
    run_merge,
)
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

import lakequery as lq

MODES = ("dv", "cow_table", "cow_flag", "threshold")
SETTINGS = settings(
    max_examples=30,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _config(mode: str) -> dict[str, str]:
    return {"delta.enableDeletionVectors": "false"} if mode == "cow_table" else {}


def _kwargs(mode: str) -> dict[str, Any]:
    if mode == "cow_flag":
        return {"copy_on_write": True}
    if mode == "threshold":
        return {"rewrite_threshold": 0.3}
    return {}


@st.composite
def operations(draw: Any, partitioned: bool) -> list[tuple[str, Any]]:
    ops = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(["delete", "update", "merge"] + (["pdelete"] if partitioned else []))
        )
        if kind == "delete":
            everything = draw(st.integers(0, 9)) == 0
            ops.append(("delete", None if everything else draw(predicates(partitioned))))
        elif kind == "pdelete":
            ops.append(("delete", draw(partition_predicates())))
        elif kind == "update":
            ops.append(
                (
                    "update",
                    (
                        draw(st.one_of(st.none(), predicates(partitioned))),
                        draw(assignments(partitioned)),
                    ),
                )
            )
        else:
            ops.append(("merge", None))
    return ops


FEATURES = {
    "colmap": {"delta.columnMapping.mode": "name"},
    "cdf": {"delta.enableChangeDataFeed": "true"},
}


def _run_sequence(data: Any, mode: str, partitioned: bool) -> None:
    batches = data.draw(row_batches(partitioned), label="batches")
    ops = data.draw(operations(partitioned), label="ops")
    config = _config(mode)
    features: list[str] = []
    if mode in ("dv", "cow_table"):
        features = data.draw(
            st.lists(st.sampled_from(sorted(FEATURES)), unique=True), label="features"
        )
        for f in features:
            config.update(FEATURES[f])
    checkpoint_after = data.draw(st.integers(-1, len(ops) - 1), label="checkpoint after op")
    with tempfile.TemporaryDirectory(prefix="lq-dml-prop-") as d:
        uri = f"{d}/t"
        oracle: Oracle | None = None
        version = -1
        for i, b in enumerate(batches):
            if mode == "deltalake":
                import deltalake

                deltalake.write_deltalake(
                    uri,
                    b,
                    mode="append",
                    partition_by=["p"] if partitioned and i == 0 else None,
                )
                version = i
            else:
                version = (
                    create_table(uri, [b], partitioned=partitioned, configuration=config)
                    if i == 0
                    else lq.write(uri, b, mode="append").version
                )
            if oracle is None:
                oracle = Oracle(b, version)
            else:
                oracle.run("INSERT INTO t BY NAME SELECT * FROM src", b)
                oracle.committed(version)
        assert oracle is not None
        dt = lq.DeltaTable(uri)
        kw = _kwargs(mode)
        for step, (kind, arg) in enumerate(ops):
            if kind == "delete":
                m = dt.delete(arg, **kw)
                oracle.delete(arg)
                what = f"DELETE WHERE {arg}"
            elif kind == "update":
                pred, sets = arg
                m = dt.update(pred, set=sets, **kw)
                oracle.update(pred, sets)
                what = f"UPDATE SET {sets} WHERE {pred}"
            else:
                ids = oracle.con.sql("SELECT id FROM t ORDER BY id").fetchnumpy()["id"].tolist()
                source = data.draw(merge_sources(ids, partitioned), label="source")
                clauses = data.draw(
                    merge_clauses(source.column_names, partitioned), label="clauses"
                )
                m = run_merge(dt, source, clauses, **kw)
                oracle.merge(source, "t.id = s.id", clauses)
                what = f"MERGE {clauses}"
            before = oracle.states[oracle.version]
            after = oracle.table()
            changed = m.num_deleted_rows + m.num_updated_rows + m.num_inserted_rows
            event(f"{kind}: {'changed' if changed else 'no change'}")
            if m.committed:
                assert m.version == oracle.version + 1, what
                check_commit(
                    uri, m.version, {"delete": "DELETE", "update": "UPDATE"}.get(kind, "MERGE")
                )
                oracle.committed(m.version)
            else:
                assert m.version == oracle.version, what
                assert changed == 0, what
                assert_same_rows(after, before, what=f"{what} (not committed)")
            assert dt.snapshot().version == oracle.version
            check_all_engines(uri, after, None, what=what)
            if kind == "delete":
                assert m.num_deleted_rows == before.num_rows - after.num_rows, what
            if mode in ("cow_table", "cow_flag", "deltalake"):
                assert m.num_deletion_vectors_added == 0, what
            if step == checkpoint_after:
                dt.checkpoint()
        # time travel: every version equals the oracle's state then
        for v, expected in oracle.states.items():
            check_all_engines(uri, expected, v, what=f"time travel v{v}")
        # another engine reads the same rows
        assert_same_rows(deltalake_table(uri), oracle.table(), what="deltalake")


@SETTINGS
@given(data=st.data(), partitioned=st.booleans())
def test_dml_sequences_deletion_vectors(data: Any, partitioned: bool) -> None:
    _run_sequence(data, "dv", partitioned)


@SETTINGS
@given(data=st.data(), partitioned=st.booleans())
def test_dml_sequences_copy_on_write_table(data: Any, partitioned: bool) -> None:
    _run_sequence(data, "cow_table", partitioned)


@settings(SETTINGS, max_examples=15)
@given(data=st.data(), partitioned=st.booleans())
def test_dml_sequences_deltalake_created_table(data: Any, partitioned: bool) -> None:
    _run_sequence(data, "deltalake", partitioned)


@settings(SETTINGS, max_examples=15)
@given(data=st.data(), partitioned=st.booleans())
def test_dml_sequences_copy_on_write_flag(data: Any, partitioned: bool) -> None:
    _run_sequence(data, "cow_flag", partitioned)


@settings(SETTINGS, max_examples=15)
@given(data=st.data(), partitioned=st.booleans())
def test_dml_sequences_rewrite_threshold(data: Any, partitioned: bool) -> None:
    _run_sequence(data, "threshold", partitioned)


def test_oracle_merge_matches_documented_example() -> None:
    """The oracle's MERGE agrees with the docstring example of lakequery's MERGE."""
    from dmlkit import Clause

    o = Oracle(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), 0)
    o.merge(
        pa.table({"id": [2, 3, 4], "v": ["B", None, "D"]}),
        "t.id = s.id",
        [
            Clause("matched", "delete", "s.v IS NULL", None),
            Clause("matched", "update", None, (("v", "s.v"),)),
            Clause("not_matched", "insert", None, None),
        ],
    )
    assert sorted(o.table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "B"},
        {"id": 4, "v": "D"},
    ]


@settings(SETTINGS, max_examples=25)
@given(data=st.data(), dv=st.booleans())
def test_merge_duplicate_source_keys(data: Any, dv: bool) -> None:
    """A source with duplicate keys: MergeConflictError (and no commit) exactly when a
    target row is matched by several source rows that reach a WHEN MATCHED clause, unless
    that clause is the one matched clause and an unconditional delete; otherwise the
    result equals DuckDB's MERGE."""
    from dmlkit import merge_clauses, merge_sources

    batches = data.draw(row_batches(False, max_batches=2), label="batches")
    with tempfile.TemporaryDirectory(prefix="lq-dml-dup-") as d:
        uri = f"{d}/t"
        config = {} if dv else {"delta.enableDeletionVectors": "false"}
        version = create_table(uri, batches, partitioned=False, configuration=config)
        o = Oracle(pa.concat_tables(batches), version)
        ids = o.table().column("id").to_pylist()
        source = data.draw(merge_sources(ids, False), label="source")
        if source.num_rows:
            dup = data.draw(
                st.lists(st.integers(0, source.num_rows - 1), min_size=1, max_size=4), label="dups"
            )
            extra = source.take(dup)
            extra = extra.set_column(
                1, "a", pa.array([None if i % 2 else 9 for i in range(extra.num_rows)], pa.int64())
            )
            source = pa.concat_tables([source, extra])
        clauses = data.draw(merge_clauses(source.column_names, False), label="clauses")
        matched = [c for c in clauses if c.kind == "matched"]
        conflict = False
        if matched:
            case = " ".join(
                f"WHEN ({c.predicate or 'true'}) THEN {i}" for i, c in enumerate(matched)
            )
            o.con.register("src", source)
            (n,) = o.con.sql(
                f"SELECT count(*) FROM (SELECT t.id FROM t AS t JOIN src AS s ON t.id = s.id "
                f"WHERE (CASE {case} END) IS NOT NULL GROUP BY t.id HAVING count(*) > 1)"
            ).fetchall()[0]
            o.con.unregister("src")
            # Delta's exception: the one matched clause an unconditional delete
            lone_delete = [(c.action, c.predicate) for c in matched] == [("delete", None)]
            conflict = n > 0 and not lone_delete
        event(f"conflict={conflict}")
        dt = lq.DeltaTable(uri)
        if conflict:
            with pytest.raises(lq.MergeConflictError):
                run_merge(dt, source, clauses)
            assert dt.snapshot().version == version
            check_all_engines(uri, o.table())
        else:
            run_merge(dt, source, clauses)
            o.merge(source, "t.id = s.id", clauses)
            check_all_engines(uri, o.table(), what=f"MERGE {clauses}")
