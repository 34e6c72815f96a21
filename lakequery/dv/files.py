"""Reading deletion vectors from their storage (digest §11.5).

One ranged read per on-disk DV (never the whole DV file), the DVs of one scan fetched
concurrently, and parsed bitmaps cached by unique id (DV files are immutable).

Example:
    >>> from lakequery.dv.descriptor import Descriptor
    >>> inline = Descriptor(
    ...     "i", "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", None, 44, 6
    ... )
    >>> list(load_deletion_vectors(None, "/t", [("f.parquet", inline)])[0])
    [3, 4, 7, 11, 18, 29]
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from pyroaring import BitMap64

from lakequery.dv.bitmap import deserialize
from lakequery.dv.descriptor import Descriptor
from lakequery.errors import (
    DeletionVectorError,
    LakeQueryError,
    ObjectNotFoundError,
    ShortReadError,
    StorageError,
)

if TYPE_CHECKING:
    import numpy.typing as npt

    from lakequery.storage import Storage

_CACHE_ENTRIES = 4096
_cache: OrderedDict[tuple[str, str], BitMap64] = OrderedDict()
_lock = threading.Lock()


def parse_dv_record(record: bytes, descriptor: Descriptor, *, data_file: str) -> BitMap64:
    """Validates and parses ``sizeInBytes + 8`` bytes read at the descriptor's offset."""
    size = descriptor.size_in_bytes
    where = descriptor.unique_id
    if len(record) != size + 8:
        raise DeletionVectorError(
            data_file, where, f"expected {size + 8} bytes at offset, found {len(record)}"
        )
    (stored_size,) = struct.unpack_from(">I", record, 0)
    if stored_size != size:
        raise DeletionVectorError(
            data_file, where, f"size field says {stored_size}, descriptor says {size}"
        )
    payload = record[4 : 4 + size]
    (crc,) = struct.unpack_from(">I", record, 4 + size)
    if zlib.crc32(payload) != crc:
        raise DeletionVectorError(data_file, where, "CRC-32 mismatch")
    return _parse_payload(payload, descriptor, data_file)


def _parse_payload(payload: bytes, descriptor: Descriptor, data_file: str) -> BitMap64:
    try:
        bm = deserialize(payload)
    except ValueError as exc:
        raise DeletionVectorError(data_file, descriptor.unique_id, str(exc)) from exc
    if len(bm) != descriptor.cardinality:
        raise DeletionVectorError(
            data_file,
            descriptor.unique_id,
            f"bitmap holds {len(bm)} rows, descriptor cardinality is {descriptor.cardinality}",
        )
    return bm


def _sole_record(data: bytes, descriptor: Descriptor, data_file: str) -> bytes:
    """The record of a DV file read whole because its descriptor has no offset.

    The protocol says an absent offset means 0, and kernel-rs reads at 1 (after the
    version byte); digest §19 item 2 recommends 1 when byte 0 is the version byte and the
    size there matches, else 0. Decision: that holds only while the file holds exactly
    this one record. A file with more records (writers that pack several DVs always set
    offsets) makes the descriptor ambiguous: the first record's CRC and cardinality could
    well match, and its rows belong to another data file, so it is refused.
    """
    size = descriptor.size_in_bytes + 8
    if len(data) == size + 1 and data[:1] == b"\x01":
        return data[1:]
    if len(data) == size:
        return data
    raise DeletionVectorError(
        data_file,
        descriptor.unique_id,
        f"the descriptor has no offset and the DV file holds {len(data)} bytes, not one "
        f"{descriptor.size_in_bytes}-byte DV: ambiguous",
    )


def _load_one(storage: Storage | None, root: str, data_file: str, d: Descriptor) -> BitMap64:
    if d.cardinality == 0:
        return BitMap64()
    if d.is_inline:
        try:
            raw = d.inline_bytes()
        except ValueError as exc:
            raise DeletionVectorError(data_file, d.unique_id, f"bad inline DV: {exc}") from exc
        return _parse_payload(raw, d, data_file)
    if storage is None:
        raise DeletionVectorError(data_file, d.unique_id, "no storage to read the DV file from")
    try:
        path = d.absolute_path(root)
    except ValueError as exc:
        raise DeletionVectorError(data_file, d.unique_id, str(exc)) from exc
    try:
        if d.offset is None:
            record = _sole_record(storage.read(path), d, data_file)
        else:
            record = storage.read_range(path, d.offset, d.size_in_bytes + 8)
    except ObjectNotFoundError as exc:
        raise DeletionVectorError(data_file, d.unique_id, f"DV file {path} is missing") from exc
    except ShortReadError as exc:  # the descriptor claims bytes the file does not hold
        raise DeletionVectorError(data_file, d.unique_id, f"cannot read {path}: {exc}") from exc
    except StorageError:
        raise  # the store failed, the DV may be fine: callers retry StorageErrors
    except LakeQueryError as exc:
        raise DeletionVectorError(data_file, d.unique_id, f"cannot read {path}: {exc}") from exc
    return parse_dv_record(record, d, data_file=data_file)


