"""Deletion-vector masks: sorted deleted row indexes -> which rows of a range to keep.

Plain numpy (vectorised set/pack/search), each with a plain-Python twin (``*_reference``)
that the property tests hold it to. These used to be numba kernels; numpy does the same
job within a fraction of a millisecond per 10M rows, and leaving numba off the read path
saves every new process (a script, a Spark Python worker) importing numba and loading or
compiling the kernels, about 0.7 s (ARCHITECTURE.md, "Start-up cost: imports and numba").

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

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt


def _int64(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    return np.ascontiguousarray(values, dtype=np.int64)


def _in_range(deleted: npt.NDArray[np.int64], start: int, n: int) -> npt.NDArray[np.int64]:
    """The sorted deleted indexes inside ``start .. start+n-1``, as offsets from ``start``."""
    lo, hi = np.searchsorted(deleted, (start, start + n))
    return deleted[lo:hi] - start


def rows_kept(deleted: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """For arbitrary (unsorted) row positions: True where the row is not deleted."""
    gone = _int64(deleted)
    probe = _int64(rows)
    if gone.size == 0:
        return np.ones(probe.size, dtype=np.bool_)
    at = np.minimum(np.searchsorted(gone, probe), gone.size - 1)
    kept: npt.NDArray[np.bool_] = gone[at] != probe
    return kept


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
    mask = np.ones(int(n), dtype=np.bool_)
    mask[_in_range(_int64(deleted), int(start), int(n))] = False
    return mask


def keep_bits(deleted: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.uint8]:
    """:func:`keep_mask` over rows ``0 .. n-1`` packed 8 rows a byte, least significant
    bit first (Arrow's boolean layout); bits past ``n`` are set. Deleted indexes need not
    be sorted; those outside the range are ignored."""
    n = int(n)
    gone = _int64(deleted)
    gone = gone[(gone >= 0) & (gone < n)]
    # a byte per row, then packed: as fast as setting bits one by one in numba (packbits
    # is vectorised), and a few hundred microseconds per 10M rows
    mask = np.ones((n + 7) // 8 * 8, dtype=np.bool_)
    mask[gone] = False
    bits: npt.NDArray[np.uint8] = np.packbits(mask, bitorder="little")
    return bits


def keep_bits_reference(deleted: list[int], n: int) -> bytes:
    """Plain-Python twin of :func:`keep_bits`."""
    out = bytearray(b"\xff" * ((n + 7) // 8))
    for r in set(deleted):
        if 0 <= r < n:
            out[r // 8] &= 0xFF ^ (1 << (r % 8))
    return bytes(out)


def selection_vector(deleted: npt.NDArray[np.int64], start: int, n: int) -> npt.NDArray[np.int64]:
    """Offsets (0-based within the range) of the rows that survive, ascending."""
    return np.flatnonzero(keep_mask(deleted, start, n)).astype(np.int64, copy=False)


def keep_mask_reference(deleted: list[int], start: int, n: int) -> list[bool]:
    """Plain-Python twin of :func:`keep_mask`."""
    gone = set(deleted)
    return [start + k not in gone for k in range(n)]


def selection_vector_reference(deleted: list[int], start: int, n: int) -> list[int]:
    """Plain-Python twin of :func:`selection_vector`."""
    gone = set(deleted)
    return [k for k in range(n) if start + k not in gone]
