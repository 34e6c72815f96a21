"""Independent builders of deletion-vector bytes, written from the digest (§11.5 to §11.7).

Only pyroaring's 32-bit ``BitMap.serialize`` (the standard portable Roaring format, checked
byte for byte against the digest's example in ``test_dv_bitmap.py``) is borrowed; the
64-bit RoaringBitmapArray framing, the DV file records and the CRCs are built here.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pyroaring import BitMap
from tablekit import z85_encode

MAGIC = 1681511377
MAGIC_NATIVE = 1681511376
EMPTY_32 = bytes.fromhex("3A30000000000000")


def payload(rows: Iterable[int], *, dense: bool = False) -> bytes:
    """RoaringBitmapArray bytes (magic included); ``dense`` emits every key up to the largest."""
    buckets: dict[int, list[int]] = {}
    for r in sorted(set(rows)):
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    keys = list(range(max(buckets) + 1)) if dense and buckets else sorted(buckets)
    out = [struct.pack("<I", MAGIC), struct.pack("<Q", len(keys))]
    for key in keys:
        out.append(struct.pack("<I", key))
        out.append(BitMap(buckets.get(key, [])).serialize())
    return b"".join(out)


def record(data: bytes) -> bytes:
    """One DV record of a DV file: BE size, the bitmap bytes, BE CRC-32 of those bytes."""
    return struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))


def dv_file(payloads: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """A DV file (version byte 1, then one record per payload) and each record's offset."""
    out = bytearray(b"\x01")
    offsets = []
    for p in payloads:
        offsets.append(len(out))
        out += record(p)
    return bytes(out), offsets


def write_dv_file(
    root: Path, payloads: Sequence[bytes], cards: Sequence[int], *, prefix: str = ""
) -> tuple[Path, list[dict[str, Any]]]:
    """Writes a DV file under ``root`` and returns its path and one ``u`` descriptor per DV."""
    u = uuid.uuid4()
    data, offsets = dv_file(payloads)
    folder = root / prefix if prefix else root
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"deletion_vector_{u}.bin"
    path.write_bytes(data)
    descriptors = [
        {
            "storageType": "u",
            "pathOrInlineDv": prefix + z85_encode(u.bytes),
            "offset": off,
            "sizeInBytes": len(p),
            "cardinality": card,
        }
        for p, off, card in zip(payloads, offsets, cards, strict=True)
    ]
    return path, descriptors
