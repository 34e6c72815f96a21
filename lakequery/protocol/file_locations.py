"""Where a data file lives: the table's own files and files outside its root.

The protocol (digest §4.3) lets ``add.path`` be a path relative to the table root or an
absolute URI; a shallow clone references its source's files by absolute URI. Replay keys
a file by its decoded path, made relative when it is an absolute path inside the root
(:func:`lakequery.protocol.replay.key_sql`), so a key is either *relative* (the table's
own file) or *external* (an absolute URI or OS path somewhere else).

Security rule (checked over all live files by :func:`lakequery.protocol.replay.check_paths`
before any file is read):

* a relative key must not leave the root: a ``..`` segment is refused (also decoded from
  ``%2E%2E``), and so is a ``..`` segment in an absolute path, whose spelling would hide
  which file it names (VACUUM could otherwise mistake a file of the root for a foreign one);
* an external key must be on the table's own kind of storage, opened with the table's
  storage options: ``/abs``, ``file:/abs``, ``file:///abs`` or ``file://localhost/abs``
  for a local table, ``s3://`` (``s3a://``, ``s3n://``) for an S3 table, ``memory://``
  for an in-memory table. Any other scheme (``http://``, ``abfss://``, an ``s3://`` file of
  a local table, ``file://host/``) is refused with :class:`~lakequery.errors.InvalidPathError`.

The same rule holds for deletion vector files (``p`` paths, ``u`` prefixes:
:func:`lakequery.dv.descriptor.check_descriptors`) and for the change feed's files; on
local disk, symbolic links leading out of the root are refused as well
(:mod:`lakequery.storage.local_links`).

External files are never the table's own: VACUUM only ever lists and deletes under the
root, commands remove them from the log (a ``remove`` action) but never delete them.

Example:
    >>> import pyarrow as pa
    >>> keys = pa.array(["a=1/p.parquet", "file:///src/p.parquet", "/src/q.parquet"])
    >>> external_mask(keys).to_pylist()
    [False, True, True]
    >>> file_locations("/clone", keys).to_pylist()
    ['/clone/a=1/p.parquet', '/src/p.parquet', '/src/q.parquet']
    >>> absolute_uri("/src/a b.parquet"), absolute_uri("s3a://b/k")
    ('file:/src/a%20b.parquet', 's3://b/k')
    >>> refusals("/clone", pa.array(["a/../../p.parquet", "http://h/p.parquet", "/x/p"])).to_pylist()
    ['a .. segment leaves the table root', 'a file outside the table root must be on the same storage (/abs or file:///abs)', None]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import python_array

#: A key that is an absolute location: a URI scheme or an absolute OS path.
ABSOLUTE_PATTERN = r"^([a-zA-Z][a-zA-Z0-9+.-]*:|/)"

#: A ``..`` path segment anywhere.
PARENT_SEGMENT_PATTERN = r"(^|/)\.\.(/|$)"

# How file URIs of a local table become OS paths, and S3 spellings become s3://.
_LOCAL_URI = r"^file:(//(localhost)?)?/"
_S3_URI = r"^s3[an]://"


def storage_kind(root: str) -> str:
    """``file``, ``s3`` or ``memory`` for a :attr:`Storage.root`; ``other`` otherwise."""
    if root.startswith("/"):
        return "file"
    if root.startswith("s3://"):
        return "s3"
    if root.startswith("memory://"):
        return "memory"
    return "other"


#: Per storage kind: the absolute spellings of a file lakequery opens with the table's
#: storage, and how the refusal names them.
_ALLOWED: dict[str, tuple[str, str]] = {
    "file": (r"^(/[^/]|file:/[^/]|file:///[^/]|file://localhost/[^/])", "/abs or file:///abs"),
    "s3": (r"^s3[an]?://[^/]+/[^/]", "s3://bucket/key"),
    "memory": (r"^memory://[^/]+/[^/]", "memory://name/key"),
}


def all_plain_relative(keys: Any) -> bool:
    """True when no key can be external or refused, so the regular-expression kernels
    of :func:`external_mask` and :func:`refusals` can be skipped: no key is empty or
    null, none starts or ends with ``/``, and the bytes hold no ``:`` and no ``..``.

    One NumPy pass over the string buffers (a few ms for 200,000 keys, where each regular
    expression takes tens). False also for a ``..`` spanning two keys, or an Arrow type
    other than string / large_string: the caller then runs the exact checks.

    Example:
        >>> all_plain_relative(pa.array(["a=1/p.parquet", "q.parquet"]))
        True
        >>> [all_plain_relative(pa.array([k])) for k in ["/x/p", "s3://b/p", "a/../p", "d/"]]
        [False, False, False, False]
    """
    chunks = keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]
    return all(_plain_chunk(chunk) for chunk in chunks)


_SLASH, _COLON, _DOT = ord("/"), ord(":"), ord(".")
_BLOCK = 1 << 20


def _plain_chunk(arr: Any) -> bool:
    if len(arr) == 0:
        return True
    if arr.null_count or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return False
    width = np.dtype(np.int32 if pa.types.is_string(arr.type) else np.int64)
    _, offset_buffer, data_buffer = arr.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=width)[arr.offset : arr.offset + len(arr) + 1]
    offsets = offsets.astype(np.int64, copy=False)
    starts, ends = offsets[:-1], offsets[1:]
    if data_buffer is None or bool((ends <= starts).any()):
        return False  # an empty key
    data = np.frombuffer(data_buffer, dtype=np.uint8)
    if bool((data[starts] == _SLASH).any()) or bool((data[ends - 1] == _SLASH).any()):
        return False
    # in blocks (overlapping by one byte for ".."), so the temporaries stay small
    for start in range(int(offsets[0]), int(offsets[-1]), _BLOCK):
        block = data[start : min(start + _BLOCK + 1, int(offsets[-1]))]
        if bool((block == _COLON).any()):
            return False
        dots = block == _DOT
        if bool((dots[1:] & dots[:-1]).any()):
            return False
    return True


def external_mask(keys: Any) -> pa.BooleanArray:
    """True where a replay key (decoded path) is an absolute location, i.e. not a file
    relative to the table root."""
    out: pa.BooleanArray = pc.match_substring_regex(keys, ABSOLUTE_PATTERN)
    return out


def _normalized(keys: Any) -> Any:
    local = pc.replace_substring_regex(keys, _LOCAL_URI, "/")
    return pc.replace_substring_regex(local, _S3_URI, "s3://")


def normalize_location(location: str) -> str:
    """An absolute location in :class:`~lakequery.storage.Storage` form: file URIs become
    OS paths, ``s3a://``/``s3n://`` become ``s3://``; other spellings are unchanged."""
    import re  # the same patterns as the vectorised form, for one location

    return re.sub(_S3_URI, "s3://", re.sub(_LOCAL_URI, "/", location))


