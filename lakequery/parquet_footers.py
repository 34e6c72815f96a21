"""What data files' Parquet footers say: row counts (for files logged without
``stats.numRecords``, which the protocol leaves optional) and stored schemas (for readers
that must know a file's own column types, e.g. Spark before a type widening it cannot do).

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> _ = lq.write("memory://footers-doc", pa.table({"x": [1, 2, 3]}))
    >>> snap = lq.DeltaTable("memory://footers-doc").snapshot()
    >>> footer_row_counts(snap.storage, snap.files().column("path").to_pylist())
    [3]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from lakequery.errors import ObjectNotFoundError
from lakequery.protocol.file_locations import file_locations
from lakequery.storage import Storage

if TYPE_CHECKING:  # imported where footers are read: the DuckDB engine needs only SCHEMA_TAG
    import pyarrow.parquet as pq

T = TypeVar("T")


def _read_footers(
    storage: Storage, paths: Sequence[str], what: Callable[[pq.FileMetaData], T]
) -> list[T]:
    """``what`` of each file's footer (replay keys: relative to the table root, or a
    file's absolute location), concurrently."""
    import pyarrow.parquet as pq

    fs, to_fs = storage.arrow_filesystem()

    def one(location: str) -> T:
        try:
            with fs.open_input_file(to_fs(location)) as f:
                return what(pq.ParquetFile(f).metadata)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(location, "read data file footer") from exc

    if not paths:
        return []
    locations = file_locations(storage.root, pa.array(list(paths), pa.string())).to_pylist()
    return storage.map_io(one, [str(x) for x in locations])


def footer_row_counts(storage: Storage, paths: Sequence[str]) -> list[int]:
    """Physical rows of each data file (paths relative to the table root)."""
    return _read_footers(storage, paths, lambda md: int(md.num_rows))


def footer_metadata(storage: Storage, paths: Sequence[str]) -> list[pq.FileMetaData]:
    """The whole footer of each file (paths relative to the table root): row groups and
    their column statistics (``lq.convert_to_delta`` collects stats from them)."""
    return _read_footers(storage, paths, lambda md: md)


def footer_schemas(storage: Storage, paths: Sequence[str]) -> list[pa.Schema]:
    """The Arrow schema each data file stores (paths relative to the table root)."""
    return _read_footers(storage, paths, lambda md: md.schema.to_arrow_schema())


#: ``add.tags`` key under which lakequery's writer records :func:`schema_fingerprint` of the
#: data file it wrote. Files with equal fingerprints store the same Parquet schema (the
#: same columns, physical and logical types, nesting and key-value metadata), so a reader
#: needs to look at only one footer per fingerprint; files without the tag (other writers)
#: are looked at one by one.
SCHEMA_TAG = "lakequery.parquetSchema"


def schema_fingerprint(metadata: pq.FileMetaData) -> str:
    """A digest of everything in a footer that decides how a reader binds the file's
    columns: the Parquet schema tree (names, repetition, physical and logical types with
    their parameters, field ids) and the key-value metadata (e.g. ``ARROW:schema``)."""
    text = str(metadata.schema)
    if text.startswith("<"):  # pyarrow prefixes the object's repr (with its address)
        text = text.split("\n", 1)[1] if "\n" in text else ""
    import hashlib

    digest = hashlib.sha256(text.encode())
    for key, value in sorted((metadata.metadata or {}).items()):
        digest.update(b"\0" + key + b"\0" + value)
    return digest.hexdigest()[:32]
