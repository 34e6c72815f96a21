"""Amazon S3 (and S3-compatible) backend on top of s3fs.

* Listing calls ``ListObjectsV2`` directly with ``Prefix``/``Delimiter`` and
  ``StartAfter`` so a listing begins at the start key and pages through the rest; it
  never touches s3fs's listing cache (which is disabled as well).
* Commits use a conditional ``PutObject`` with ``If-None-Match: *``; HTTP 412 means the
  object already exists. The store must support conditional writes (AWS S3 does).
* :meth:`S3Storage.read_many` issues all GETs concurrently on s3fs's event loop.
* Transient errors (5xx, SlowDown, dropped connections, short bodies) are retried by one
  bounded loop configured by the storage option ``"lakequery.retries"``; see
  :mod:`lakequery.storage.retry`.
* A conditional PUT whose answer was lost (the connection dropped, or a 5xx came back,
  after the store kept the object) is resolved by reading the object back: our bytes
  mean it is ours (created), other bytes mean another writer won, no object means it did
  not land (retried, then an error).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from aiohttp import ClientError as AioHttpClientError
from botocore.exceptions import BotoCoreError, ClientError
from fsspec.asyn import sync
from s3fs import S3FileSystem

from lakequery.errors import ObjectNotFoundError, StorageError
from lakequery.storage.base import FileInfo, Storage
from lakequery.storage.retry import install_s3fs_handler, retries_from_options, s3fs_retry_kwargs

#: Objects per ``ListObjectsV2`` page (the S3 maximum).
LIST_PAGE_SIZE = 1000
#: Concurrent GETs issued by :meth:`S3Storage.read_many`.
MAX_CONCURRENT_READS = 64
#: Attempts of a conditional PUT answered with 409 ConditionalRequestConflict.
_CONFLICT_ATTEMPTS = 5
#: Error codes meaning "the object already exists" for a PUT with If-None-Match: *.
_EXISTS_CODES = frozenset({"PreconditionFailed", "412"})
#: Error codes of a conditional PUT racing another one; S3 asks to retry.
_CONFLICT_CODES = frozenset({"ConditionalRequestConflict", "OperationAborted", "409"})


class RetryingS3FileSystem(S3FileSystem):  # type: ignore[misc]  # s3fs is untyped
    """``S3FileSystem`` making ``1 + lakequery_retries`` attempts per request.

    The attempt count is an instance setting (s3fs keeps it as a class attribute), so
    tables with different ``lakequery.retries`` options can live in one process; DuckDB's
    bridge subclasses this class and gets the same argument.
    """

    def __init__(self, *args: Any, lakequery_retries: int = 4, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retries = 1 + int(lakequery_retries)


#: What s3fs takes besides its ``S3FileSystem`` arguments: fsspec's listing cache and
#: instance cache switches, and aiobotocore's session arguments.
_S3FS_EXTRA_OPTIONS = frozenset(
    {"use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache"}
)
_MAPPING_OPTIONS = ("client_kwargs", "config_kwargs", "s3_additional_kwargs")


@functools.cache
def _known_options() -> frozenset[str]:
    """The option names s3fs takes (once per process: every table opened checks them)."""
    import inspect

    from aiobotocore.session import AioSession

    known = set(inspect.signature(S3FileSystem.__init__).parameters)
    known |= set(inspect.signature(AioSession.__init__).parameters) | _S3FS_EXTRA_OPTIONS
    return frozenset(known - {"self", "kwargs"})


def _check_options(options: Mapping[str, Any]) -> None:
    """Refuses options s3fs would only trip over at the first request, deep in its session
    (``TypeError: AioSession.__init__() got an unexpected keyword argument``): unknown
    keys, such as deltalake's ``AWS_ACCESS_KEY_ID``, and argument maps that are not maps.

    Raises:
        ValueError: naming the options.
    """
    known = _known_options()
    unknown = sorted(
        str(k) for k in options if str(k) not in known and not str(k).startswith("lakequery.")
    )
    if unknown:
        raise ValueError(
            f"unknown storage option(s) {unknown}: s3fs's S3FileSystem arguments are "
            "expected (key, secret, token, endpoint_url, client_kwargs={'region_name': ...}, "
            "...), not deltalake's AWS_* keys"
        )
    for name in _MAPPING_OPTIONS:
        if name in options and not isinstance(options[name], Mapping):
            raise ValueError(f"storage option {name!r} must be a mapping, not {options[name]!r}")


class S3Storage(Storage):
    """A table under ``s3://bucket/prefix``; locations are ``s3://bucket/key``."""

    _client_errors = (OSError, BotoCoreError, ClientError, AioHttpClientError)

    def __init__(self, root: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self._options = dict(storage_options or {})
        try:
            retries = retries_from_options(self._options)
            _check_options(self._options)
        except ValueError as exc:
            raise StorageError(root, "open", str(exc)) from None
        install_s3fs_handler()
        self._fs_kwargs: dict[str, Any] = {
            **s3fs_retry_kwargs(self._options),
            "lakequery_retries": retries,
            "use_listings_cache": False,
            "skip_instance_cache": True,
        }
        super().__init__(root, "s3")  # the filesystem from _open_fs: again after a fork
        self.fs  # noqa: B018 (built now: bad options fail here, not at the first read)
        #: Keys per listing page; lowered by tests to exercise pagination.
        self.list_page_size = LIST_PAGE_SIZE

    def _open_fs(self) -> RetryingS3FileSystem:
        return RetryingS3FileSystem(**self._fs_kwargs)

    @property
    def options(self) -> dict[str, Any] | None:
        return dict(self._options) if self._options else None

    def _bridge_fs_kwargs(self) -> Mapping[str, Any]:
        return self._fs_kwargs

    @staticmethod
    def _split(path: str) -> tuple[str, str]:
        bucket, _, key = path.removeprefix("s3://").partition("/")
        return bucket, key

    # --- listing -----------------------------------------------------------------------------

    def list_from(self, directory: str, start: str) -> list[FileInfo]:
        """List objects directly under ``directory/`` named ``>= start``, sorted by name.

        A missing bucket lists as empty, like a missing directory.
        """
        bucket, key = self._split(directory.rstrip("/"))
        prefix = f"{key}/" if key else ""
        request: dict[str, Any] = {
            "Bucket": bucket,
            "Prefix": prefix,
            "Delimiter": "/",
            "MaxKeys": self.list_page_size,
        }
        after = start_after(start)
        if after:
            request["StartAfter"] = prefix + after
        found: list[FileInfo] = []
        with self._translate(directory, "list"):
            while True:
                try:
                    page = self.fs.call_s3("list_objects_v2", **request)
                except FileNotFoundError:  # no such bucket: nothing is there
                    return []
                for obj in page.get("Contents", []):
                    name = str(obj["Key"])[len(prefix) :]
                    if not name or "/" in name or name < start:
                        continue
                    found.append(
                        FileInfo(
                            path=f"{directory.rstrip('/')}/{name}",
                            name=name,
                            size=int(obj["Size"]),
                            modified_ms=_epoch_ms(obj["LastModified"]),
                            etag=str(obj["ETag"]) if obj.get("ETag") else None,
                        )
                    )
                token = page.get("NextContinuationToken")
                if not page.get("IsTruncated") or not token:
                    break
                request.pop("StartAfter", None)
                request["ContinuationToken"] = token
        found.sort(key=lambda f: f.name)
        return found

    # --- reading -----------------------------------------------------------------------------

    def _head(self, path: str, operation: str) -> Mapping[str, Any]:
        bucket, key = self._split(path)
        with self._translate(path, operation):
            head: Mapping[str, Any] = self.fs.call_s3("head_object", Bucket=bucket, Key=key)
            return head

    def exists(self, path: str) -> bool:
        """Return whether an object exists at ``path`` (one HEAD request)."""
        try:
            self._head(path, "exists")
        except ObjectNotFoundError:
            return False
        return True

    def size(self, path: str) -> int:
        """Return the size in bytes of the object at ``path`` (one HEAD request)."""
        return int(self._head(path, "size")["ContentLength"])

    async def _get(self, path: str) -> bytes:
        # max_concurrency=1: one GET, without the HEAD s3fs issues to plan chunked reads
        return bytes(await self.fs._cat_file(self._fs_path(path), max_concurrency=1))

    def read(self, path: str) -> bytes:
        """Return the content of the object at ``path`` (one GET request)."""
        with self._translate(path, "read"):
            data: bytes = sync(self.fs.loop, self._get, path)
            return data

    def read_many(self, paths: Sequence[str]) -> list[bytes]:
        """GET all ``paths`` concurrently on s3fs's event loop; order is kept."""
        if len(paths) <= 1:
            return [self.read(p) for p in paths]
        limit = asyncio.Semaphore(MAX_CONCURRENT_READS)

        async def fetch(path: str) -> bytes:
            async with limit:
                return await self._get(path)

        async def fetch_all() -> list[bytes | BaseException]:
            return await asyncio.gather(*(fetch(p) for p in paths), return_exceptions=True)

        results: list[bytes | BaseException] = sync(self.fs.loop, fetch_all)
        out: list[bytes] = []
        for path, result in zip(paths, results, strict=True):
            if isinstance(result, BaseException):
                with self._translate(path, "read"):
                    raise result
            out.append(result)
        return out

    # --- writing -----------------------------------------------------------------------------

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Conditional PUT with ``If-None-Match: *``; False when another object is there.

        The answer to a PUT can be lost after the store kept the object: the connection
        drops, or a 5xx comes back and the retry then finds the object (412). Both cases
        are resolved by reading the object back and comparing it with ``data`` (commit
        files carry a unique ``txnId``, so equal bytes are ours): equal -> True (created
        by this call, reported once), different -> False (another writer won), absent ->
        the PUT is tried again, and an error that remains is raised.

        Raises:
            StorageError: The PUT failed on every attempt and the object is not there, or
                the read-back failed too (the outcome is then unknown, which the message
                says).
        """
        bucket, key = self._split(path)
        for attempt in range(_CONFLICT_ATTEMPTS):
            try:
                with self._translate(path, "put_if_absent"):
                    self.fs.call_s3(
                        "put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*"
                    )
                return True
            except StorageError as exc:
                code = _client_error_code(exc)
                exists = isinstance(exc.__cause__, FileExistsError) or code in _EXISTS_CODES
                if code in _CONFLICT_CODES and attempt + 1 < _CONFLICT_ATTEMPTS:
                    time.sleep(0.05 * 2**attempt)
                    continue
                found = self._read_back(path, exc)
                if found is not None:
                    return found == data
                if exists and attempt + 1 < _CONFLICT_ATTEMPTS:
                    continue  # 412 but gone again (deleted meanwhile): try once more
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_back(self, path: str, failure: StorageError) -> bytes | None:
        """The object at ``path`` after a PUT failed with ``failure``; None if absent."""
        try:
            return self.read(path)
        except ObjectNotFoundError:
            return None
        except StorageError as exc:
            raise StorageError(
                path,
                "put_if_absent",
                f"{failure.reason}; reading the object back to learn whether the PUT "
                f"landed failed too ({exc.reason}): outcome unknown",
            ) from exc

    # --- engine bridges ----------------------------------------------------------------------

    def polars_source(self, paths: Sequence[str]) -> tuple[list[str], dict[str, str] | None]:
        """Return the paths and the s3fs options translated to Polars/object_store names."""
        return list(paths), polars_options(self._options)


def start_after(start: str) -> str:
    """Return a ``StartAfter`` key that lists every name ``>= start`` (``""``: no bound).

    ``StartAfter`` is exclusive. Decrementing the last character of ``start`` and
    appending ``"~"`` (the highest printable ASCII character) gives a key just below
    ``start``: every name ``>= start`` sorts after it, and the rare extra names it admits
    (those between the two) are dropped by the caller's ``name >= start`` filter.
    """
    if not start:
        return ""
    below = ord(start[-1]) - 1
    if below < 0:
        return start[:-1]
    if 0xD800 <= below <= 0xDFFF:  # not encodable; step below the surrogate block
        below = 0xD7FF
    return f"{start[:-1]}{chr(below)}~"


def polars_options(options: Mapping[str, Any]) -> dict[str, str]:
    """Translate s3fs storage options into Polars (object_store) storage options.

    Args:
        options: s3fs arguments (``key``, ``secret``, ``token``, ``endpoint_url``,
            ``client_kwargs``, ``anon``, ...).

    Returns:
        Options such as ``aws_access_key_id``, ``aws_endpoint_url``, ``aws_region`` and
        ``aws_allow_http`` (for ``http://`` endpoints).
    """
    client_kwargs: Mapping[str, Any] = options.get("client_kwargs") or {}
    out: dict[str, str] = {}
    simple = {
        "key": "aws_access_key_id",
        "secret": "aws_secret_access_key",
        "token": "aws_session_token",
    }
    for src, dst in simple.items():
        if options.get(src):
            out[dst] = str(options[src])
    endpoint = options.get("endpoint_url") or client_kwargs.get("endpoint_url")
    if endpoint:
        out["aws_endpoint_url"] = str(endpoint)
        if str(endpoint).startswith("http://"):
            out["aws_allow_http"] = "true"
    region = client_kwargs.get("region_name") or options.get("region_name")
    if region:
        out["aws_region"] = str(region)
    if options.get("anon"):
        out["aws_skip_signature"] = "true"
    return out


def _epoch_ms(value: Any) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(float(value) * 1000)


def _client_error_code(exc: BaseException | None) -> str | None:
    """The S3 error code of the first botocore ``ClientError`` in the cause chain."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ClientError):
            return str(exc.response.get("Error", {}).get("Code", "")) or None
        exc = exc.__cause__
    return None
