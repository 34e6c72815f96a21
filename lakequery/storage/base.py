"""The storage contract every backend honours, and the parts backends share.

A :class:`Storage` addresses one table root. Locations handed to and returned by it are
*full* locations in the form :meth:`Storage.join` produces (an absolute OS path for
local tables, ``s3://bucket/key`` or ``memory://name/key`` otherwise).

Guarantees (checked for every backend by ``tests/storage/test_contract.py``):

* :meth:`Storage.put_if_absent` is an atomic create-if-absent: of many concurrent
  writers of one name exactly one wins, and readers never see partial content.
* :meth:`Storage.list_from` lists the files directly inside a directory in
  lexicographic order starting at a key, and is never served from a cache, so a
  listing right after a write sees the new file (read-after-write).
* Failures raise :class:`~lakequery.errors.StorageError` naming the location; a missing
  object raises :class:`~lakequery.errors.ObjectNotFoundError` (a ``FileNotFoundError``).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from lakequery.errors import LakeQueryError, ObjectNotFoundError, ShortReadError, StorageError
from lakequery.storage import bridges

if TYPE_CHECKING:
    import duckdb
    import fsspec
    import pyarrow as pa
    import pyarrow.fs

#: Operations for which a missing object is reported as :class:`ObjectNotFoundError`.
_READ_OPERATIONS = frozenset({"exists", "read", "read_range", "size"})
#: Held while a filesystem is registered on a DuckDB database (the engine database is
#: shared by every thread's cursors); a new one in a forked child.
_REGISTERING = threading.Lock()


def _new_registering_lock() -> None:
    global _REGISTERING
    _REGISTERING = threading.Lock()


os.register_at_fork(after_in_child=_new_registering_lock)

#: Upper bound on the threads :meth:`Storage.map_io` (and so :meth:`Storage.read_many`) uses.
MAX_READ_THREADS = 32

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class FileInfo:
    """One file found by :meth:`Storage.list_from`.

    Attributes:
        path: Full location, usable with :meth:`Storage.read` (same form as
            :meth:`Storage.join` returns).
        name: Base name of the file.
        size: Size in bytes.
        modified_ms: Modification time in milliseconds since the epoch (object stores:
            ``LastModified``, whole seconds).
        etag: The object's entity tag where the store gives one (S3), else None: what
            tells two writes of the same size in the same second apart.
    """

    path: str
    name: str
    size: int
    modified_ms: int
    etag: str | None = None


class Storage(abc.ABC):
    """Byte-level access to one table root; see the module docstring for guarantees.

    Attributes:
        root: Normalised table root without trailing slash: an absolute OS path for local
            tables, ``s3://bucket/prefix`` or ``memory://name``.
        protocol: ``"file"``, ``"s3"`` or ``"memory"``.
        fs: The fsspec filesystem behind the backend (local tables create it on first use:
            their reads and listings go through ``os``, and importing fsspec costs a fresh
            process ~0.02 s).
    """

    #: Exception types of the underlying client that are translated to StorageError.
    _client_errors: tuple[type[BaseException], ...] = (OSError,)

    def __init__(
        self, root: str, protocol: str, fs: fsspec.AbstractFileSystem | None = None
    ) -> None:
        self.root = root
        self.protocol = protocol
        self._fs = fs
        self._fs_pid = os.getpid()
        self._opens_fs = fs is None  # the backend builds its filesystem (and can again)
        self._arrow_fs: pyarrow.fs.FileSystem | None = None

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        if self._fs is not None and self._opens_fs and self._fs_pid != os.getpid():
            # a forked child: the parent's client (s3fs's event loop, its connections)
            # is not fork-safe, so the child builds its own
            self._fs = self._arrow_fs = None
        if self._fs is None:
            self._fs = self._open_fs()
            self._fs_pid = os.getpid()
        return self._fs

    def _open_fs(self) -> fsspec.AbstractFileSystem:
        """The filesystem of a backend constructed without one."""
        raise NotImplementedError(f"{type(self).__name__} has no filesystem")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    @property
    def options(self) -> dict[str, Any] | None:
        """The storage options this backend was opened with (None when it takes none), for
        writers that open the same storage again (Spark tasks, data file writers)."""
        return None

    # --- locations -------------------------------------------------------------------------

    def join(self, *parts: str) -> str:
        """Return the full location of ``parts`` (decoded relative paths) under the root.

        Args:
            *parts: Relative path pieces such as ``"_delta_log"`` or ``"a=1/part-0.parquet"``.

        Returns:
            ``root + "/" + "/".join(parts)``, with surrounding slashes of each part removed.
        """
        pieces = [p.strip("/") for p in parts if p.strip("/")]
        return "/".join([self.root, *pieces])

    def _fs_path(self, path: str) -> str:
        """Map a full location to the path form ``self.fs`` expects."""
        return str(self.fs._strip_protocol(path))

    @contextlib.contextmanager
    def _translate(self, path: str, operation: str) -> Iterator[None]:
        """Turn client exceptions into lakequery storage errors naming ``path``."""
        try:
            yield
        except LakeQueryError:
            raise
        except FileNotFoundError as exc:
            if operation in _READ_OPERATIONS:
                raise ObjectNotFoundError(path, operation) from exc
            raise StorageError(path, operation, _reason(exc)) from exc
        except self._client_errors as exc:
            raise StorageError(path, operation, _reason(exc)) from exc

    # --- symbolic links (local tables) ---------------------------------------------------------

    def check_links(self, files: pa.Table, *, plain: bool | None = None) -> bool:
        """Refuses replayed files that are, or lie below, a symbolic link leading out of
        the table root (local tables, :mod:`lakequery.storage.local_links`; object stores
        have no links). True when the check found every data file on the way (here:
        nothing was looked at). ``plain``: whether every path is plainly relative
        (:func:`~lakequery.protocol.file_locations.all_plain_relative`), when the caller
        has it."""
        del files, plain
        return False

    def check_write_directory(self, directory: str) -> None:
        """Refuses to write into ``directory`` when it is reached through a link leading
        out of the root (local tables only)."""
        del directory

    # --- listing -----------------------------------------------------------------------------

    @abc.abstractmethod
    def list_from(self, directory: str, start: str) -> list[FileInfo]:
        """List the files directly inside ``directory`` whose name is ``>= start``.

        Sub-directories are not returned. Never served from a cache.

        Args:
            directory: Full location of the directory, e.g. ``join("_delta_log")``.
            start: Smallest name to return (``""`` lists everything).

        Returns:
            The files sorted lexicographically by name; ``[]`` if the directory is missing.
        """

    # --- reading -----------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """Return whether a file exists at ``path``."""
        with self._translate(path, "exists"):
            return bool(self.fs.isfile(self._fs_path(path)))

    def size(self, path: str) -> int:
        """Return the size in bytes of the file at ``path``."""
        with self._translate(path, "size"):
            return int(self.fs.size(self._fs_path(path)))

    def read(self, path: str) -> bytes:
        """Return the content of the file at ``path``.

        Raises:
            ObjectNotFoundError: The file does not exist.
            StorageError: Any other failure.
        """
        with self._translate(path, "read"):
            return bytes(self.fs.cat_file(self._fs_path(path)))

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """Return exactly ``length`` bytes of ``path`` starting at ``offset``.

        Raises:
            ValueError: ``offset`` or ``length`` is negative.
            ObjectNotFoundError: The file does not exist.
            StorageError: The range extends past the end of the file, or another failure.
        """
        if offset < 0 or length < 0:
            raise ValueError(f"invalid range offset={offset} length={length} for {path}")
        if length == 0:
            if not self.exists(path):
                raise ObjectNotFoundError(path, "read_range")
            return b""
        with self._translate(path, "read_range"):
            data = self._read_range(path, offset, length)
        _check_range(path, offset, length, data)
        return data

    def _read_range(self, path: str, offset: int, length: int) -> bytes:
        return bytes(self.fs.cat_file(self._fs_path(path), start=offset, end=offset + length))

    def read_many(self, paths: Sequence[str]) -> list[bytes]:
        """Read several files concurrently; the result keeps the order of ``paths``.

        Raises:
            ObjectNotFoundError: One of the files does not exist.
            StorageError: Any other failure.
        """
        return self.map_io(self.read, paths)

    #: :meth:`map_io` runs at most this many calls in the calling thread, one after another.
    serial_io: ClassVar[int] = 1

    def map_io(self, fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
        """``fn`` of every item, in order, where ``fn`` waits on this storage (a read, a
        ``stat``, a footer): on up to :data:`MAX_READ_THREADS` threads, so the waits
        overlap, unless there are at most :attr:`serial_io` items. The first exception
        raised is re-raised."""
        if len(items) <= self.serial_io:
            return [fn(x) for x in items]
        # imported here: a fresh process with few reads never pays for it (~2 ms, logging)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(MAX_READ_THREADS, len(items))) as pool:
            return list(pool.map(fn, items))

    # --- writing -----------------------------------------------------------------------------

    @abc.abstractmethod
    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Atomically create ``path`` with ``data`` unless it already exists.

        Never overwrites and never exposes partial content under ``path``.

        Returns:
            True if this call created the file with the full content, False if it existed.
        """

    def put(self, path: str, data: bytes) -> None:
        """Create or overwrite ``path`` with ``data`` (for hints such as ``_last_checkpoint``)."""
        with self._translate(path, "put"):
            self.fs.pipe_file(self._fs_path(path), data)

    def delete(self, path: str) -> None:
        """Delete the file at ``path``; deleting a missing file is not an error."""
        with self._translate(path, "delete"), contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self._fs_path(path))

    # --- engine bridges ----------------------------------------------------------------------

    def _bridge_fs_kwargs(self) -> Mapping[str, Any]:
        """Constructor arguments that rebuild ``self.fs`` (for the DuckDB bridge)."""
        return {}

    def register_duckdb(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make the paths :meth:`duckdb_path` returns readable on ``con``.

        Object-store backends register an fsspec filesystem under a private protocol name
        (derived from the backend and its options), so DuckDB never needs its ``httpfs``
        extension and tables with different credentials can share a connection.
        Registering again is a no-op.
        """
        if self.protocol == "file":
            return
        name = bridges.private_protocol(self.protocol, self._bridge_fs_kwargs())
        if name in con.list_filesystems():
            return
        with _REGISTERING:  # check and register as one step: the database is shared
            if name in con.list_filesystems():
                return
            bridge_cls = bridges.bridge_class(type(self.fs), name, self.protocol)
            con.register_filesystem(bridge_cls(**self._bridge_fs_kwargs()))

    def duckdb_path(self, path: str) -> str:
        """Return the form of ``path`` DuckDB reads after :meth:`register_duckdb`."""
        if self.protocol == "file":
            return self._fs_path(path)
        name = bridges.private_protocol(self.protocol, self._bridge_fs_kwargs())
        return f"{name}://{path.split('://', 1)[1]}"

    def arrow_filesystem(self) -> tuple[pyarrow.fs.FileSystem, Callable[[str], str]]:
        """Return a PyArrow filesystem and a function mapping locations to its paths."""
        if self._arrow_fs is None:
            from pyarrow.fs import PyFileSystem

            handler = _strict_handler_class()(self.fs)
            self._arrow_fs = PyFileSystem(handler)
        return self._arrow_fs, self._fs_path

    def polars_source(self, paths: Sequence[str]) -> tuple[list[str], dict[str, str] | None]:
        """Return ``(paths, storage_options)`` for ``polars.scan_parquet``.

        Raises:
            NotImplementedError: Polars cannot read this backend; fall back to Arrow.
        """
        raise NotImplementedError(f"Polars cannot read {self.protocol}:// locations")


@functools.cache
def _strict_handler_class() -> type[Any]:
    """PyArrow's ``FSSpecHandler`` opening files without ``fs.isfile`` first.

    ``isfile`` answers False on *any* error, so a failed HEAD (a 503, a dropped connection)
    became "file not found": a transient store failure reported as a missing data file.
    This handler asks ``fs.info``, which raises the real error, and reports a missing
    file only when the store says so.
    """
    from pyarrow import PythonFile
    from pyarrow.fs import FSSpecHandler

    class StrictFSSpecHandler(FSSpecHandler):  # type: ignore[misc]  # stubs mark it abstract
        def _open_for_read(self, path: str) -> Any:
            fs: Any = self.fs
            if fs.info(path).get("type") != "file":
                raise FileNotFoundError(path)
            return PythonFile(fs.open(path, mode="rb"), mode="r")

        def open_input_stream(self, path: str) -> Any:
            return self._open_for_read(path)

        def open_input_file(self, path: str) -> Any:
            return self._open_for_read(path)

    return StrictFSSpecHandler


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _check_range(path: str, offset: int, length: int, data: bytes) -> None:
    if len(data) != length:
        raise ShortReadError(
            path,
            "read_range",
            f"requested {length} bytes at offset {offset}, got {len(data)} (past end of file)",
        )
