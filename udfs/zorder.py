"""Clustering keys: column values -> order-preserving 64-bit keys -> Z-order / Hilbert index.

Three steps, each a numba kernel (compiled once per machine, see :mod:`udfs.numba_cache`)
with a plain-Python reference twin (``*_reference``):

1. **Raw keys** (:func:`raw_keys_int64`, :func:`raw_keys_float64`,
   :func:`raw_keys_binary`): every value becomes a ``uint64`` whose unsigned order
   follows the value order (``a < b`` implies ``key(a) <= key(b)``). Signed integers
   flip the sign bit; floats use the IEEE-754 total-order trick; strings and binaries
   take their first 8 bytes big-endian (longer common prefixes tie).
2. **Rank normalisation** (:func:`rank_keys`): raw keys are replaced by their rank among
   quantile boundaries taken from a sample of the column, scaled to ``bits`` bits. A
   column whose values span a narrow range (or are skewed) still spreads over every key
   bit; nulls take rank 0, below every value.
3. **Curves** (:func:`interleave_bits`, :func:`hilbert_index`): the per-column keys of
   ``d`` columns (``bits = 64 // d`` each) become one ``uint64`` by interleaving their
   bits (Z-order, column 0 most significant) or by the position along a ``d``-dimensional
   Hilbert curve (Skilling's transpose method), which has no long jumps.

Sorting rows by the final key clusters them so that each run of rows covers a compact box
of the columns' value space, which is what makes min/max file skipping work on several
columns at once.

Example:
    >>> import numpy as np
    >>> raw = raw_keys_int64(np.array([-5, 0, 7], dtype=np.int64))
    >>> bool(raw[0] < raw[1] < raw[2])
    True
    >>> bounds = quantile_boundaries(raw, 16)
    >>> keys = rank_keys(raw, np.ones(3, dtype=np.bool_), bounds, 8)
    >>> keys.tolist()
    [102, 153, 204]
    >>> interleave_bits(np.array([[1], [0]], dtype=np.uint64), 1).tolist()
    [2]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from udfs.numba_cache import kernel

_SIGN = np.uint64(1 << 63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


# --- 1. raw order-preserving keys ----------------------------------------------------------------


@kernel
def _raw_int64(
    values: npt.NDArray[np.int64], out: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    sign = np.uint64(1) << np.uint64(63)
    for i in range(values.size):
        out[i] = np.uint64(values[i]) ^ sign
    return out


@kernel
def _raw_float64(
    bits: npt.NDArray[np.uint64], out: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    sign = np.uint64(1) << np.uint64(63)
    for i in range(bits.size):
        b = bits[i]
        if b & sign:
            out[i] = ~b
        else:
            out[i] = b | sign
    return out


@kernel
def _raw_binary(
    offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8], out: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    n = offsets.size - 1
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        key = np.uint64(0)
        for j in range(8):
            key = key << np.uint64(8)
            if j < length:
                key = key | np.uint64(data[start + j])
        out[i] = key
    return out


def uint64_output(size: int, out: npt.NDArray[np.uint64] | None) -> npt.NDArray[np.uint64]:
    """``out`` checked to be a contiguous ``uint64`` array of ``size`` values, or a new
    one: where every kernel here may write its keys."""
    if out is None:
        return np.empty(size, dtype=np.uint64)
    if out.dtype != np.uint64 or out.shape != (size,) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a contiguous uint64 array of {size} values")
    return out


def raw_keys_int64(
    values: npt.NDArray[np.int64], out: npt.NDArray[np.uint64] | None = None
) -> npt.NDArray[np.uint64]:
    """Order-preserving ``uint64`` keys of signed 64-bit integers (sign bit flipped),
    written to ``out`` when given (for every function here: a contiguous ``uint64`` array
    of one slot per value; default a new one).

    Example:
        >>> raw_keys_int64(np.array([-1, 0], dtype=np.int64)).tolist()
        [9223372036854775807, 9223372036854775808]
    """
    values = np.ascontiguousarray(values, dtype=np.int64)
    return _raw_int64(values, uint64_output(values.size, out))  # type: ignore[no-any-return]


def raw_keys_float64(
    values: npt.NDArray[np.float64], out: npt.NDArray[np.uint64] | None = None
) -> npt.NDArray[np.uint64]:
    """Order-preserving ``uint64`` keys of doubles (negative values bit-inverted, the
    others get the sign bit); ``-0.0`` sorts just below ``0.0`` and NaN above ``+inf``.

    Example:
        >>> k = raw_keys_float64(np.array([-2.5, -0.0, 0.0, 1.0, np.inf], dtype=np.float64))
        >>> k.tolist() == sorted(set(k.tolist()))
        True
    """
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    return _raw_float64(bits, uint64_output(bits.size, out))  # type: ignore[no-any-return]


def raw_keys_binary(
    offsets: npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    out: npt.NDArray[np.uint64] | None = None,
) -> npt.NDArray[np.uint64]:
    """Keys of strings/binaries given Arrow offsets and data: the first 8 bytes,
    big-endian, zero-padded (so ``"ab" < "abc"`` gives ``key("ab") <= key("abc")``).

    Example:
        >>> raw_keys_binary(np.array([0, 1, 3], dtype=np.int64),
        ...                 np.frombuffer(b"abc", dtype=np.uint8)).tolist()[0] >> 56
        97
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    return _raw_binary(  # type: ignore[no-any-return]
        offsets,
        np.ascontiguousarray(data, dtype=np.uint8),
        uint64_output(max(0, offsets.size - 1), out),
    )


