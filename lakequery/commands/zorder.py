"""Clustering keys for Arrow data: columns -> raw keys -> ranks -> Z-order / Hilbert key.

The numba kernels live in :mod:`udfs.zorder`; this module maps Arrow types onto them and
holds the per-partition state (quantile boundaries from a sample) so that every batch of a
partition gets keys on the same scale.

Supported column types: integers, floats, decimals (via their nearest double, which keeps
order), dates, timestamps (with or without zone), strings, binaries and booleans; nulls
sort below every value.

Example:
    >>> import pyarrow as pa
    >>> t = pa.table({"x": [3, 1, 2, None], "s": ["b", "a", "c", "a"]})
    >>> sampler = KeySampler(["x", "s"])
    >>> sampler.add(t)
    >>> keys = sampler.builder("zorder").keys(t)
    >>> [int(i) for i in keys.argsort()]
    [3, 1, 2, 0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lakequery.errors import SchemaError
from udfs.zorder import (
    hilbert_index,
    interleave_bits,
    quantile_boundaries,
    rank_keys,
    raw_keys_binary,
    raw_keys_float64,
    raw_keys_int64,
)

Curve = Literal["zorder", "hilbert"]
#: Raw keys kept per column to choose quantile boundaries.
SAMPLE_SIZE = 1 << 18
#: Upper bound on the boundaries (ranks) per column.
MAX_BOUNDARIES = 1 << 16


def check_clusterable(name: str, typ: pa.DataType) -> None:
    """Raises :class:`SchemaError` when a column of this type cannot be a clustering key."""
    ok = (
        pa.types.is_integer(typ)
        or pa.types.is_floating(typ)
        or pa.types.is_decimal(typ)
        or pa.types.is_date(typ)
        or pa.types.is_timestamp(typ)
        or pa.types.is_boolean(typ)
        or pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_string_view(typ)
        or pa.types.is_binary_view(typ)
    )
    if not ok:
        raise SchemaError(f"cannot cluster by column {name!r} of type {typ}")


def raw_keys(column: Any) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """Order-preserving raw ``uint64`` keys of an Arrow array and its validity mask."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    typ = arr.type
    valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=np.bool_)
    if pa.types.is_dictionary(typ):
        arr = pc.cast(arr, typ.value_type)
        typ = arr.type
    if (
        pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_string_view(typ)
        or pa.types.is_binary_view(typ)
    ):
        big: Any = pc.cast(arr, pa.large_binary())
        big = big.fill_null(b"") if big.null_count else big
        buffers = big.buffers()
        offsets = np.frombuffer(buffers[1], dtype=np.int64)[big.offset : big.offset + len(big) + 1]
        data = (
            np.frombuffer(buffers[2], dtype=np.uint8)
            if buffers[2] is not None
            else np.zeros(0, dtype=np.uint8)
        )
        return raw_keys_binary(offsets, data), valid
    if pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        doubles: Any = pc.cast(arr, pa.float64())
        values = doubles.fill_null(0.0).to_numpy(zero_copy_only=False)
        return raw_keys_float64(values), valid
    if pa.types.is_timestamp(typ) or pa.types.is_date64(typ):
        arr = pc.cast(arr, pa.int64())
    elif pa.types.is_date32(typ):
        arr = pc.cast(pc.cast(arr, pa.int32()), pa.int64())
    elif pa.types.is_boolean(typ):
        arr = pc.cast(arr, pa.int64())
    elif not pa.types.is_integer(typ):
        raise SchemaError(f"cannot cluster by a column of type {typ}")
    ints: Any = pc.cast(arr, pa.int64())
    values = ints.fill_null(0).to_numpy(zero_copy_only=False)
    return raw_keys_int64(values), valid


class KeyBuilder:
    """Turns batches into clustering keys on one fixed scale (per-column boundaries).

    Args:
        columns: clustering columns, most significant first.
        boundaries: sorted distinct raw-key boundaries per column.
        curve: ``"zorder"`` (bit interleaving) or ``"hilbert"``.
    """

    def __init__(
        self,
        columns: Sequence[str],
        boundaries: Sequence[npt.NDArray[np.uint64]],
        curve: Curve = "zorder",
    ) -> None:
        if not columns:
            raise ValueError("at least one clustering column is needed")
        if len(columns) > 64:
            raise ValueError("at most 64 clustering columns")
        if curve not in ("zorder", "hilbert"):
            raise ValueError(f"curve must be 'zorder' or 'hilbert', not {curve!r}")
        self.columns = list(columns)
        self.boundaries = list(boundaries)
        self.curve = curve
        self.bits = 64 // len(self.columns)

    def keys(self, batch: pa.RecordBatch | pa.Table) -> npt.NDArray[np.uint64]:
        """The ``uint64`` clustering key of every row."""
        n = batch.num_rows
        per_column = np.empty((len(self.columns), n), dtype=np.uint64)
        for i, (name, bounds) in enumerate(zip(self.columns, self.boundaries, strict=True)):
            raw, valid = raw_keys(batch.column(name))
            per_column[i] = rank_keys(raw, valid, bounds, self.bits)
        if len(self.columns) == 1:
            single: npt.NDArray[np.uint64] = per_column[0]
            return single
        if self.curve == "hilbert":
            return hilbert_index(per_column, self.bits)
        return interleave_bits(per_column, self.bits)


