"""Deletion-vector masks: sorted deleted row indexes -> which rows of a range to keep.

The numba kernels are the hot path; ``*_reference`` are their plain-Python twins, kept
for the property tests that hold the two together.

Example:
    >>> import numpy as np
    >>> keep_mask(np.array([1, 3, 10], dtype=np.int64), 0, 5).tolist()
    [True, False, True, False, True]
    >>> selection_vector(np.array([1, 3], dtype=np.int64), 2, 4).tolist()
    [0, 2, 3]
    >>> [f"{b:08b}" for b in keep_bits(np.array([1, 3], dtype=np.int64), 5)]  # row 0 = bit 0
    ['11110101']
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True, nogil=True)  # type: ignore[misc,untyped-decorator]
def _keep_mask(deleted: npt.NDArray[np.int64], start: int, n: int) -> npt.NDArray[np.bool_]:
    mask = np.ones(n, dtype=np.bool_)
    i = np.searchsorted(deleted, start)
    end = start + n
    while i < deleted.size:
        r = deleted[i]
        if r >= end:
            break
        mask[r - start] = False
        i += 1
    return mask


@njit(cache=True, nogil=True)  # type: ignore[misc,untyped-decorator]
def _selection_vector(deleted: npt.NDArray[np.int64], start: int, n: int) -> npt.NDArray[np.int64]:
    lo = np.searchsorted(deleted, start)
    hi = np.searchsorted(deleted, start + n)
    out = np.empty(n - (hi - lo), dtype=np.int64)
    j = 0
    i = lo
    for k in range(n):
        if i < hi and deleted[i] == start + k:
            i += 1
            continue
        out[j] = k
        j += 1
    return out


@njit(cache=True, nogil=True)  # type: ignore[misc,untyped-decorator]
def _keep_bits(deleted: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.uint8]:
    out = np.full((n + 7) // 8, 0xFF, dtype=np.uint8)
    for r in deleted:
        if 0 <= r < n:
            out[r >> 3] &= np.uint8(0xFF ^ (1 << (r & 7)))
    return out


@njit(cache=True, nogil=True)  # type: ignore[misc,untyped-decorator]
def _rows_kept(
    deleted: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    out = np.empty(rows.size, dtype=np.bool_)
    for k in range(rows.size):
        i = np.searchsorted(deleted, rows[k])
        out[k] = not (i < deleted.size and deleted[i] == rows[k])
    return out


def rows_kept(deleted: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """For arbitrary (unsorted) row positions: True where the row is not deleted."""
    return _rows_kept(  # type: ignore[no-any-return]
        np.ascontiguousarray(deleted, dtype=np.int64), np.ascontiguousarray(rows, dtype=np.int64)
    )


def rows_kept_reference(deleted: list[int], rows: list[int]) -> list[bool]:
    """Plain-Python twin of :func:`rows_kept`."""
    gone = set(deleted)
    return [r not in gone for r in rows]


def keep_mask(deleted: npt.NDArray[np.int64], start: int, n: int) -> npt.NDArray[np.bool_]:
    """Boolean mask over rows ``start .. start+n-1``: False where the row is deleted.

    Args:
        deleted: sorted, unique deleted row indexes (int64).
        start: file row index of the first row of the range.
        n: number of rows in the range.
    """
    return _keep_mask(np.ascontiguousarray(deleted, dtype=np.int64), int(start), int(n))  # type: ignore[no-any-return]


def keep_bits(deleted: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.uint8]:
    """:func:`keep_mask` over rows ``0 .. n-1`` packed 8 rows a byte, least significant
    bit first (Arrow's boolean layout); bits past ``n`` are set. Deleted indexes need not
    be sorted; those outside the range are ignored."""
    return _keep_bits(np.ascontiguousarray(deleted, dtype=np.int64), int(n))  # type: ignore[no-any-return]


def keep_bits_reference(deleted: list[int], n: int) -> bytes:
    """Plain-Python twin of :func:`keep_bits`."""
    out = bytearray(b"\xff" * ((n + 7) // 8))
    for r in set(deleted):
        if 0 <= r < n:
            out[r // 8] &= 0xFF ^ (1 << (r % 8))
    return bytes(out)


def selection_vector(deleted: npt.NDArray[np.int64], start: int, n: int) -> npt.NDArray[np.int64]:
    """Offsets (0-based within the range) of the rows that survive, ascending."""
    return _selection_vector(np.ascontiguousarray(deleted, dtype=np.int64), int(start), int(n))  # type: ignore[no-any-return]


def keep_mask_reference(deleted: list[int], start: int, n: int) -> list[bool]:
    """Plain-Python twin of :func:`keep_mask`."""
    gone = set(deleted)
    return [start + k not in gone for k in range(n)]


def selection_vector_reference(deleted: list[int], start: int, n: int) -> list[int]:
    """Plain-Python twin of :func:`selection_vector`."""
    gone = set(deleted)
    return [k for k in range(n) if start + k not in gone]