def raw_key_int64_reference(value: int) -> int:
    """Plain-Python twin of :func:`raw_keys_int64` for one value."""
    return (value + (1 << 63)) & ((1 << 64) - 1)


def raw_key_float64_reference(value: float) -> int:
    """Plain-Python twin of :func:`raw_keys_float64` for one value."""
    import struct

    bits: int = struct.unpack("<Q", struct.pack("<d", value))[0]
    if bits >> 63:
        return (~bits) & ((1 << 64) - 1)
    return bits | (1 << 63)


def raw_key_binary_reference(value: bytes) -> int:
    """Plain-Python twin of :func:`raw_keys_binary` for one value."""
    return int.from_bytes(value[:8].ljust(8, b"\0"), "big")


# --- 2. rank normalisation -----------------------------------------------------------------------


def quantile_boundaries(
    sample: npt.NDArray[np.uint64], max_boundaries: int
) -> npt.NDArray[np.uint64]:
    """Up to ``max_boundaries`` distinct raw keys at evenly spaced quantiles of a sample.

    Example:
        >>> quantile_boundaries(np.array([5, 1, 1, 1, 9], dtype=np.uint64), 3).tolist()
        [1, 9]
    """
    values = np.array(sample, dtype=np.uint64)  # a contiguous copy, sorted in place
    sort_keys(values)
    if values.size == 0:
        return values
    if values.size > max_boundaries:
        idx = np.linspace(0, values.size - 1, max(1, max_boundaries)).astype(np.int64)
        values = values[idx]
    return np.unique(values)


#: A bucket with more boundaries than this gets sub-buckets (see :func:`_rank_keys`).
HEAVY = 8


@kernel
def _rank_keys(
    raw: npt.NDArray[np.uint64],
    valid: npt.NDArray[np.bool_],
    bounds: npt.NDArray[np.uint64],
    bits: int,
    out: npt.NDArray[np.uint64],
) -> npt.NDArray[np.uint64]:
    levels = np.uint64(bounds.size + 2)  # null, below the first boundary .. at/above the last
    small = bits <= 40
    scale = np.uint64(1) << np.uint64(bits) if small else np.uint64(0)
    step = np.uint64(0)
    if not small:
        top = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - bits)
        step = top // levels
    # A bucket table over the boundaries' range narrows each search to the boundaries of
    # one bucket (numba's generic searchsorted is several times slower). A bucket holding
    # more than HEAVY boundaries (skewed values: floats, whose raw keys spread by
    # exponent) gets a second table of 256 sub-buckets, so that most searches end in a
    # step or two instead of ~5 mispredicted ones (normal doubles: 52 -> 14 ms for 2M).
    nb = bounds.size
    first = bounds[0] if nb else np.uint64(0)
    last = bounds[nb - 1] if nb else np.uint64(0)
    span = last - first
    bits_used = 0
    while bits_used < 64 and (span >> np.uint64(bits_used)) >= np.uint64(1 << 16):
        bits_used += 1
    shift = np.uint64(bits_used)
    buckets = int(span >> shift) + 1
    table = np.empty(buckets + 1, dtype=np.int64)
    j = 0
    for b in range(buckets + 1):
        while j < nb and int((bounds[j] - first) >> shift) < b:
            j += 1
        table[b] = j
    sub_bits = min(8, bits_used)
    sub_shift = np.uint64(bits_used - sub_bits)
    sub_n = 1 << sub_bits
    sub_mask = np.uint64(sub_n - 1)
    heavy = np.full(buckets, -1, dtype=np.int32)
    n_heavy = 0
    if sub_bits:
        for b in range(buckets):
            if table[b + 1] - table[b] > HEAVY:
                heavy[b] = n_heavy
                n_heavy += 1
    sub = np.empty((max(n_heavy, 1), sub_n + 1), dtype=np.int32)
    for b in range(buckets):
        k = heavy[b]
        if k < 0:
            continue
        j = table[b]
        for s in range(sub_n + 1):
            while j < table[b + 1] and int(((bounds[j] - first) >> sub_shift) & sub_mask) < s:
                j += 1
            sub[k, s] = j
    for i in range(raw.size):
        if not valid[i]:
            rank = np.uint64(0)
        else:
            value = raw[i]
            if nb == 0 or value < first:
                lo = 0
            elif value >= last:
                lo = nb
            else:
                offset = value - first
                bucket = int(offset >> shift)
                lo = table[bucket]
                hi = table[bucket + 1]
                if hi - lo > HEAVY:
                    k = heavy[bucket]
                    s = int((offset >> sub_shift) & sub_mask)
                    lo = sub[k, s]
                    hi = sub[k, s + 1]
                while lo < hi:  # first boundary > value (searchsorted side="right")
                    mid = (lo + hi) >> 1
                    if bounds[mid] <= value:
                        lo = mid + 1
                    else:
                        hi = mid
            rank = np.uint64(lo + 1)
        if small:
            out[i] = rank * scale // levels
        else:
            out[i] = rank * step
    return out


