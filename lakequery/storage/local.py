"""Local file system backend.

Commits use ``os.link`` for atomic create-if-absent: the full content is written to a
hidden temporary file in the target directory, then hard-linked to the final name,
which fails if that name exists. Readers therefore never see a partial commit, and
exactly one of many concurrent writers (threads or processes) wins.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fsspec.implementations.local import LocalFileSystem

from lakequery.errors import StorageError
from lakequery.storage.base import FileInfo, Storage

if TYPE_CHECKING:
    import pyarrow.fs


class LocalStorage(Storage):
    """A table on the local file system; locations are absolute OS paths."""

    def __init__(self, root: str) -> None:
        super().__init__(root, "file", LocalFileSystem())

    def _fs_path(self, path: str) -> str:
        return path.removeprefix("file://")

    def list_from(self, directory: str, start: str) -> list[FileInfo]:
        """List files directly inside ``directory`` named ``>= start``, sorted by name."""
        native = self._fs_path(directory)
        found: list[FileInfo] = []
        with self._translate(directory, "list"):
            try:
                entries = list(os.scandir(native))
            except (FileNotFoundError, NotADirectoryError):
                return []
            for entry in entries:
                if entry.name < start:
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:  # deleted while listing
                    continue
                found.append(
                    FileInfo(
                        path=f"{directory}/{entry.name}",
                        name=entry.name,
                        size=st.st_size,
                        modified_ms=st.st_mtime_ns // 1_000_000,
                    )
                )
        found.sort(key=lambda f: f.name)
        return found

    def _write_temp(self, path: str, data: bytes) -> str:
        """Write ``data`` durably to a hidden temporary file next to ``path``."""
        native = self._fs_path(path)
        directory, name = os.path.split(native)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "xb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return tmp

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` via a hard link; False if it already exists."""
        with self._translate(path, "put_if_absent"):
            tmp = self._write_temp(path, data)
            try:
                os.link(tmp, self._fs_path(path))
            except FileExistsError:
                return False
            except OSError as exc:
                raise StorageError(
                    path,
                    "put_if_absent",
                    f"atomic create via os.link failed ({exc}); the file system must "
                    "support hard links",
                ) from exc
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            _fsync_directory(os.path.dirname(self._fs_path(path)))
            return True

    def put(self, path: str, data: bytes) -> None:
        """Atomically create or replace ``path`` with ``data`` (temp file + rename)."""
        with self._translate(path, "put"):
            tmp = self._write_temp(path, data)
            try:
                os.replace(tmp, self._fs_path(path))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            _fsync_directory(os.path.dirname(self._fs_path(path)))

    def _read_range(self, path: str, offset: int, length: int) -> bytes:
        with open(self._fs_path(path), "rb") as fh:
            fh.seek(offset)
            return fh.read(length)

    def read(self, path: str) -> bytes:
        """Return the content of the file at ``path``."""
        with self._translate(path, "read"), open(self._fs_path(path), "rb") as fh:
            return fh.read()

    def arrow_filesystem(self) -> tuple[pyarrow.fs.FileSystem, Callable[[str], str]]:
        """Return ``pyarrow.fs.LocalFileSystem`` and the path mapping."""
        if self._arrow_fs is None:
            from pyarrow.fs import LocalFileSystem as ArrowLocalFileSystem

            self._arrow_fs = ArrowLocalFileSystem()
        return self._arrow_fs, self._fs_path

    def polars_source(self, paths: Sequence[str]) -> tuple[list[str], dict[str, str] | None]:
        """Local paths need no storage options."""
        return [self._fs_path(p) for p in paths], None


def _fsync_directory(directory: str) -> None:
    """Best effort: persist a directory entry (no-op where directories cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
