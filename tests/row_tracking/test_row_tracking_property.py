"""Property: over random command sequences (append, DELETE with deletion vectors or
copy-on-write, UPDATE, MERGE, OPTIMIZE) every surviving row keeps its row id, ids stay
unique, commit versions say when each row last changed, and ``deltalake`` reads the same
rows after every command. Rows are tracked by a unique ``key`` column."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rtkit import COW, DVS, check_invariants, deltalake_rows, high_water_mark, rows, tracked

import lakequery as lq

SETTINGS = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

COMMAND = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.integers(0, 6), st.booleans()),
    st.tuples(st.just("update"), st.integers(0, 6), st.booleans()),
    st.tuples(st.just("merge"), st.integers(0, 6), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("optimize"), st.booleans()),
    st.tuples(st.just("restore"), st.integers(1, 3)),
)


class Model:
    """key -> (row id, commit version, v) as the protocol says they must be."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.rows: dict[int, tuple[int | None, int, int]] = {}
        self.next_key = 0
        self.history: dict[int, dict[int, tuple[int | None, int, int]]] = {}

    def new_keys(self, n: int) -> list[int]:
        keys = list(range(self.next_key, self.next_key + n))
        self.next_key += n
        return keys

    def pick(self, modulus: int) -> list[int]:
        """Existing keys with key % 7 == modulus (a deterministic subset)."""
        return sorted(k for k in self.rows if k % 7 == modulus)

    def check(self, mark_before: int) -> None:
        got = tracked(self.uri)
        assert set(got) == set(self.rows), "the live keys differ"
        ids = [i for i, _ in got.values()]
        assert len(set(ids)) == len(ids), "row ids repeat"
        for key, (row_id, version, _) in self.rows.items():
            got_id, got_version = got[key]
            if row_id is None:  # a new row: a fresh id, above every id handed out before
                assert got_id > mark_before, (key, got_id, mark_before)
                self.rows[key] = (got_id, version, self.rows[key][2])
            else:
                assert got_id == row_id, f"key {key} changed id {row_id} -> {got_id}"
            assert got_version == version, f"key {key}: version {got_version} != {version}"
        assert deltalake_rows(self.uri) == {k: v for k, (_, _, v) in self.rows.items()}
        check_invariants(self.uri)
        self.history[lq.DeltaTable(self.uri).snapshot().version] = dict(self.rows)


def _run(model: Model, command: tuple[Any, ...]) -> None:
    dt = lq.DeltaTable(model.uri)
    version = dt.snapshot().version + 1
    kind = command[0]
    if kind == "append":
        keys = model.new_keys(command[1])
        lq.write(model.uri, rows(keys), mode="append")
        model.rows |= {k: (None, version, 0) for k in keys}
    elif kind == "delete":
        keys = model.pick(command[1])
        m = dt.delete(f"key % 7 = {command[1]}", copy_on_write=command[2])
        assert m.num_deleted_rows == len(keys)
        for k in keys:
            del model.rows[k]
    elif kind == "update":
        keys = model.pick(command[1])
        m = dt.update(f"key % 7 = {command[1]}", set={"v": "v + 1"}, copy_on_write=command[2])
        assert m.num_updated_rows == len(keys)
        for k in keys:
            row_id, _, v = model.rows[k]
            model.rows[k] = (row_id, version, v + 1)
    elif kind == "merge":
        matched = model.pick(command[1])
        inserted = model.new_keys(command[2])
        source = rows(matched + inserted, value=50)
        (
            dt.merge(
                source,
                on="t.key = s.key",
                source_alias="s",
                target_alias="t",
                copy_on_write=command[3],
            )
            .when_matched_update(set={"v": "t.v + s.v"})
            .when_not_matched_insert_all()
            .execute()
        )
        for k in matched:
            row_id, _, v = model.rows[k]
            model.rows[k] = (row_id, version, v + 50)
        model.rows |= {k: (None, version, 50) for k in inserted}
    elif kind == "optimize":
        dt.optimize(z_order_by=["v"] if command[1] else None)
    else:  # RESTORE brings back the rows with the ids and versions they had then
        target = max(0, version - 1 - command[1])
        if dt.restore(version=target).version is not None:
            model.rows = dict(model.history[target])


@SETTINGS
@given(
    cow_table=st.booleans(),
    first=st.integers(1, 6),
    commands=st.lists(COMMAND, min_size=1, max_size=6),
)
def test_row_ids_survive_random_commands(
    cow_table: bool, first: int, commands: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "t")
        model = Model(uri)
        keys = model.new_keys(first)
        lq.write(uri, rows(keys), configuration=COW if cow_table else DVS)
        model.rows = {k: (None, 0, 0) for k in keys}
        model.check(-1)
        for command in commands:
            mark = high_water_mark(uri)
            _run(model, command)
            model.check(mark)
