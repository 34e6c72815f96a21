"""The RoaringBitmapArray payload (digest §11.6, §11.7, worked examples §11.9)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dv_bytes import EMPTY_32, MAGIC, MAGIC_NATIVE, payload
from hypothesis import given, settings
from pyroaring import BitMap, BitMap64

from lakequery.dv import bitmap, z85
from lakequery.dv.descriptor import Descriptor
from lakequery.dv.files import load_deletion_vectors, parse_dv_record
from lakequery.storage import open_storage

ROWS_369 = [3, 4, 7, 11, 18, 29]
EXAMPLE_A = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
EXAMPLE_B = "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
EXAMPLE_B_BYTES = bytes.fromhex(
    "D1D33964"  # magic 1681511377 LE
    "0100000000000000"  # numBuckets = 1
    "00000000"  # key 0
    "3A300000"  # cookie 12346
    "01000000"  # one container
    "00000500"  # key 0, cardinality-1 = 5
    "10000000"  # container offset 16
    "030004000700 0B00 1200 1D00".replace(" ", "")
)
DAT_DV = Path("/work/shared/conformance/tables/dat_deletion_vectors")

# row sets spanning several 32-bit buckets, plus dense runs that become bitmap containers
row_sets = st.one_of(
    st.sets(st.integers(0, 2**34), max_size=200),
    st.sets(st.integers(0, 2**40), max_size=50),
    st.builds(
        lambda base, n, extra: set(range(base, base + n)) | extra,
        st.integers(0, 2**33),
        st.integers(0, 9000),
        st.sets(st.integers(0, 2**36), max_size=20),
    ),
)


# --- worked examples ----------------------------------------------------------------------------


def test_legacy_native_inline_example_a_decodes_leniently() -> None:
    raw = z85.decode(EXAMPLE_A, 40)
    assert struct.unpack_from(">I", raw, 0)[0] == MAGIC_NATIVE
    assert list(bitmap.deserialize(raw)) == ROWS_369
    d = Descriptor("i", EXAMPLE_A, None, 40, 6)
    (bm,) = load_deletion_vectors(None, "/nowhere-a", [("part-a.parquet", d)])
    assert list(bm) == ROWS_369


def test_conforming_inline_example_b() -> None:
    raw = z85.decode(EXAMPLE_B, 44)
    assert raw == EXAMPLE_B_BYTES
    assert list(bitmap.deserialize(raw)) == ROWS_369
    # and the writer side produces exactly these bytes
    assert bitmap.serialize(ROWS_369) == EXAMPLE_B_BYTES
    assert z85.encode(bitmap.serialize(ROWS_369), pad=True) == EXAMPLE_B
    d = Descriptor("i", EXAMPLE_B, None, 44, 6)
    (bm,) = load_deletion_vectors(None, "/nowhere-b", [("part-b.parquet", d)])
    assert list(bm) == ROWS_369


def test_32_bit_bitmap_layout_matches_digest() -> None:
    # §11.7: pyroaring's 32-bit portable format, which dv_bytes builds on
    assert BitMap(ROWS_369).serialize() == bytes.fromhex(
        "3A300000010000000000050010000000030004000700 0B0012001D00".replace(" ", "")
    )
    assert BitMap().serialize() == EMPTY_32


def test_real_spark_record_example_c() -> None:
    file_bytes = bytes.fromhex(
        "01 00000024 D1D33964 0100000000000000 00000000 3A300000 01000000"
        " 00000100 10000000 00000900 2A671846".replace(" ", "")
    )
    assert len(file_bytes) == 45
    d = Descriptor("u", "vBn[lx{q8@P<9BNH/isA", 1, 36, 2)
    bm = parse_dv_record(file_bytes[1:], d, data_file="f.parquet")
    assert list(bm) == [0, 9]
    assert zlib.crc32(file_bytes[5:41]) == 0x2A671846


def _dat_descriptor() -> tuple[str, dict[str, object]]:
    log = DAT_DV / "_delta_log" / "00000000000000000002.json"
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "add" in action and action["add"].get("deletionVector"):
            return action["add"]["path"], action["add"]["deletionVector"]
    raise AssertionError("no add with a deletion vector in the conformance log")


def test_real_on_disk_dv_of_the_conformance_table() -> None:
    data_path, dv = _dat_descriptor()
    d = Descriptor.from_dict(dv)
    (found,) = sorted(DAT_DV.glob("deletion_vector_*.bin"))
    assert d.absolute_path(str(DAT_DV)) == str(found)
    raw = found.read_bytes()
    assert raw[0] == 1
    assert d.offset == 1
    start = d.offset
    size = struct.unpack_from(">I", raw, start)[0]
    assert size == d.size_in_bytes
    bitmap_bytes = raw[start + 4 : start + 4 + size]
    (stored_crc,) = struct.unpack_from(">I", raw, start + 4 + size)
    assert zlib.crc32(bitmap_bytes) == stored_crc
    # the deleted rows are those with letter = 'a' (the commit's DELETE predicate)
    letters = pq.read_table(DAT_DV / data_path, columns=["letter"]).column("letter")
    expected = np.flatnonzero(pc.equal(letters, "a").to_numpy(zero_copy_only=False)).tolist()
    assert len(expected) == d.cardinality
    assert list(bitmap.deserialize(bitmap_bytes)) == expected
    record = raw[start : start + size + 8]
    assert list(parse_dv_record(record, d, data_file=data_path)) == expected
    storage = open_storage(str(DAT_DV))
    (bm,) = load_deletion_vectors(storage, storage.root, [(data_path, d)])
    assert list(bm) == expected


# --- round trips -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(rows=row_sets)
def test_serialize_deserialize_round_trip(rows: set[int]) -> None:
    data = bitmap.serialize(sorted(rows))
    assert struct.unpack_from("<I", data, 0)[0] == MAGIC
    # the sparse layout of §11.6, built independently
    assert data == payload(rows)
    back = bitmap.deserialize(data)
    assert len(back) == len(rows)
    assert list(back) == sorted(rows)
    arr = bitmap.to_numpy(back)
    assert arr.dtype == np.int64
    assert arr.tolist() == sorted(rows)
    # accepts a BitMap64 as well as an iterable
    assert bitmap.serialize(BitMap64(rows)) == data


@settings(max_examples=150, deadline=None)
@given(rows=row_sets)
def test_dense_payload_with_empty_buckets_is_accepted(rows: set[int]) -> None:
    data = payload(rows, dense=True)
    assert list(bitmap.deserialize(data)) == sorted(rows)


def test_dense_payload_built_by_hand() -> None:
    # key 0: empty 32-bit bitmap; key 1: rows 2**32 + {5, 7, 70000}
    data = (
        struct.pack("<I", MAGIC)
        + struct.pack("<Q", 2)
        + struct.pack("<I", 0)
        + EMPTY_32
        + struct.pack("<I", 1)
        + BitMap([5, 7, 70000]).serialize()
    )
    assert list(bitmap.deserialize(data)) == [2**32 + 5, 2**32 + 7, 2**32 + 70000]


def test_dense_payload_with_empty_middle_bucket() -> None:
    rows = [1, 2**33 + 1]  # keys 0 and 2, empty key 1
    dense = payload(rows, dense=True)
    assert struct.unpack_from("<Q", dense, 4)[0] == 3
    assert list(bitmap.deserialize(dense)) == rows


def test_empty_bitmap_round_trip() -> None:
    data = bitmap.serialize([])
    assert data == struct.pack("<I", MAGIC) + struct.pack("<Q", 0)
    assert len(bitmap.deserialize(data)) == 0
    assert bitmap.to_numpy(bitmap.deserialize(data)).tolist() == []
    assert bitmap.to_numpy(bitmap.deserialize(data)).dtype == np.int64


def test_native_little_endian_variant_is_read_leniently() -> None:
    bm32 = BitMap([1, 9, 4000]).serialize()
    data = (
        struct.pack("<I", MAGIC_NATIVE)
        + struct.pack("<I", 2)
        + struct.pack("<I", len(EMPTY_32))
        + EMPTY_32
        + struct.pack("<I", len(bm32))
        + bm32
    )
    assert list(bitmap.deserialize(data)) == [2**32 + 1, 2**32 + 9, 2**32 + 4000]


# --- rejection ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xd1\xd3\x39",
        struct.pack("<I", 12345678) + struct.pack("<Q", 0),
        struct.pack(">I", MAGIC) + struct.pack("<Q", 0),  # portable magic in the wrong order
    ],
)
def test_unknown_magic_or_short_input_is_rejected(data: bytes) -> None:
    with pytest.raises(ValueError):
        bitmap.deserialize(data)


def test_truncated_payload_is_rejected() -> None:
    data = bitmap.serialize(ROWS_369)
    for cut in (5, 12, 16, 20, len(data) - 2):
        with pytest.raises(ValueError):
            bitmap.deserialize(data[:cut])