def file_locations(root: str, keys: Any, *, plain: bool | None = None) -> pa.StringArray:
    """The storage location of each replay key: ``root/key`` for the table's own files,
    the normalized absolute location for external ones (vectorised, one pass). ``plain``:
    :func:`all_plain_relative` of the keys when the caller already knows it (a load's
    answer holds for any subset of its files)."""
    if isinstance(keys, pa.ChunkedArray):
        # no files (a filter pruned them all): combine_chunks() of no chunks, like a Python
        # list, makes pyarrow import pandas (0.15-0.2 s of a fresh process)
        keys = keys.combine_chunks() if keys.num_chunks else pa.nulls(0, keys.type)
    if plain is None:
        plain = all_plain_relative(keys)
    if plain and len(keys) <= pc.FEW_ROWS and pa.types.is_string(keys.type):
        # a short list as Python strings (no kernel call), built buffer by buffer:
        # pa.array of a Python list would make pyarrow import pandas
        short: Any = python_array([f"{root}/{k}" for k in keys.to_pylist()], pa.string())
        return short  # type: ignore[no-any-return]
    inside: Any = pc.utf8_replace_slice(keys, start=0, stop=0, replacement=root + "/")
    if plain:
        return inside  # type: ignore[no-any-return]
    external = external_mask(keys)
    if not pc.any(external).as_py():
        return inside  # type: ignore[no-any-return]
    out: pa.StringArray = pc.if_else(external, _normalized(keys), inside)
    return out


def absolute_uri(location: str) -> str:
    """The absolute ``add.path`` (a URI, percent-encoded once) of a storage location:
    ``file:/abs`` for an OS path (Hadoop's spelling, which Spark's DML matches against
    ``_metadata.file_path`` character by character), ``s3://`` and ``memory://`` as they
    are."""
    from lakequery.writer.partition_values import uri_encode_path

    location = normalize_location(location)
    if location.startswith("/"):
        return "file:" + uri_encode_path(location)
    return uri_encode_path(location)


def refusals(root: str, keys: Any) -> pa.StringArray:
    """Why lakequery refuses each replay key (NULL: accepted), by the rule in the module
    docstring; vectorised over all keys."""
    allowed, spelled = _ALLOWED.get(storage_kind(root), ("$^", "the table's storage"))
    parent = pc.match_substring_regex(keys, PARENT_SEGMENT_PATTERN)
    foreign = pc.and_(external_mask(keys), pc.invert(pc.match_substring_regex(keys, allowed)))
    directory = pc.match_substring_regex(keys, "^$|/$")
    no_reason = pa.scalar(None, pa.string())
    out: pa.StringArray = pc.if_else(
        parent,
        pa.scalar("a .. segment leaves the table root"),
        pc.if_else(
            foreign,
            pa.scalar(f"a file outside the table root must be on the same storage ({spelled})"),
            pc.if_else(
                directory, pa.scalar("an empty path or one ending in / names no file"), no_reason
            ),
        ),
    )
    return out