def rank_keys(
    raw: npt.NDArray[np.uint64],
    valid: npt.NDArray[np.bool_],
    bounds: npt.NDArray[np.uint64],
    bits: int,
    out: npt.NDArray[np.uint64] | None = None,
) -> npt.NDArray[np.uint64]:
    """``bits``-bit keys: rank 0 for nulls, else ``1 + #boundaries <= raw``, scaled
    proportionally onto ``0 .. 2**bits - 1`` (``rank * 2**bits // levels``), so that the
    ranks use the whole key range and its top bit splits the values near their median.
    Monotone in ``raw``; nulls below everything.

    Args:
        raw: raw keys (:func:`raw_keys_int64` ...).
        valid: False where the value is null.
        bounds: sorted distinct boundaries (:func:`quantile_boundaries`).
        bits: key width, 1..64.
        out: a contiguous ``uint64`` array of ``raw.size`` to write the keys into
            (default: a new one); may be ``raw`` itself (each key is read before its
            rank is written).
    """
    if not 1 <= bits <= 64:
        raise ValueError("bits must be within 1..64")
    raw = np.ascontiguousarray(raw, dtype=np.uint64)
    return _rank_keys(  # type: ignore[no-any-return]
        raw,
        np.ascontiguousarray(valid, dtype=np.bool_),
        np.ascontiguousarray(bounds, dtype=np.uint64),
        bits,
        uint64_output(raw.size, out),
    )


