"""The RoaringBitmapArray payload of a deletion vector (digest §11.6, §11.7).

The portable 64-bit layout is ``magic (u32 LE 1681511377)`` followed by what
``pyroaring.BitMap64.serialize()`` produces. The legacy "native" layout (magic
1681511376) found in the protocol's own inline example is read leniently.

Example:
    >>> data = serialize([3, 4, 7, 11, 18, 29])
    >>> list(deserialize(data))
    [3, 4, 7, 11, 18, 29]
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np
from pyroaring import BitMap64

MAGIC_PORTABLE = 1681511377
MAGIC_NATIVE = 1681511376


def serialize(rows: Iterable[int] | BitMap64) -> bytes:
    """Serializes row indexes in the portable layout (magic included)."""
    bm = rows if isinstance(rows, BitMap64) else BitMap64(rows)
    return struct.pack("<I", MAGIC_PORTABLE) + bm.serialize()


def deserialize(data: bytes) -> BitMap64:
    """Parses a serialized DV bitmap (portable, or the legacy native layout).

    Raises:
        ValueError: unknown magic or malformed content.
    """
    if len(data) < 4:
        raise ValueError("deletion vector payload is shorter than its magic")
    (magic_le,) = struct.unpack_from("<I", data, 0)
    if magic_le == MAGIC_PORTABLE:
        try:
            bm = BitMap64.deserialize(data[4:])
        except Exception as exc:  # pyroaring raises ValueError / generic errors
            raise ValueError(f"malformed RoaringBitmapArray: {exc}") from exc
        return _checked(bm)
    (magic_be,) = struct.unpack_from(">I", data, 0)
    if magic_be == MAGIC_NATIVE or magic_le == MAGIC_NATIVE:
        return _deserialize_native(data, big_endian=magic_be == MAGIC_NATIVE)
    raise ValueError(f"unknown deletion vector magic {magic_le}")


def _deserialize_native(data: bytes, *, big_endian: bool) -> BitMap64:
    """The reference impl.'s native layout: count, then (length, 32-bit bitmap) per key.

    Rebuilt as the portable 64-bit layout (count, then key and 32-bit bitmap per bucket)
    and parsed once, so the rows stay compressed: a few kilobytes of run containers can
    hold billions of rows, which must not be expanded here.
    """
    fmt = ">I" if big_endian else "<I"
    try:
        (count,) = struct.unpack_from(fmt, data, 4)
        pos = 8
        parts = []
        for key in range(count):  # each bucket takes at least 4 bytes: bounded by the data
            (length,) = struct.unpack_from(fmt, data, pos)
            pos += 4
            if pos + length > len(data):
                raise ValueError(f"bucket {key} runs past the end of the deletion vector")
            parts.append(struct.pack("<I", key) + data[pos : pos + length])
            pos += length
    except struct.error as exc:
        raise ValueError(f"native deletion vector ends early: {exc}") from exc
    if pos != len(data):
        raise ValueError("trailing bytes after native deletion vector")
    try:
        out = BitMap64.deserialize(struct.pack("<Q", count) + b"".join(parts))
    except Exception as exc:  # pyroaring raises ValueError / generic errors
        raise ValueError(f"malformed native deletion vector: {exc}") from exc
    return _checked(out)


def _checked(bm: BitMap64) -> BitMap64:
    """Row indexes must stay below 2**63 (every bucket key's top bit is 0, digest §11.6)."""
    if len(bm) and bm.max() >= 1 << 63:
        raise ValueError("deletion vector holds a row index >= 2**63")
    return bm


def to_numpy(bm: BitMap64) -> np.ndarray:
    """Sorted row indexes as an int64 array."""
    if not len(bm):
        return np.empty(0, dtype=np.int64)
    return (
        np.asarray(bm.to_array(), dtype=np.int64)
        if hasattr(bm, "to_array")
        else np.fromiter(bm, dtype=np.int64, count=len(bm))
    )
