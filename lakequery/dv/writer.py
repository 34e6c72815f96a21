"""Writing deletion vectors (digest §11.1, §11.5): the piece DELETE/UPDATE/MERGE build on.

``DeletionVectorWriter.delete_rows`` takes a live ``add`` action and the physical row
positions to delete, unions them with the file's existing DV, and stages the result:
small bitmaps inline (``i``), the others packed into ONE new DV file shared by all DVs of
the commit (``u``). ``finish`` writes that file with create-if-absent and returns the
``remove`` (old path + old DV) and ``add`` (same path, new DV, ``tightBounds=false``)
actions. A file whose rows would all be deleted is simply removed.

Example:
    >>> import lakequery as lq
    >>> from lakequery.storage import open_storage
    >>> storage = open_storage("memory://dv-doc")
    >>> add = {"path": "part-0.parquet", "partitionValues": {}, "size": 10,
    ...        "modificationTime": 0, "dataChange": True, "stats": '{"numRecords": 100}'}
    >>> w = DeletionVectorWriter(storage)
    >>> w.delete_rows(add, [3, 4, 7])
    >>> actions = w.finish()
    >>> [next(iter(a)) for a in actions]
    ['remove', 'add']
    >>> actions[1]["add"]["deletionVector"]["cardinality"]
    3
"""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyroaring import BitMap64

from lakequery.dv import z85
from lakequery.dv.bitmap import serialize
from lakequery.dv.descriptor import Descriptor, new_uuid_path
from lakequery.dv.files import load_deletion_vectors
from lakequery.errors import DeletionVectorError, StorageError
from lakequery.protocol.actions import remove_of
from lakequery.storage import Storage

#: Serialized bitmaps up to this many bytes are stored inline in the log.
DEFAULT_INLINE_THRESHOLD = 64


@dataclass
class _Staged:
    add: dict[str, Any]
    old: Descriptor | None
    bitmap: BitMap64
    num_records: int


def _num_records(add: Mapping[str, Any]) -> int:
    stats = add.get("stats")
    try:
        value = json.loads(stats)["numRecords"] if stats else None
    except (ValueError, KeyError, TypeError):
        value = None
    if value is None:
        raise DeletionVectorError(
            str(add.get("path")), "-", "a file needs stats.numRecords to carry a deletion vector"
        )
    return int(value)


def _loose_stats(stats: str | None) -> str | None:
    """The file's stats with ``tightBounds=false`` (min/max stay valid as bounds)."""
    if not stats:
        return stats
    doc = json.loads(stats)
    doc["tightBounds"] = False
    return json.dumps(doc, separators=(",", ":"))


class DeletionVectorWriter:
    """Stages deletion vectors for one commit and writes their shared DV file.

    Args:
        storage: the table's storage.
        inline_threshold: serialized bitmaps up to this size go inline in the log.
        prefix_length: length of the random sub-directory for the DV file (0: table root).
    """

    def __init__(
        self,
        storage: Storage,
        *,
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        prefix_length: int = 0,
    ) -> None:
        self.storage = storage
        self.inline_threshold = inline_threshold
        self.prefix_length = prefix_length
        self._staged: dict[str, _Staged] = {}

    def delete_rows(self, add: Mapping[str, Any], rows: Iterable[int] | np.ndarray) -> None:
        """Marks physical ``rows`` of the live file ``add`` as deleted (union with its DV)."""
        path = str(add["path"])
        staged = self._staged.get(path)
        if staged is None:
            dv = add.get("deletionVector")
            old = Descriptor.from_dict(dv) if dv else None
            bitmap = BitMap64()
            if old is not None and old.cardinality:
                bitmap = BitMap64(
                    load_deletion_vectors(self.storage, self.storage.root, [(path, old)])[0]
                )
            staged = _Staged(dict(add), old, bitmap, _num_records(add))
            self._staged[path] = staged
        values = np.asarray(list(rows) if not isinstance(rows, np.ndarray) else rows)
        if values.size:
            if values.min() < 0 or values.max() >= staged.num_records:
                raise DeletionVectorError(
                    path, "-", f"row positions must lie in [0, {staged.num_records})"
                )
            staged.bitmap.update(values.astype(np.uint64).tolist())

    def finish(self, *, now_ms: int | None = None) -> list[dict[str, Any]]:
        """Writes the shared DV file (if any) and returns the remove/add actions."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        actions: list[dict[str, Any]] = []
        packed = bytearray(b"\x01")
        on_disk: list[tuple[_Staged, int, int]] = []
        inline: dict[str, Descriptor] = {}
        for path, s in self._staged.items():
            if len(s.bitmap) == (s.old.cardinality if s.old is not None else 0):
                continue  # nothing new for this file
            if len(s.bitmap) >= s.num_records:
                continue  # fully deleted: remove only (below)
            payload = serialize(s.bitmap)
            if len(payload) <= self.inline_threshold:
                inline[path] = Descriptor(
                    "i", z85.encode(payload, pad=True), None, len(payload), len(s.bitmap)
                )
            else:
                offset = len(packed)
                packed += struct.pack(">I", len(payload)) + payload
                packed += struct.pack(">I", zlib.crc32(payload))
                on_disk.append((s, offset, len(payload)))
        file_id = uuid.uuid4()
        prefix = file_id.hex[: self.prefix_length] if self.prefix_length else ""
        if on_disk:
            rel = new_uuid_path(file_id, prefix)
            location = Descriptor("u", rel, 1, 0, 0).absolute_path(self.storage.root)
            if not self.storage.put_if_absent(location, bytes(packed)):
                raise StorageError(location, "write deletion vector", "file already exists")
        descriptors = dict(inline)
        for s, offset, size in on_disk:
            descriptors[str(s.add["path"])] = Descriptor(
                "u", new_uuid_path(file_id, prefix), offset, size, len(s.bitmap)
            )
        for path, s in self._staged.items():
            new = descriptors.get(path)
            full = len(s.bitmap) >= s.num_records
            if new is None and not full:
                continue
            actions.append({"remove": remove_of(s.add, now_ms)})
            if not full:
                assert new is not None
                add = dict(s.add)
                add["deletionVector"] = new.to_dict()
                add["dataChange"] = True
                add["stats"] = _loose_stats(s.add.get("stats"))
                actions.append({"add": add})
        self._staged.clear()
        return actions
