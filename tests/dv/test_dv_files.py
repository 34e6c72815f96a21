"""Reading DVs from DV files (digest §11.5): ranged reads, validation, absent offsets,
caching. DV files are built by hand with ``dv_bytes``; reads go to real local files."""

from __future__ import annotations

import struct
import threading
import uuid
import zlib
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from dv_bytes import MAGIC, dv_file, payload, record, write_dv_file
from hypothesis import HealthCheck, given, settings
from pyroaring import BitMap

from lakequery.dv import z85
from lakequery.dv.descriptor import Descriptor
from lakequery.dv.files import load_deletion_vectors
from lakequery.errors import DeletionVectorError
from lakequery.storage import open_storage
from lakequery.storage.local import LocalStorage

ROWS = [
    [0, 9],
    [*range(100, 5100), 2**32 + 3],  # a bitmap container and a second bucket
    [7, 2**33, 2**33 + 1, 2**35],
]


class RecordingStorage(LocalStorage):
    """A real local storage that records every read it serves."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.calls: list[tuple[str, str, int, int]] = []
        self._calls_lock = threading.Lock()

    def read(self, path: str) -> bytes:
        with self._calls_lock:
            self.calls.append(("read", path, 0, -1))
        return super().read(path)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with self._calls_lock:
            self.calls.append(("read_range", path, offset, length))
        return super().read_range(path, offset, length)


def _storage(root: Path) -> RecordingStorage:
    return RecordingStorage(open_storage(str(root)).root)


def _table_with_three_dvs(root: Path) -> tuple[Path, list[Descriptor]]:
    payloads = [payload(r) for r in ROWS]
    path, dvs = write_dv_file(root, payloads, [len(set(r)) for r in ROWS])
    return path, [Descriptor.from_dict(d) for d in dvs]


# --- happy path --------------------------------------------------------------------------------


def test_three_dvs_in_one_file_with_ranged_reads(tmp_path: Path) -> None:
    path, descriptors = _table_with_three_dvs(tmp_path)
    offsets = [d.offset for d in descriptors]
    assert offsets[0] == 1
    assert len(set(offsets)) == 3
    storage = _storage(tmp_path)
    items = [(f"part-{i}.parquet", d) for i, d in enumerate(descriptors)]
    bitmaps = load_deletion_vectors(storage, storage.root, items)
    assert [sorted(bm) for bm in bitmaps] == [sorted(set(r)) for r in ROWS]
    # one ranged read per DV, exactly the record, never the whole file
    assert all(kind == "read_range" for kind, *_ in storage.calls)
    got = sorted((p, off, n) for _, p, off, n in storage.calls)
    want = sorted((str(path), d.offset, d.size_in_bytes + 8) for d in descriptors)
    assert got == want


def test_items_keep_their_order_and_mix_inline_empty_and_file(tmp_path: Path) -> None:
    _, descriptors = _table_with_three_dvs(tmp_path)
    inline_rows = [3, 5, 2**32]
    inline_payload = payload(inline_rows)
    inline = Descriptor(
        "i", z85.encode(inline_payload, pad=True), None, len(inline_payload), len(inline_rows)
    )
    # cardinality 0: nothing to read, even though the file does not exist
    empty = Descriptor("u", z85.encode(uuid.uuid4().bytes), 1, 12, 0)
    storage = _storage(tmp_path)
    items = [
        ("c.parquet", descriptors[2]),
        ("i.parquet", inline),
        ("e.parquet", empty),
        ("a.parquet", descriptors[0]),
    ]
    bitmaps = load_deletion_vectors(storage, storage.root, items)
    assert [sorted(bm) for bm in bitmaps] == [sorted(ROWS[2]), inline_rows, [], ROWS[0]]
    assert len(storage.calls) == 2


def test_dv_file_under_a_prefix_directory(tmp_path: Path) -> None:
    rows = [1, 4, 9, 16]
    _, (dv,) = write_dv_file(tmp_path, [payload(rows)], [len(rows)], prefix="q7")
    d = Descriptor.from_dict(dv)
    assert d.absolute_path(str(tmp_path)).startswith(f"{tmp_path}/q7/deletion_vector_")
    storage = open_storage(str(tmp_path))
    (bm,) = load_deletion_vectors(storage, storage.root, [("f.parquet", d)])
    assert list(bm) == rows


def test_p_storage_type_reads_the_absolute_uri(tmp_path: Path) -> None:
    rows = [2, 3]
    elsewhere = tmp_path / "other dir"
    elsewhere.mkdir()
    data, (off,) = dv_file([payload(rows)])
    target = elsewhere / "my dv.bin"
    target.write_bytes(data)
    uri = str(target).replace(" ", "%20")
    d = Descriptor("p", uri, off, len(payload(rows)), 2)
    table = tmp_path / "table"
    table.mkdir()
    storage = open_storage(str(table))
    (bm,) = load_deletion_vectors(storage, storage.root, [("f.parquet", d)])
    assert list(bm) == rows


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    row_sets=st.lists(st.sets(st.integers(0, 2**34), min_size=1, max_size=80), max_size=5),
)
def test_any_number_of_dvs_per_file_round_trip(tmp_path: Path, row_sets: list[set[int]]) -> None:
    root = tmp_path / uuid.uuid4().hex
    root.mkdir()
    payloads = [payload(r) for r in row_sets]
    _, dvs = write_dv_file(root, payloads, [len(r) for r in row_sets])
    storage = open_storage(str(root))
    items = [(f"f{i}.parquet", Descriptor.from_dict(d)) for i, d in enumerate(dvs)]
    got = load_deletion_vectors(storage, storage.root, items)
    assert [sorted(bm) for bm in got] == [sorted(r) for r in row_sets]


# --- absent offsets (digest §19 item 2) ------------------------------------------------------------


def test_absent_offset_with_version_byte_reads_at_one(tmp_path: Path) -> None:
    rows = [0, 2, 3, 4]
    _, (dv,) = write_dv_file(tmp_path, [payload(rows)], [4])
    del dv["offset"]
    d = Descriptor.from_dict(dv)
    assert d.offset is None
    storage = _storage(tmp_path)
    (bm,) = load_deletion_vectors(storage, storage.root, [("f.parquet", d)])
    assert list(bm) == rows
    # a descriptor without an offset is read whole, to check it holds this one record
    assert [kind for kind, *_ in storage.calls] == ["read"]


def test_absent_offset_in_a_file_of_several_dvs_is_refused(tmp_path: Path) -> None:
    # the first record's size, CRC and cardinality match the second's: reading it for the
    # second file's descriptor would delete the wrong rows
    _, (first, second) = write_dv_file(tmp_path, [payload([1, 2]), payload([3, 4])], [2, 2])
    del second["offset"]
    storage = open_storage(str(tmp_path))
    with pytest.raises(DeletionVectorError, match="ambiguous"):
        load_deletion_vectors(storage, storage.root, [("g.parquet", Descriptor.from_dict(second))])
    (bm,) = load_deletion_vectors(
        storage, storage.root, [("f.parquet", Descriptor.from_dict(first))]
    )
    assert list(bm) == [1, 2]


def test_absent_offset_without_version_byte_reads_at_zero(tmp_path: Path) -> None:
    rows = [5, 6, 2**32 + 1]
    data = payload(rows)
    u = uuid.uuid4()
    (tmp_path / f"deletion_vector_{u}.bin").write_bytes(record(data))  # no version byte
    d = Descriptor("u", z85.encode(u.bytes), None, len(data), len(rows))
    storage = open_storage(str(tmp_path))
    (bm,) = load_deletion_vectors(storage, storage.root, [("f.parquet", d)])
    assert list(bm) == rows


def test_explicit_offset_is_honoured_even_when_zero_would_not_match(tmp_path: Path) -> None:
    rows = [11]
    _, (dv,) = write_dv_file(tmp_path, [payload(rows)], [1])
    d = Descriptor.from_dict({**dv, "offset": 0})
    storage = open_storage(str(tmp_path))
    with pytest.raises(DeletionVectorError):
        load_deletion_vectors(storage, storage.root, [("f.parquet", d)])


# --- corruption ----------------------------------------------------------------------------------


def _corrupted(tmp_path: Path, mutate: Any) -> tuple[Path, Descriptor]:
    rows = [1, 2, 3, 500, 2**32 + 8]
    path, (dv,) = write_dv_file(tmp_path, [payload(rows)], [len(rows)])
    raw = bytearray(path.read_bytes())
    d = Descriptor.from_dict(dv)
    d = mutate(raw, d) or d
    path.write_bytes(bytes(raw))
    return path, d


def _expect_error(tmp_path: Path, d: Descriptor, data_file: str, *needles: str) -> None:
    storage = open_storage(str(tmp_path))
    with pytest.raises(DeletionVectorError) as info:
        load_deletion_vectors(storage, storage.root, [(data_file, d)])
    exc = info.value
    assert exc.data_file == data_file
    assert data_file in str(exc)
    assert exc.dv == d.unique_id
    for needle in needles:
        assert needle in str(exc)


def test_corrupt_crc(tmp_path: Path) -> None:
    def flip_crc(raw: bytearray, d: Descriptor) -> None:
        raw[-1] ^= 0x40

    _, d = _corrupted(tmp_path, flip_crc)
    _expect_error(tmp_path, d, "part-crc.parquet", "CRC")


def test_corrupt_bitmap_byte_fails_the_crc(tmp_path: Path) -> None:
    def flip_payload(raw: bytearray, d: Descriptor) -> None:
        raw[1 + 4 + 20] ^= 0x01

    _, d = _corrupted(tmp_path, flip_payload)
    _expect_error(tmp_path, d, "part-bits.parquet", "CRC")


def test_wrong_size_field(tmp_path: Path) -> None:
    def bad_size(raw: bytearray, d: Descriptor) -> None:
        struct.pack_into(">I", raw, 1, d.size_in_bytes + 1)

    _, d = _corrupted(tmp_path, bad_size)
    _expect_error(tmp_path, d, "part-size.parquet", "size")


def test_descriptor_size_disagrees_with_file(tmp_path: Path) -> None:
    def smaller(raw: bytearray, d: Descriptor) -> Descriptor:
        return Descriptor(d.storage_type, d.path_or_inline_dv, d.offset, d.size_in_bytes - 2, 5)

    _, d = _corrupted(tmp_path, smaller)
    _expect_error(tmp_path, d, "part-dsize.parquet")


def test_record_past_the_end_of_the_file(tmp_path: Path) -> None:
    def bigger(raw: bytearray, d: Descriptor) -> Descriptor:
        return Descriptor(d.storage_type, d.path_or_inline_dv, d.offset, d.size_in_bytes + 64, 5)

    _, d = _corrupted(tmp_path, bigger)
    _expect_error(tmp_path, d, "part-eof.parquet")


def test_wrong_cardinality(tmp_path: Path) -> None:
    def card(raw: bytearray, d: Descriptor) -> Descriptor:
        return Descriptor(d.storage_type, d.path_or_inline_dv, d.offset, d.size_in_bytes, 4)

    _, d = _corrupted(tmp_path, card)
    _expect_error(tmp_path, d, "part-card.parquet", "cardinality")


def test_unknown_magic_with_valid_crc(tmp_path: Path) -> None:
    def magic(raw: bytearray, d: Descriptor) -> None:
        struct.pack_into("<I", raw, 5, MAGIC + 7)
        data = bytes(raw[5 : 5 + d.size_in_bytes])
        struct.pack_into(">I", raw, 5 + d.size_in_bytes, zlib.crc32(data))

    _, d = _corrupted(tmp_path, magic)
    _expect_error(tmp_path, d, "part-magic.parquet", "magic")


def test_malformed_bitmap_with_valid_crc(tmp_path: Path) -> None:
    def cookie(raw: bytearray, d: Descriptor) -> None:
        struct.pack_into("<I", raw, 5 + 16, 99999)  # 32-bit cookie of bucket 0
        data = bytes(raw[5 : 5 + d.size_in_bytes])
        struct.pack_into(">I", raw, 5 + d.size_in_bytes, zlib.crc32(data))

    _, d = _corrupted(tmp_path, cookie)
    _expect_error(tmp_path, d, "part-cookie.parquet")


def test_missing_dv_file(tmp_path: Path) -> None:
    d = Descriptor("u", z85.encode(uuid.uuid4().bytes), 1, 36, 2)
    _expect_error(tmp_path, d, "part-missing.parquet", "missing")


def test_missing_dv_file_with_absent_offset(tmp_path: Path) -> None:
    d = Descriptor("u", z85.encode(uuid.uuid4().bytes), None, 36, 2)
    _expect_error(tmp_path, d, "part-missing2.parquet")


def test_bad_inline_dv(tmp_path: Path) -> None:
    d = Descriptor("i", "not z85 at all!", None, 12, 1)
    _expect_error(tmp_path, d, "part-inline.parquet")


def test_inline_dv_with_wrong_cardinality(tmp_path: Path) -> None:
    data = payload([1, 2, 3])
    d = Descriptor("i", z85.encode(data, pad=True), None, len(data), 2)
    _expect_error(tmp_path, d, "part-inline-card.parquet", "cardinality")


def test_row_index_with_top_bit_set_is_rejected(tmp_path: Path) -> None:
    # digest §11.6: every bucket key's top bit must be 0 (row indexes < 2**63)
    data = (
        struct.pack("<I", MAGIC)
        + struct.pack("<Q", 2)
        + struct.pack("<I", 0)
        + BitMap([5]).serialize()
        + struct.pack("<I", 0x80000000)
        + BitMap([1]).serialize()
    )
    d = Descriptor("i", z85.encode(data, pad=True), None, len(data), 2)
    _expect_error(tmp_path, d, "part-top-bit.parquet")


def test_no_storage_for_a_file_dv(tmp_path: Path) -> None:
    d = Descriptor("u", z85.encode(uuid.uuid4().bytes), 1, 36, 2)
    with pytest.raises(DeletionVectorError) as info:
        load_deletion_vectors(None, str(tmp_path / "x"), [("part-nostore.parquet", d)])
    assert info.value.data_file == "part-nostore.parquet"


def test_one_bad_dv_fails_the_whole_load(tmp_path: Path) -> None:
    _, descriptors = _table_with_three_dvs(tmp_path)
    missing = Descriptor("u", z85.encode(uuid.uuid4().bytes), 1, 36, 2)
    storage = open_storage(str(tmp_path))
    items = [("a.parquet", descriptors[0]), ("bad.parquet", missing), ("c.parquet", descriptors[2])]
    with pytest.raises(DeletionVectorError) as info:
        load_deletion_vectors(storage, storage.root, items)
    assert info.value.data_file == "bad.parquet"


# --- caching ---------------------------------------------------------------------------------------


def test_second_load_of_the_same_dv_does_not_touch_storage(tmp_path: Path) -> None:
    path, descriptors = _table_with_three_dvs(tmp_path)
    storage = _storage(tmp_path)
    items = [(f"part-{i}.parquet", d) for i, d in enumerate(descriptors)]
    first = load_deletion_vectors(storage, storage.root, items)
    n_calls = len(storage.calls)
    assert n_calls == 3
    path.unlink()
    second = load_deletion_vectors(storage, storage.root, items)
    assert [list(b) for b in second] == [list(b) for b in first]
    assert len(storage.calls) == n_calls
    # a different data file naming the same DV (same unique id) is a hit too
    (again,) = load_deletion_vectors(storage, storage.root, [("other.parquet", descriptors[1])])
    assert list(again) == list(first[1])
    assert len(storage.calls) == n_calls


def test_cache_is_per_table_root(tmp_path: Path) -> None:
    t1, t2 = tmp_path / "t1", tmp_path / "t2"
    t1.mkdir()
    t2.mkdir()
    path, descriptors = _table_with_three_dvs(t1)
    s1 = open_storage(str(t1))
    load_deletion_vectors(s1, s1.root, [("a.parquet", descriptors[0])])
    # the same unique id under another table whose DV file is absent is not served from t1's cache
    s2 = open_storage(str(t2))
    with pytest.raises(DeletionVectorError):
        load_deletion_vectors(s2, s2.root, [("a.parquet", descriptors[0])])
    assert path.exists()


def test_failed_load_is_not_cached(tmp_path: Path) -> None:
    rows = [4, 8]
    data = payload(rows)
    u = uuid.uuid4()
    d = Descriptor("u", z85.encode(u.bytes), 1, len(data), 2)
    storage = open_storage(str(tmp_path))
    with pytest.raises(DeletionVectorError):
        load_deletion_vectors(storage, storage.root, [("f.parquet", d)])
    (tmp_path / f"deletion_vector_{u}.bin").write_bytes(b"\x01" + record(data))
    (bm,) = load_deletion_vectors(storage, storage.root, [("f.parquet", d)])
    assert list(bm) == rows
