"""The DV-mask kernels agree with their pure-Python reference twins."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from udfs.dv_mask import (
    keep_bits,
    keep_bits_reference,
    keep_mask,
    keep_mask_reference,
    selection_vector,
    selection_vector_reference,
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[int], int, int]:
    """Sorted unique deletions and a (start, n) range placed anywhere around them."""
    base = draw(st.sampled_from([0, 1, 1000, 2**32 - 5, 2**40]))
    deleted = sorted(draw(st.sets(st.integers(base, base + 600), max_size=120)))
    lo = deleted[0] if deleted else base
    hi = deleted[-1] if deleted else base
    start = draw(
        st.one_of(
            st.integers(max(0, lo - 700), lo),  # before or straddling the first deletion
            st.integers(lo, hi + 1),  # among the deletions
            st.integers(hi + 1, hi + 700),  # after all deletions
            st.just(base),
        )
    )
    n = draw(st.one_of(st.just(0), st.just(1), st.integers(0, 900)))
    return deleted, start, n


def _check(deleted: list[int], start: int, n: int) -> None:
    arr = np.array(deleted, dtype=np.int64)
    mask = keep_mask(arr, start, n)
    assert mask.dtype == np.bool_
    assert mask.shape == (n,)
    assert mask.tolist() == keep_mask_reference(deleted, start, n)
    sel = selection_vector(arr, start, n)
    assert sel.dtype == np.int64
    assert sel.tolist() == selection_vector_reference(deleted, start, n)
    # the two kernels describe the same rows
    assert sel.tolist() == np.flatnonzero(mask).tolist()
    gone = set(deleted)
    assert sel.size == sum(1 for k in range(n) if start + k not in gone)


@settings(max_examples=500, deadline=None)
@given(case=cases())
def test_kernels_match_reference_twins(case: tuple[list[int], int, int]) -> None:
    _check(*case)


@pytest.mark.parametrize(
    ("deleted", "start", "n"),
    [
        ([], 0, 0),
        ([], 0, 10),
        ([], 2**40, 3),
        ([5, 6, 7], 0, 0),  # n = 0
        ([5, 6, 7], 6, 0),  # n = 0 inside the deletions
        ([5, 6, 7], 0, 5),  # range ends right before the first deletion
        ([5, 6, 7], 8, 5),  # range starts right after the last deletion
        ([5, 6, 7], 100, 5),  # far after
        ([5, 6, 7], 0, 6),  # straddles the first deletion
        ([5, 6, 7], 7, 3),  # starts on the last deletion
        ([5, 6, 7], 5, 3),  # exactly the deletions: nothing kept
        ([5, 6, 7], 3, 10),  # covers all deletions
        ([0], 0, 1),
        ([0, 1, 2, 3], 0, 4),
        ([2**40, 2**40 + 2], 2**40 - 1, 5),
        ([2**32 - 1, 2**32], 2**32 - 2, 4),  # across a 32-bit boundary
    ],
)
def test_edge_ranges(deleted: list[int], start: int, n: int) -> None:
    _check(deleted, start, n)


def test_documented_examples() -> None:
    assert keep_mask(np.array([1, 3, 10], dtype=np.int64), 0, 5).tolist() == [
        True,
        False,
        True,
        False,
        True,
    ]
    assert selection_vector(np.array([1, 3], dtype=np.int64), 2, 4).tolist() == [0, 2, 3]


def test_accepts_non_contiguous_and_other_integer_dtypes() -> None:
    deleted = np.array([1, 99, 3, 99, 5, 99], dtype=np.int64)[::2]  # a strided view: 1, 3, 5
    assert not deleted.flags["C_CONTIGUOUS"]
    assert keep_mask(deleted, 0, 6).tolist() == keep_mask_reference([1, 3, 5], 0, 6)
    as_uint = np.array([1, 3, 5], dtype=np.uint64)
    assert selection_vector(as_uint, 0, 6).tolist() == [0, 2, 4]  # type: ignore[arg-type]


def test_batches_of_a_file_compose_to_the_whole_file_mask() -> None:
    rng = np.random.default_rng(7)
    total = 10_000
    deleted = np.unique(rng.integers(0, total, 1_500)).astype(np.int64)
    whole = keep_mask(deleted, 0, total)
    pieces = []
    pos = 0
    for size in (1, 127, 4096, 0, 3000, total):
        size = min(size, total - pos)
        pieces.append(keep_mask(deleted, pos, size))
        pos += size
    assert pos == total
    assert np.concatenate(pieces).tolist() == whole.tolist()
    assert int(whole.sum()) == total - deleted.size


@given(st.lists(st.integers(-3, 200), max_size=60), st.integers(0, 190))
@settings(max_examples=300, deadline=None)
def test_keep_bits_matches_reference_and_keep_mask(deleted: list[int], n: int) -> None:
    bits = keep_bits(np.array(deleted, dtype=np.int64), n)
    assert bits.dtype == np.uint8
    assert bits.tobytes() == keep_bits_reference(deleted, n)
    inside = np.unique(np.array([r for r in deleted if 0 <= r < n], dtype=np.int64))
    unpacked = np.unpackbits(bits, bitorder="little")[:n].astype(bool)
    assert unpacked.tolist() == keep_mask(inside, 0, n).tolist()


@given(
    st.sets(st.integers(0, 5_000), max_size=400),
    st.lists(st.integers(1, 700), min_size=1, max_size=12),
)
@settings(max_examples=200, deadline=None)
def test_keep_bits_per_batch_as_the_arrow_engine_masks_a_file(
    deleted: set[int], sizes: list[int]
) -> None:
    """The Arrow engine packs one batch at a time, from the slice of a file's sorted
    deletions that falls in the batch, shifted to the batch's first row; batch sizes need not
    be multiples of 8. Unpacked and concatenated, the batches give the whole file's mask."""
    rows = np.array(sorted(deleted), dtype=np.int64)
    total = sum(sizes)
    pieces = []
    offset = 0
    for n in sizes:
        lo, hi = np.searchsorted(rows, [offset, offset + n])
        bits = keep_bits(rows[lo:hi] - offset, n)
        assert bits.size == (n + 7) // 8
        assert bits.tobytes() == keep_bits_reference([r - offset for r in deleted], n)
        pieces.append(np.unpackbits(bits, bitorder="little")[:n].astype(bool))
        offset += n
    assert np.concatenate(pieces).tolist() == keep_mask_reference(sorted(deleted), 0, total)


def test_keep_bits_of_many_rows_matches_the_reference() -> None:
    rng = np.random.default_rng(11)
    n = 1_000_003
    deleted = rng.integers(-50, n + 50, 20_000)  # unsorted, duplicates, out of range
    assert keep_bits(deleted, n).tobytes() == keep_bits_reference(deleted.tolist(), n)
