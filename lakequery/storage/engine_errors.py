"""Storage failures that reach lakequery through a query engine, told apart from bad data.

DuckDB reads object stores through the fsspec filesystem lakequery registers on its
connection (:meth:`~lakequery.storage.base.Storage.register_duckdb`); PyArrow through an
``FSSpecHandler``. When the store fails (a 5xx left after the retries, a dropped
connection, a short body) the Python exception comes back wrapped: DuckDB raises a plain
``duckdb.Error`` whose text carries the Python traceback of the filesystem call, PyArrow
re-raises the ``OSError``. Without care those would be reported as a corrupt log, a bad
predicate or an engine error. :func:`storage_failure` recognises them so that callers
raise :class:`~lakequery.errors.StorageError` naming the object instead.

Decision: a DuckDB error carrying a Python traceback (also when PyArrow re-raises it as
an ``OSError`` from DuckDB's record batch stream) can only come from a filesystem lakequery
registered (lakequery registers no Python functions on its private cursors), so it is a
storage failure; the object named is the first table location found in the text,
else the location the caller was reading.

Example:
    >>> from lakequery.storage.engine_errors import storage_failure
    >>> err = storage_failure(ConnectionResetError("reset by peer"), "s3://b/t/x.parquet")
    >>> err.operation, err.uri
    ('read', 's3://b/t/x.parquet')
    >>> storage_failure(ValueError("bad"), "s3://b/t") is None
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from lakequery.errors import CorruptLogError, LakeQueryError, ObjectNotFoundError, StorageError

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")

_TRACEBACK = "Traceback (most recent call last)"
_PRIVATE = re.compile(r"^lq(s3|memory|file)[0-9a-f]{10}$")
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Timeout)\b[^ ]*: ")
_LOCATION = re.compile(r"[a-z][a-z0-9]*://[^\s'\"]+")


def storage_failure(exc: BaseException, where: str, operation: str = "read") -> StorageError | None:
    """Return the :class:`StorageError` ``exc`` stands for, or None if it is no storage failure.

    Args:
        exc: An exception raised by DuckDB or PyArrow while reading.
        where: The location being read, named when the error text names none.
        operation: The operation to name in the error.
    """
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, LakeQueryError):
        return None
    text = str(exc)
    if _TRACEBACK in text and (_is_duckdb_error(exc) or isinstance(exc, OSError)):
        return StorageError(_named(text, where), operation, _reason(text, exc))
    if isinstance(exc, FileNotFoundError):
        return None
    if _client_cause(exc):  # botocore/aiohttp errors, or OSErrors s3fs made of them
        return StorageError(where, operation, f"{type(exc).__name__}: {text}"[:400])
    return None


def log_storage_failure(
    exc: BaseException, paths: Sequence[str], log_dir: str
) -> StorageError | None:
    """:func:`storage_failure` of a statement over the log files ``paths``: named by the
    file when there is one, else by the error text or the log directory (naming the first
    of several files would name one that may have been read fine)."""
    return storage_failure(exc, paths[0] if len(paths) == 1 else log_dir)


def commit_read_error(exc: BaseException, log_dir: str, paths: Sequence[str]) -> Exception:
    """What a failed engine read of the commit files ``paths`` stands for: the store's
    failure (:class:`StorageError`), a missing commit (:class:`ObjectNotFoundError`), or
    a commit that does not parse (:class:`CorruptLogError` of ``log_dir``)."""
    import duckdb

    failure = log_storage_failure(exc, paths, log_dir)
    if failure is not None:
        return failure
    if isinstance(exc, duckdb.IOException):
        missing = next((p for p in paths if p.rsplit("/", 1)[-1] in str(exc)), paths[0])
        return ObjectNotFoundError(missing, "read commit")
    return CorruptLogError(log_dir, str(exc).splitlines()[0][:300])


def raise_storage_failure(exc: BaseException, where: str, operation: str = "read") -> None:
    """Raise the :class:`StorageError` ``exc`` stands for (``exc`` itself when it is one);
    return when it is no storage failure. Call it inside ``except`` blocks."""
    failure = storage_failure(exc, where, operation)
    if failure is exc:
        raise exc
    if failure is not None:
        raise failure from exc


def _is_duckdb_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb")


def _client_cause(exc: BaseException) -> bool:
    """Whether ``exc`` or its causes come from the object-store client or the network."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        module = type(current).__module__.split(".")[0]
        if module in ("botocore", "aiobotocore", "aiohttp", "s3fs", "urllib3"):
            return True
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        current = current.__cause__ or current.__context__
    return False


def _named(text: str, where: str) -> str:
    """The first object location in ``text`` (in ``where``'s bucket when ``where`` is a
    URI), in its public scheme: DuckDB names objects by the bridge's private protocol
    (``lqs3<digest>://``)."""
    bucket = where.split("://", 1)[1].split("/", 1)[0] if "://" in where else ""
    for match in _LOCATION.finditer(text):
        scheme, path = match.group(0).rstrip(".,:;)'").split("://", 1)
        private = _PRIVATE.match(scheme)
        public = private.group(1) if private else scheme
        if "/" in path.strip("/") and (not bucket or path.split("/", 1)[0] == bucket):
            return f"{public}://{path}"
    return where


_PRIVATE_SCHEME = re.compile(r"\blq(s3|memory|file)[0-9a-f]{10}://")


def public_text(text: str) -> str:
    """``text`` (an engine's error message) with the bridges' private protocols
    (``lqs3<digest>://``) spelled as the public schemes they stand for (``s3://``).

    Example:
        >>> public_text('Malformed JSON in file "lqs3985eab6354://b/t/_delta_log/1.json"')
        'Malformed JSON in file "s3://b/t/_delta_log/1.json"'
    """
    return _PRIVATE_SCHEME.sub(lambda m: f"{m.group(1)}://", text)


def _reason(text: str, exc: BaseException) -> str:
    """The Python exception line of a traceback carried in an engine's error text."""
    lines = [line.strip() for line in text.splitlines()]
    found = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return (found[-1] if found else next((x for x in lines if x), type(exc).__name__))[:400]


def relation_reader(
    rel: Any, where: str = "", *, batch_size: int | None = None
) -> pa.RecordBatchReader:
    """Execute a DuckDB relation as a record batch stream (``to_arrow_reader``); a store
    failure while executing it raises :class:`StorageError`, when it starts or while
    batches are read. ``batch_size``: rows per batch (approximate; default DuckDB's)."""
    import pyarrow as pa

    try:
        reader: pa.RecordBatchReader = (
            rel.to_arrow_reader() if batch_size is None else rel.to_arrow_reader(batch_size)
        )
    except Exception as exc:  # executing the query reads the store, which may fail
        raise_storage_failure(exc, where)
        raise
    return pa.RecordBatchReader.from_batches(reader.schema, translated(reader, where))


def translated(items: Iterable[T], where: str) -> Iterator[T]:
    """Yield ``items``; a store failure while producing the next one raises
    :class:`StorageError` (other errors pass unchanged). One check per item (a batch)."""
    it = iter(items)
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except Exception as exc:
            raise_storage_failure(exc, where)
            raise
        yield item