#: A DV deleting more rows than this is checked against its data file's footer before
#: its positions are materialized (8 bytes each): the log's ``numRecords`` is a claim
#: like the DV's, and a few kilobytes of run containers can claim billions of rows.
FOOTER_CHECK_ROWS = 1 << 22


def checked_positions(
    bitmap: BitMap64,
    data_file: str,
    descriptor: Descriptor,
    num_records: int | None,
    footer_rows: Callable[[], int],
) -> npt.NDArray[np.int64]:
    """The sorted deleted positions of one data file, refusing a DV that deletes a row
    the file does not have: its largest position must be below the file's ``numRecords``
    (when the log states it) and, for a DV of more than :data:`FOOTER_CHECK_ROWS` rows,
    below the row count in the file's footer. So the positions materialized never exceed
    the file's true rows (or that bound), whatever the descriptor and the log claim.

    Raises:
        DeletionVectorError: naming the data file and DV.
    """
    from lakequery.dv.bitmap import to_numpy

    if len(bitmap):
        top = int(bitmap.max())
        bounds = [("numRecords", num_records)]
        if len(bitmap) > FOOTER_CHECK_ROWS:
            bounds.append(("rows in its footer", footer_rows()))
        for what, rows in bounds:
            if rows is not None and top >= rows:
                raise DeletionVectorError(
                    data_file,
                    descriptor.unique_id,
                    f"deletes row {top} of a file whose {what} is {rows}",
                )
    return to_numpy(bitmap)


def deleted_positions(
    storage: Storage,
    items: Sequence[tuple[str, Descriptor]],
    num_records: Sequence[int | None],
) -> list[npt.NDArray[np.int64]]:
    """The sorted deleted positions of each ``(data file, descriptor)`` pair: the DVs
    loaded by :func:`load_deletion_vectors`, each held to its file's rows by
    :func:`checked_positions` (``num_records`` from the log; the footer read only when
    that function needs it)."""
    from lakequery.parquet_footers import footer_row_counts

    def footer_rows(path: str) -> Callable[[], int]:
        return lambda: footer_row_counts(storage, [path])[0]

    bitmaps = load_deletion_vectors(storage, storage.root, items)
    return [
        checked_positions(bitmap, path, d, n, footer_rows(path))
        for bitmap, (path, d), n in zip(bitmaps, items, num_records, strict=True)
    ]


def load_deletion_vectors(
    storage: Storage | None, root: str, items: Sequence[tuple[str, Descriptor]]
) -> list[BitMap64]:
    """Loads the DVs of ``(data file, descriptor)`` pairs, concurrently, with caching.

    Raises:
        DeletionVectorError: naming the data file and DV at fault.
    """
    results: list[BitMap64 | None] = [None] * len(items)
    todo: list[int] = []
    with _lock:
        for i, (_, d) in enumerate(items):
            hit = _cache.get((root, d.unique_id))
            if hit is not None:
                _cache.move_to_end((root, d.unique_id))
                results[i] = hit
            else:
                todo.append(i)
    if todo:

        def load(i: int) -> BitMap64:
            return _load_one(storage, root, items[i][0], items[i][1])

        # without storage every DV is inline (the others fail in _load_one): no waits
        loaded = storage.map_io(load, todo) if storage is not None else [load(i) for i in todo]
        with _lock:
            for i, bm in zip(todo, loaded, strict=True):
                results[i] = bm
                _cache[(root, items[i][1].unique_id)] = bm
                while len(_cache) > _CACHE_ENTRIES:
                    _cache.popitem(last=False)
    return [r if r is not None else BitMap64() for r in results]