def rank_keys_reference(
    raw: list[int], valid: list[bool], bounds: list[int], bits: int
) -> list[int]:
    """Plain-Python twin of :func:`rank_keys`."""
    import bisect

    levels = len(bounds) + 2
    out = []
    for r, ok in zip(raw, valid, strict=True):
        rank = bisect.bisect_right(bounds, r) + 1 if ok else 0
        if bits <= 40:
            out.append(rank * (1 << bits) // levels)
        else:
            out.append(rank * (((1 << bits) - 1) // levels))
    return out


# --- 3. space-filling curves ---------------------------------------------------------------------


@kernel
def _interleave(
    keys: npt.NDArray[np.uint64], bits: int, out: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    # Bit ``level`` of column ``c`` goes to bit ``level * d + (d - 1 - c)``. A byte at a
    # time: ``spread[v]`` spaces the 8 bits of ``v`` ``d`` apart, so each row costs
    # ``d * ceil(bits / 8)`` (<= 8 + d) table lookups instead of ``d * bits`` bit moves.
    d, n = keys.shape
    spread = np.zeros(256, dtype=np.uint64)
    for v in range(256):
        acc = np.uint64(0)
        for b in range(8):
            if (v >> b) & 1 and b * d < 64:
                acc |= np.uint64(1) << np.uint64(b * d)
        spread[v] = acc
    mask = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - bits)
    nbytes = (bits + 7) // 8
    for i in range(n):  # every key of row i is read before out[i] is written
        z = np.uint64(0)
        for c in range(d):
            k = keys[c, i] & mask
            for j in range(nbytes):
                byte = (k >> np.uint64(8 * j)) & np.uint64(255)
                shift = 8 * j * d + (d - 1 - c)
                if byte and shift < 64:
                    z |= spread[byte] << np.uint64(shift)
        out[i] = z
    return out


@kernel
def _hilbert(
    keys: npt.NDArray[np.uint64], bits: int, out: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    d, n = keys.shape
    x = np.empty(d, dtype=np.uint64)
    one = np.uint64(1)
    top = one << np.uint64(bits - 1)
    for i in range(n):
        for c in range(d):
            x[c] = keys[c, i]
        # Skilling: axes -> transposed Hilbert index (inverse undo, then Gray encode).
        q = top
        while q > one:
            p = q - one
            for c in range(d):
                if x[c] & q:
                    x[0] ^= p
                else:
                    t = (x[0] ^ x[c]) & p
                    x[0] ^= t
                    x[c] ^= t
            q >>= one
        for c in range(1, d):
            x[c] ^= x[c - 1]
        t = np.uint64(0)
        q = top
        while q > one:
            if x[d - 1] & q:
                t ^= q - one
            q >>= one
        for c in range(d):
            x[c] ^= t
        h = np.uint64(0)
        for level in range(bits - 1, -1, -1):
            for c in range(d):
                h = (h << one) | ((x[c] >> np.uint64(level)) & one)
        out[i] = h
    return out


def _check_curve_input(
    keys: npt.NDArray[np.uint64], bits: int, out: npt.NDArray[np.uint64] | None
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    arr = np.ascontiguousarray(keys, dtype=np.uint64)
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise ValueError("keys must be a (columns, rows) array")
    if not bits >= 1 or arr.shape[0] * bits > 64:
        raise ValueError("columns * bits must be within 1..64")
    return arr, uint64_output(arr.shape[1], out)


def interleave_bits(
    keys: npt.NDArray[np.uint64], bits: int, out: npt.NDArray[np.uint64] | None = None
) -> npt.NDArray[np.uint64]:
    """Z-order (Morton) index of ``(columns, rows)`` keys of ``bits`` bits each; column 0
    supplies the most significant bit of every group. ``out`` (default: a new array) may
    be a row of ``keys`` itself, which saves one array of memory.

    Example:
        >>> interleave_bits(np.array([[3], [0]], dtype=np.uint64), 2).tolist()
        [10]
    """
    arr, dest = _check_curve_input(keys, bits, out)
    return _interleave(arr, bits, dest)  # type: ignore[no-any-return]


def hilbert_index(
    keys: npt.NDArray[np.uint64], bits: int, out: npt.NDArray[np.uint64] | None = None
) -> npt.NDArray[np.uint64]:
    """Position along a ``columns``-dimensional Hilbert curve of order ``bits``; ``out`` as
    in :func:`interleave_bits`.

    Example:
        >>> pts = np.array([[0, 0, 1, 1], [0, 1, 1, 0]], dtype=np.uint64)
        >>> hilbert_index(pts, 1).tolist()
        [0, 1, 2, 3]
    """
    arr, dest = _check_curve_input(keys, bits, out)
    return _hilbert(arr, bits, dest)  # type: ignore[no-any-return]


def interleave_bits_reference(point: list[int], bits: int) -> int:
    """Plain-Python twin of :func:`interleave_bits` for one point."""
    z = 0
    for level in range(bits - 1, -1, -1):
        for v in point:
            z = (z << 1) | ((v >> level) & 1)
    return z


def hilbert_index_reference(point: list[int], bits: int) -> int:
    """Plain-Python twin of :func:`hilbert_index` for one point (Skilling's method)."""
    x = list(point)
    d = len(x)
    top = 1 << (bits - 1)
    q = top
    while q > 1:
        p = q - 1
        for c in range(d):
            if x[c] & q:
                x[0] ^= p
            else:
                t = (x[0] ^ x[c]) & p
                x[0] ^= t
                x[c] ^= t
        q >>= 1
    for c in range(1, d):
        x[c] ^= x[c - 1]
    t = 0
    q = top
    while q > 1:
        if x[d - 1] & q:
            t ^= q - 1
        q >>= 1
    x = [v ^ t for v in x]
    return interleave_bits_reference(x, bits)


# --- 4. sorting rows by key ------------------------------------------------------------------------


@kernel
def _radix_sort(keys: npt.NDArray[np.uint64], scratch: npt.NDArray[np.uint64]) -> None:
    n = keys.size
    counts = np.zeros((8, 256), dtype=np.int64)
    for i in range(n):  # every digit's histogram in one read of the keys
        k = keys[i]
        for d in range(8):
            counts[d, (k >> np.uint64(8 * d)) & np.uint64(255)] += 1
    src, dst = keys, scratch
    moved = False
    offsets = np.empty(256, dtype=np.int64)
    for d in range(8):  # least significant digit first; each pass is stable
        if counts[d].max() == n:
            continue  # every key has the same digit here: the pass would not move a key
        total = 0
        for b in range(256):
            offsets[b] = total
            total += counts[d, b]
        shift = np.uint64(8 * d)
        for i in range(n):
            k = src[i]
            b = (k >> shift) & np.uint64(255)
            dst[offsets[b]] = k
            offsets[b] += 1
        src, dst = dst, src
        moved = not moved
    if moved:
        keys[:] = src


def sort_keys(keys: npt.NDArray[np.uint64]) -> None:
    """Sorts 64-bit keys in place, ascending: a least-significant-digit radix sort (8
    passes of one byte, a pass skipped where every key has the same byte), with a scratch
    array of the keys' size. ``ndarray.sort`` is a comparison sort that only some CPUs
    vectorise: on an AMD EPYC (Zen 4) with numpy 2.3-2.4 it took 109 ms for 2M random
    keys and 300 ms for 5M, this 26 ms and 73 ms; on 15,625 keys 0.42 against 0.14 ms
    (benchmarks/RESULTS.md section 6).

    Example:
        >>> k = np.array([3, 1, 2**64 - 1, 0], dtype=np.uint64)
        >>> sort_keys(k); k.tolist()
        [0, 1, 3, 18446744073709551615]
    """
    if keys.dtype != np.uint64 or keys.ndim != 1 or not keys.flags.c_contiguous:
        raise ValueError("keys must be a contiguous 1-d uint64 array")
    if keys.size > 1:
        _radix_sort(keys, np.empty_like(keys))


@kernel
def _tag_rows(keys: npt.NDArray[np.uint64], index_bits: int) -> None:
    shift = np.uint64(index_bits)
    for i in range(keys.size):
        keys[i] = ((keys[i] >> shift) << shift) | np.uint64(i)


def tag_row_numbers(keys: npt.NDArray[np.uint64]) -> int:
    """Replaces, in place, the low bits of every key with its row number and returns how
    many bits that took (``ceil(log2(rows))``, at least 1). Sorting the tagged keys
    (:func:`sort_keys`; sorting the keys alone is several times faster than ``argsort``,
    which moves the row numbers too) then orders the rows by the top ``64 - bits`` bits
    of their keys, ties in row order, and :func:`row_numbers` reads the order back out.

    Example:
        >>> k = np.array([0xF0, 0x10, 0x20], dtype=np.uint64)
        >>> bits = tag_row_numbers(k); sort_keys(k); row_numbers(k, bits).tolist()
        [1, 2, 0]
    """
    if keys.dtype != np.uint64 or keys.ndim != 1 or not keys.flags.c_contiguous:
        raise ValueError("keys must be a contiguous 1-d uint64 array")
    bits = max(1, int(keys.size - 1).bit_length())
    if bits > 48:
        raise ValueError("too many rows to tag")
    _tag_rows(keys, bits)
    return bits


def row_numbers(tagged: npt.NDArray[np.uint64], index_bits: int) -> npt.NDArray[np.int64]:
    """The row numbers of tagged keys (:func:`tag_row_numbers`), in place: the returned
    ``int64`` array is a view of ``tagged``'s memory."""
    np.bitwise_and(tagged, np.uint64((1 << index_bits) - 1), out=tagged)
    return tagged.view(np.int64)


__all__ = [
    "hilbert_index",
    "hilbert_index_reference",
    "interleave_bits",
    "interleave_bits_reference",
    "quantile_boundaries",
    "rank_keys",
    "rank_keys_reference",
    "raw_key_binary_reference",
    "raw_key_float64_reference",
    "raw_key_int64_reference",
    "raw_keys_binary",
    "raw_keys_float64",
    "raw_keys_int64",
    "row_numbers",
    "sort_keys",
    "tag_row_numbers",
    "uint64_output",
]
