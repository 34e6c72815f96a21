"""In-process memory backend (``memory://name``), for tests and ephemeral tables.

Backed by fsspec's process-global :class:`~fsspec.implementations.memory.MemoryFileSystem`
store, so every ``memory://name`` storage in a process sees the same objects. Writes are
serialised by one process-wide lock, which makes put-if-absent an atomic check-and-set.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from fsspec.implementations.memory import MemoryFileSystem

from lakequery.storage.base import FileInfo, Storage

#: Serialises writes to the process-global memory store.
_WRITE_LOCK = threading.Lock()


class MemoryStorage(Storage):
    """A table in fsspec's process-global memory store."""

    def __init__(self, root: str) -> None:
        super().__init__(root, "memory", MemoryFileSystem())

    def _bridge_fs_kwargs(self) -> Mapping[str, Any]:
        return {}

    def list_from(self, directory: str, start: str) -> list[FileInfo]:
        """List files directly inside ``directory`` named ``>= start``, sorted by name."""
        with self._translate(directory, "list"):
            try:
                entries = self.fs.ls(self._fs_path(directory), detail=True)
            except FileNotFoundError:
                return []
        found: list[FileInfo] = []
        for entry in entries:
            name = str(entry["name"]).rsplit("/", 1)[-1]
            if entry["type"] != "file" or name < start:
                continue
            found.append(
                FileInfo(
                    path=f"{directory}/{name}",
                    name=name,
                    size=int(entry["size"]),
                    modified_ms=int(float(entry.get("created") or 0) * 1000),
                )
            )
        found.sort(key=lambda f: f.name)
        return found

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` under the store lock; False if it exists."""
        with _WRITE_LOCK, self._translate(path, "put_if_absent"):
            target = self._fs_path(path)
            if self.fs.isfile(target):
                return False
            self.fs.pipe_file(target, bytes(data))
            return True

    def put(self, path: str, data: bytes) -> None:
        """Create or overwrite ``path`` with ``data``."""
        with _WRITE_LOCK:
            super().put(path, bytes(data))

    def delete(self, path: str) -> None:
        """Delete ``path``; deleting a missing file is not an error."""
        with _WRITE_LOCK:
            super().delete(path)
