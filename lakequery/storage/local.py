"""Local file system backend.

Commits use ``os.link`` for atomic create-if-absent: the full content is written to a
hidden temporary file in the target directory, then hard-linked to the final name,
which fails if that name exists. Readers therefore never see a partial commit, and
exactly one of many concurrent writers (threads or processes) wins.

Symbolic links leading out of the table root are refused (:mod:`.local_links`): in the
planned files (:meth:`LocalStorage.check_links`), in listings, in directories written
into, and as the last component of a file read through this class (opened with
``O_NOFOLLOW`` first, so a file that is no link costs no extra call).
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, BinaryIO

from lakequery.errors import StorageError
from lakequery.storage.base import FileInfo, Storage
from lakequery.storage.local_links import LinkGuard

if TYPE_CHECKING:
    import fsspec
    import pyarrow as pa
    import pyarrow.fs


class LocalStorage(Storage):
    """A table on the local file system; locations are absolute OS paths."""

    #: A local read or ``stat`` takes microseconds from the page cache: below this many, a
    #: thread pool costs more than the waits it overlaps (a fresh process reading two
    #: deletion vectors spent ~3 ms importing and starting one).
    serial_io = 8

    def __init__(self, root: str) -> None:
        super().__init__(root, "file")
        self.links = LinkGuard(root)

    def _open_fs(self) -> fsspec.AbstractFileSystem:
        from fsspec.implementations.local import LocalFileSystem

        return LocalFileSystem()

    def _fs_path(self, path: str) -> str:
        return path.removeprefix("file://")

    def exists(self, path: str) -> bool:
        """Return whether a file exists at ``path`` (links followed, as fsspec does)."""
        with self._translate(path, "exists"):
            return os.path.isfile(self._fs_path(path))

    def size(self, path: str) -> int:
        """Return the size in bytes of the file at ``path``."""
        with self._translate(path, "size"):
            return os.stat(self._fs_path(path)).st_size

    def delete(self, path: str) -> None:
        """Delete the file at ``path``; deleting a missing file is not an error."""
        with self._translate(path, "delete"), contextlib.suppress(FileNotFoundError):
            os.remove(self._fs_path(path))

    def check_links(self, files: pa.Table, *, plain: bool | None = None) -> bool:
        """Refuses replayed files (relative ``path`` keys and ``u`` deletion vectors) that
        are, or lie below, a symbolic link leading out of the table root. True when every
        data file was found on the way (each by its own ``lstat``). ``plain``: as in
        :meth:`Storage.check_links`."""
        from lakequery import arrow_kernels as pc
        from lakequery.dv.descriptor import u_prefixes
        from lakequery.protocol.file_locations import all_plain_relative, external_mask

        if files.num_rows == 0:
            return True
        keys = files.column("path")  # chunked: no copy of every path
        if plain is None:
            plain = all_plain_relative(keys)
        relative = keys if plain else pc.filter(keys, pc.invert(external_mask(keys)))
        dv_dirs = None
        if "deletion_vector" in files.column_names:
            dv = files.column("deletion_vector")
            if dv.null_count < len(dv):
                kind, path = (
                    pc.struct_field(dv, "storageType"),
                    pc.struct_field(dv, "pathOrInlineDv"),
                )
                # no Python value becomes an Arrow scalar (pyarrow would import pandas)
                on_disk = pc.and_kleene(pc.is_valid(kind), pc.match_substring_regex(kind, "^u$"))
                # chunked as it is (combine_chunks of no chunks would import pandas)
                dv_dirs = u_prefixes(pc.filter(path, on_disk))
        # files outside the root (shallow clones) are not looked at
        return self.links.check_relative(relative, dv_dirs) and plain

    def check_write_directory(self, directory: str) -> None:
        """Refuses to write into ``directory`` when a link between the root and it leads
        out of the root."""
        self.links.check_directory(self._fs_path(directory))

    def list_from(self, directory: str, start: str) -> list[FileInfo]:
        """List files directly inside ``directory`` named ``>= start``, sorted by name."""
        native = self._fs_path(directory)
        found: list[FileInfo] = []
        with self._translate(directory, "list"):
            self.links.check_directory(native)
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
                if entry.is_symlink():  # known from the listing, no extra call
                    self.links.refuse_if_escaping(self.links.relative(entry.path))
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
        self.links.check_directory(directory)
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

    def _open_for_read(self, path: str) -> BinaryIO:
        """Opens a file without following a final link; a link is followed only after
        :class:`LinkGuard` found its target inside the root (or the path is not under the
        root: a shallow clone's file, read as the log names it)."""
        native = self._fs_path(path)
        try:  # os.open, then a file object over its descriptor: one open, one audit event
            return os.fdopen(os.open(native, os.O_RDONLY | os.O_NOFOLLOW | _O_CLOEXEC), "rb")
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
        relative = self.links.relative(native)
        if relative:
            self.links.refuse_if_escaping(relative)
        return open(native, "rb")

    def _read_range(self, path: str, offset: int, length: int) -> bytes:
        with self._open_for_read(path) as fh:
            # never more than the file holds: ``read(n)`` allocates ``n`` bytes first, and
            # ``length`` may come from a hostile DV descriptor (the caller then reports the
            # short read)
            length = max(0, min(length, os.fstat(fh.fileno()).st_size - offset))
            fh.seek(offset)
            return fh.read(length)

    def read(self, path: str) -> bytes:
        """Return the content of the file at ``path``."""
        with self._translate(path, "read"), self._open_for_read(path) as fh:
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


_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _fsync_directory(directory: str) -> None:
    """Best effort: persist a directory entry (no-op where directories cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
