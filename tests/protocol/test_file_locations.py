"""The byte-level fast path of the file-location rule (``all_plain_relative``) against
the exact, regex-based rule it lets replay skip."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

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
