"""Turn a table URI into the matching :class:`~lakequery.storage.base.Storage` backend."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from lakequery.errors import InvalidPathError
from lakequery.storage.base import Storage

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)


#: A table location: a URI string or a local path (``pathlib.Path`` and other path-likes).
TableLocation = str | os.PathLike[str]


def open_storage(uri: TableLocation, storage_options: Mapping[str, Any] | None = None) -> Storage:
    """Open the storage backend for a table root.

    Args:
        uri: A local path (relative, absolute or starting with ``~``; a string or a
            path-like such as ``pathlib.Path``), a ``file:///abs`` URI,
            ``s3://bucket/prefix`` (``s3a://`` is accepted) or ``memory://name``.
        storage_options: s3fs arguments for ``s3://`` (``key``, ``secret``, ``token``,
            ``endpoint_url``, ``client_kwargs``, ...); ignored by the other backends.

    Returns:
        The backend, with :attr:`Storage.root` normalised (no trailing slash; local roots
        are absolute OS paths without scheme).

    Raises:
        InvalidPathError: The URI is empty, lacks a bucket or name, or has an unsupported
            scheme.

    Example:
        >>> from lakequery.storage import open_storage
        >>> st = open_storage("memory://docs-example/table/")
        >>> st.root
        'memory://docs-example/table'
        >>> commit = st.join("_delta_log", "00000000000000000000.json")
        >>> st.put_if_absent(commit, b'{"commitInfo":{}}'), st.put_if_absent(commit, b"x")
        (True, False)
        >>> [f.name for f in st.list_from(st.join("_delta_log"), "")]
        ['00000000000000000000.json']
        >>> st.delete(commit)
    """
    uri = location_text(uri)
    if not uri:
        raise InvalidPathError(uri, "empty table location")
    match = _SCHEME.match(uri)
    scheme = match.group(1).lower() if match else ""
    if scheme in ("", "file") or (not match and uri.lower().startswith("file:")):
        from lakequery.storage.local import LocalStorage

        return LocalStorage(_local_root(uri))
    rest = match.group(2) if match else ""
    if scheme in ("s3", "s3a"):
        from lakequery.storage.s3 import S3Storage

        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise InvalidPathError(uri, "an s3:// location needs a bucket")
        prefix = prefix.strip("/")
        return S3Storage(f"s3://{bucket}" + (f"/{prefix}" if prefix else ""), storage_options)
    if scheme == "memory":
        from lakequery.storage.memory import MemoryStorage

        name = rest.strip("/")
        if not name:
            raise InvalidPathError(uri, "a memory:// location needs a name")
        return MemoryStorage(f"memory://{name}")
    raise InvalidPathError(
        uri,
        f"unsupported storage scheme {scheme!r} (use a local path, file://, s3:// or memory://)",
    )


def location_text(uri: object) -> str:
    """A table location as text: strings as they are, path-likes by ``os.fspath``.

    Raises:
        TypeError: ``uri`` is neither (bytes paths included).
    """
    if isinstance(uri, str):
        return uri
    if isinstance(uri, os.PathLike):
        text = os.fspath(uri)
        if isinstance(text, str):
            return text
    raise TypeError(f"a table location is a string or a path, not {type(uri).__name__}")


def _local_root(uri: str) -> str:
    """Return the absolute OS path (no trailing slash) of a local path or file URI."""
    path = uri
    if uri.lower().startswith("file:"):
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise InvalidPathError(
                uri, f"file URIs on remote hosts ({parts.netloc}) are not supported"
            )
        path = unquote(parts.path)
        if not path:
            raise InvalidPathError(uri, "empty file URI path")
    return os.path.abspath(os.path.expanduser(path))
