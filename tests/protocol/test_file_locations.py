"""The byte-level fast path of the file-location rule (``all_plain_relative``) against
the exact, regex-based rule it lets replay skip, and how often a load and its scans run
it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakequery as lq
from lakequery.log_update import forget
from lakequery.protocol.file_locations import all_plain_relative, external_mask, refusals

# Characters that matter to the rule, plus ordinary ones and a multi-byte one.
_CHARS = st.sampled_from([*"ab=/.:%-_", "é", "\u20ac"])
_KEY = st.text(_CHARS, max_size=12)


@settings(max_examples=400, deadline=None)
@given(st.lists(_KEY, min_size=1, max_size=8), st.integers(0, 3), st.sampled_from(["s", "ls"]))
def test_fast_path_never_hides_a_refusal_or_an_external_key(
    keys: list[str], cut: int, kind: str
) -> None:
    arr = pa.array(keys, pa.string() if kind == "s" else pa.large_string())
    sliced = arr.slice(min(cut, len(keys) - 1))  # non-zero offsets into the buffers
    chunked = pa.chunked_array([sliced, arr])
    for value in (sliced, chunked):
        if all_plain_relative(value):
            assert pc.sum(pc.cast(external_mask(value), pa.int64())).as_py() in (0, None)
            assert refusals("/root", value).null_count == len(value)


def test_fast_path_says_plain_for_ordinary_keys_only() -> None:
    plain = ["a=1/b=x/part-0.c000.zstd.parquet", "p.parquet", "d/é €.parquet", "a.b/c.d"]
    assert all_plain_relative(pa.array(plain))
    assert all_plain_relative(pa.chunked_array([pa.array(plain), pa.array([], pa.string())]))
    for bad in ["", "/abs/p", "s3://b/p", "file:/x", "d/", "a/../p", "..", "x..y"]:
        assert not all_plain_relative(pa.array([*plain, bad])), bad
    assert not all_plain_relative(pa.array(["p", None]))  # nulls go to the exact rule
    assert not all_plain_relative(pa.array([b"p"], pa.binary()))  # other types too


def test_a_load_looks_at_its_paths_once_and_scans_reuse_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full load runs the byte-level pass once for its path and link checks and keeps
    the answer (``TableState.plain_paths``); its scans' locations then need no pass. A
    shallow clone's absolute paths, or an update adding such a path, make it False, and
    the locations are still right."""
    from lakequery.protocol import file_locations

    uri = str(tmp_path / "t")
    for i in range(3):
        lq.write(uri, pa.table({"p": [i % 2], "x": [i]}), partition_by=["p"], mode="append")
    calls: list[int] = []
    real = file_locations.all_plain_relative

    def counted(keys: Any) -> bool:
        calls.append(len(keys))
        return real(keys)

    monkeypatch.setattr(file_locations, "all_plain_relative", counted)
    forget(lq.DeltaTable(uri).storage)  # a full load, not an update of the writes' state
    snap = lq.DeltaTable(uri).snapshot()
    assert snap._state.plain_paths is True
    assert calls == [3]  # the path check and the link check share one pass
    plan = snap.scan(filter="p = 1").plan()
    assert calls == [3]  # the plan's locations reuse it
    assert sorted(plan.location_list) == sorted(
        str(Path(uri) / p) for p in plan.files.column("path").to_pylist()
    )

    clone = str(tmp_path / "clone")
    lq.DeltaTable(uri).clone(clone)
    cloned = lq.DeltaTable(clone).snapshot()
    assert cloned._state.plain_paths is False
    assert sorted(cloned.scan().plan().location_list) == sorted(snap.scan().plan().location_list)
    assert lq.DeltaTable(clone).snapshot().scan().to_arrow().num_rows == 3

    # an incremental update keeps the answer only while the new adds are plain too
    updated = lq.DeltaTable(uri)
    first = updated.snapshot()
    lq.write(uri, pa.table({"p": [5], "x": [5]}), mode="append")
    assert updated.snapshot().version == first.version + 1
    assert updated.snapshot()._state.plain_paths is True
    table = lq.DeltaTable(clone)
    table.snapshot()
    lq.write(clone, pa.table({"p": [6], "x": [6]}), mode="append")
    assert table.snapshot()._state.plain_paths is False  # the clone's own files stay absolute


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEY, max_size=8), st.sampled_from(["s", "ls"]), st.booleans())
def test_short_and_long_lists_get_the_same_locations(
    keys: list[str], kind: str, chunked: bool
) -> None:
    """A short list of plain keys is prefixed as Python strings, a long one by an Arrow
    kernel: the same locations, for any keys and string type."""
    from lakequery import arrow_kernels
    from lakequery.protocol.file_locations import file_locations

    arr = pa.array(keys, pa.string() if kind == "s" else pa.large_string())
    value: Any = pa.chunked_array([arr], arr.type) if chunked else arr
    short = file_locations("/root", value)
    saved = arrow_kernels.FEW_ROWS
    arrow_kernels.FEW_ROWS = -1
    try:
        long = file_locations("/root", value)
    finally:
        arrow_kernels.FEW_ROWS = saved
    assert short.to_pylist() == long.to_pylist()
    if all_plain_relative(arr):
        assert short.to_pylist() == [f"/root/{k}" for k in keys]