class KeySampler:
    """Collects a bounded sample of raw keys per column (every ``stride``-th row).

    Args:
        columns: clustering columns.
        expected_rows: rows that will be offered (sets the stride; None: keep all up to
            :data:`SAMPLE_SIZE` per batch).
    """

    def __init__(self, columns: Sequence[str], expected_rows: int | None = None) -> None:
        self.columns = list(columns)
        self.stride = max(1, (expected_rows or 0) // SAMPLE_SIZE)
        self.samples: list[list[npt.NDArray[np.uint64]]] = [[] for _ in self.columns]
        self._offset = 0
        self._kept = 0

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Samples the raw keys of one batch."""
        n = batch.num_rows
        if not n:
            return
        start = (-self._offset) % self.stride
        idx = np.arange(start, n, self.stride, dtype=np.int64)
        self._offset += n
        for i, name in enumerate(self.columns):
            raw, valid = raw_keys(batch.column(name))
            taken = raw[idx][valid[idx]]
            self.samples[i].append(taken)
        self._kept += idx.size
        if self._kept > 4 * SAMPLE_SIZE:  # more rows than expected: thin the sample
            for i in range(len(self.columns)):
                merged = np.concatenate(self.samples[i]) if self.samples[i] else np.zeros(0)
                self.samples[i] = [merged[::2].astype(np.uint64)]
            self._kept //= 2
            self.stride *= 2

    def builder(self, curve: Curve = "zorder") -> KeyBuilder:
        """A :class:`KeyBuilder` whose boundaries are quantiles of the sample."""
        bits = 64 // max(1, len(self.columns))
        limit = min(MAX_BOUNDARIES, (1 << min(bits, 62)) - 2) if bits > 1 else 1
        bounds = []
        for parts in self.samples:
            sample = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
            bounds.append(quantile_boundaries(sample.astype(np.uint64), max(1, limit)))
        return KeyBuilder(self.columns, bounds, curve)


def best_cut(previous: int | None, keys: npt.NDArray[np.uint64], lo: int, hi: int) -> int:
    """Where to end a file inside rows ``lo .. hi`` of sorted ``keys``: the first row
    whose key leaves the largest aligned cell of the curve (the highest bit in which it
    differs from the row before), so that files cover whole cells, i.e. compact boxes.

    Args:
        previous: the key of the row before ``keys[0]`` (None: none).
        keys: sorted clustering keys.
        lo, hi: the allowed range of the cut (``keys[:cut]`` ends the file).

    Example:
        >>> k = np.array([0b0001, 0b0010, 0b0111, 0b1000, 0b1001], dtype=np.uint64)
        >>> best_cut(None, k, 1, 5)   # 0111 -> 1000 changes the highest bit
        3
    """
    lo = max(lo, 0 if previous is not None else 1)
    hi = min(hi, keys.size)
    if hi <= lo:
        return max(1, min(keys.size, hi))
    before = (
        keys[lo - 1 : hi - 1]
        if lo > 0
        else np.concatenate([np.array([previous], dtype=np.uint64), keys[: hi - 1]])
    )
    change = np.bitwise_xor(before, keys[lo:hi])
    # compare by the highest differing bit only; the first such row wins
    return lo + int(np.argmax(highest_bit(change)))


def highest_bit(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Index of the highest set bit of each value (-1 for 0), exactly.

    Example:
        >>> highest_bit(np.array([0, 1, 2, 3, 2**64 - 1], dtype=np.uint64)).tolist()
        [-1, 0, 1, 1, 63]
    """
    x = np.array(values, dtype=np.uint64)
    level = np.where(x > 0, 0, -1).astype(np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = x >= (np.uint64(1) << np.uint64(shift))
        level[big] += shift
        x[big] >>= np.uint64(shift)
    return level


__all__ = [
    "Curve",
    "KeyBuilder",
    "KeySampler",
    "best_cut",
    "check_clusterable",
    "highest_bit",
    "raw_keys",
]
