"""The dense position bitmap behind the Spark reader's DV filter
(:mod:`lakequery.spark.position_bitmap`): its words and slot table, evaluated the way
the Spark filter evaluates them, against the deleted positions themselves."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakequery.spark import position_bitmap
from lakequery.spark.position_bitmap import PositionBitmap, build, collision_free_modulus


def deleted_by_filter(bitmap: PositionBitmap, size: int, rows: np.ndarray[Any, Any]) -> Any:
    """The Spark filter's arithmetic in numpy: which of ``rows`` of the file of ``size``
    are deleted."""
    slot = int(bitmap.slots[size % bitmap.modulus])
    first, count = slot >> 32, slot & 0xFFFFFFFF
    word_number = rows >> 6
    inside = word_number < count
    words = np.zeros(len(rows), dtype=np.int64)
    words[inside] = bitmap.words[first + word_number[inside]]
    return ((words >> (rows & 63)) & 1) == 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**9),
            st.sets(st.integers(0, 5000), max_size=80),
        ),
        min_size=1,
        max_size=12,
        unique_by=lambda t: t[0],
    )
)
def test_bitmap_marks_exactly_the_deleted_positions(files: list[tuple[int, set[int]]]) -> None:
    sizes = [size for size, _ in files]
    positions = [np.array(sorted(rows), dtype=np.int64) for _, rows in files]
    bitmap = build(sizes, positions)
    assert bitmap is not None
    rows = np.arange(0, 5200, dtype=np.int64)  # past every file's last deleted row
    for size, deleted in files:
        got = set(rows[deleted_by_filter(bitmap, size, rows)].tolist())
        assert got == deleted


def test_words_cover_each_file_up_to_its_last_deleted_row() -> None:
    bitmap = build([100, 7], [np.array([0, 63, 64, 200]), np.array([], dtype=np.int64)])
    assert bitmap is not None
    # 200 >> 6 = 3: four words for the first file, none for the second
    assert len(bitmap.words) == 4
    assert bitmap.words[0] == np.int64(1) | np.left_shift(np.int64(1), 63)
    assert bitmap.words[1] == 1
    assert bitmap.words[3] == np.int64(1) << (200 - 192)
    second = int(bitmap.slots[7 % bitmap.modulus])
    assert second & 0xFFFFFFFF == 0


def test_sizes_that_collide_under_small_moduli_get_their_own_slots() -> None:
    sizes = np.array([10, 20, 30, 40, 50, 60], dtype=np.int64)  # all equal modulo 10
    m = collision_free_modulus(sizes)
    assert m is not None and m >= len(sizes)
    assert len(np.unique(sizes % m)) == len(sizes)


def test_refused_when_sizes_repeat_or_words_exceed_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert build([5, 5], [np.array([1]), np.array([2])]) is None
    monkeypatch.setattr(position_bitmap, "MAX_WORDS", 3)
    assert build([5], [np.array([64 * 3])]) is None  # needs 4 words
    assert build([5], [np.array([64 * 2])]) is not None
