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

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
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
    uint64_output,
)

if TYPE_CHECKING:
    import numpy.typing as npt

Curve = Literal["zorder", "hilbert"]
#: Raw keys kept per column to choose quantile boundaries.
SAMPLE_SIZE = 1 << 18
#: Upper bound on the boundaries (ranks) per column: 4096 ranks per column are far finer
#: than any file layout needs, and the boundary array stays in the L1 cache.
MAX_BOUNDARIES = 1 << 12


def _is_bytes(typ: pa.DataType) -> bool:
    """Strings and binaries in any Arrow layout (keyed by their leading bytes)."""
    return (
        pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_string_view(typ)
        or pa.types.is_binary_view(typ)
    )


def check_clusterable(name: str, typ: pa.DataType) -> None:
    """Raises :class:`SchemaError` when a column of this type cannot be a clustering key."""
    ok = (
        pa.types.is_integer(typ)
        or pa.types.is_floating(typ)
        or pa.types.is_decimal(typ)
        or pa.types.is_date(typ)
        or pa.types.is_timestamp(typ)
        or pa.types.is_boolean(typ)
        or _is_bytes(typ)
    )
    if not ok:
        raise SchemaError(f"cannot cluster by column {name!r} of type {typ}")


def raw_keys(
    column: Any, out: npt.NDArray[np.uint64] | None = None
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """Order-preserving raw ``uint64`` keys of an Arrow array and its validity mask.

    A chunked column is keyed chunk by chunk into one array (``out`` when given: a
    contiguous ``uint64`` array of one slot per row), without concatenating the chunks
    first.

    Example:
        >>> keys, valid = raw_keys(pa.chunked_array([[3, None], [-1]]))
        >>> int(keys[2]) < int(keys[0]), valid.tolist()
        (True, [True, False, True])
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = uint64_output(sum(len(c) for c in chunks), out)
    valid = np.ones(out.size, dtype=np.bool_)
    start = 0
    for chunk in chunks:
        end = start + len(chunk)
        if chunk.null_count:
            valid[start:end] = pc.is_valid(chunk).to_numpy(zero_copy_only=False)
        _raw_chunk(chunk, out[start:end])
        start = end
    return out, valid


def _raw_chunk(arr: Any, out: npt.NDArray[np.uint64]) -> None:
    typ = arr.type
    if pa.types.is_dictionary(typ):
        arr = pc.cast(arr, typ.value_type)
        typ = arr.type
    if _is_bytes(typ):
        big: Any = pc.cast(arr, pa.large_binary())
        big = big.fill_null(b"") if big.null_count else big
        buffers = big.buffers()
        offsets = np.frombuffer(buffers[1], dtype=np.int64)[big.offset : big.offset + len(big) + 1]
        data = (
            np.frombuffer(buffers[2], dtype=np.uint8)
            if buffers[2] is not None
            else np.zeros(0, dtype=np.uint8)
        )
        raw_keys_binary(offsets, data, out=out)
        return
    if pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        doubles: Any = pc.cast(arr, pa.float64())
        raw_keys_float64(doubles.fill_null(0.0).to_numpy(zero_copy_only=False), out=out)
        return
    if pa.types.is_timestamp(typ) or pa.types.is_date64(typ):
        arr = pc.cast(arr, pa.int64())
    elif pa.types.is_date32(typ):
        arr = pc.cast(pc.cast(arr, pa.int32()), pa.int64())
    elif pa.types.is_boolean(typ):
        arr = pc.cast(arr, pa.int64())
    elif not pa.types.is_integer(typ):
        raise SchemaError(f"cannot cluster by a column of type {typ}")
    ints: Any = pc.cast(arr, pa.int64())
    raw_keys_int64(ints.fill_null(0).to_numpy(zero_copy_only=False), out=out)


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
        return self.keys_from_raw([raw_keys(batch.column(name)) for name in self.columns])

    def keys_from_raw(
        self, raws: Sequence[tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]]
    ) -> npt.NDArray[np.uint64]:
        """Keys from the (raw keys, validity) of each column (see :func:`raw_keys`)."""
        n = raws[0][0].size if raws else 0
        per_column = np.empty((len(self.columns), n), dtype=np.uint64)
        for i, ((raw, valid), bounds) in enumerate(zip(raws, self.boundaries, strict=True)):
            rank_keys(raw, valid, bounds, self.bits, out=per_column[i])
        return self.combine(per_column)

    def combine(self, per_column: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """One curve key per row from the ``(columns, rows)`` per-column keys, written over
        the first column's keys (a view of ``per_column``): no new array."""
        if len(self.columns) == 1:
            single: npt.NDArray[np.uint64] = per_column[0]
            return single
        if self.curve == "hilbert":
            return hilbert_index(per_column, self.bits, out=per_column[0])
        return interleave_bits(per_column, self.bits, out=per_column[0])


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
        limit = _boundary_limit(len(self.columns))
        bounds = []
        for parts in self.samples:
            sample = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
            bounds.append(quantile_boundaries(sample.astype(np.uint64), limit))
        return KeyBuilder(self.columns, bounds, curve)


def _boundary_limit(columns: int) -> int:
    bits = 64 // max(1, columns)
    return max(1, min(MAX_BOUNDARIES, (1 << min(bits, 62)) - 2) if bits > 1 else 1)


def table_keys(
    table: pa.Table, columns: Sequence[str], curve: Curve = "zorder"
) -> npt.NDArray[np.uint64]:
    """Clustering keys of a whole in-memory table in one pass: raw keys once per column,
    boundaries from every ``stride``-th of them, then ranks and the curve.

    Example:
        >>> t = pa.table({"a": [5, 1, 3], "b": [0.5, 0.1, 0.9]})
        >>> [int(i) for i in table_keys(t, ["a", "b"]).argsort()]
        [1, 2, 0]
    """
    stride = max(1, table.num_rows // SAMPLE_SIZE)
    limit = _boundary_limit(len(columns))
    builder = KeyBuilder(columns, [np.zeros(0, np.uint64)] * len(columns), curve)
    per_column = np.empty((len(columns), table.num_rows), dtype=np.uint64)

    def one(i: int) -> None:  # the kernels release the GIL: columns run in parallel
        # raw keys, then their ranks, in the column's row of per_column: no other array
        raw, valid = raw_keys(table.column(columns[i]), out=per_column[i])
        bounds = quantile_boundaries(raw[::stride][valid[::stride]], limit)
        rank_keys(raw, valid, bounds, builder.bits, out=raw)

    with ThreadPoolExecutor(min(len(columns), os.cpu_count() or 1)) as pool:
        list(pool.map(one, range(len(columns))))
    return builder.combine(per_column)


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
    # the largest XOR has the highest differing bit: the coarsest cell boundary
    return lo + int(np.argmax(change))


def file_bounds(
    keys: npt.NDArray[np.uint64], rows_per_file: int, slack: float = 0.3
) -> list[tuple[int, int]]:
    """``(start, end)`` row ranges of sorted ``keys`` for files of about
    ``rows_per_file`` rows, each ended by :func:`best_cut`.

    Example:
        >>> file_bounds(np.arange(10, dtype=np.uint64), 4)
        [(0, 4), (4, 8), (8, 10)]
    """
    n = keys.size
    lo = max(1, int(rows_per_file * (1 - slack)))
    hi = max(lo + 1, int(rows_per_file * (1 + slack)))
    out = []
    start = 0
    while n - start > hi:
        previous = int(keys[start - 1]) if start else None
        cut = start + best_cut(previous, keys[start : start + hi], lo, hi)
        out.append((start, cut))
        start = cut
    if start < n:
        out.append((start, n))
    return out


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
    "file_bounds",
    "highest_bit",
    "raw_keys",
    "table_keys",
]
