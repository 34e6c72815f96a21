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
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from lakequery.errors import ObjectNotFoundError
from lakequery.storage import Storage

T = TypeVar("T")


def _read_footers(
    storage: Storage, paths: Sequence[str], what: Callable[[pq.FileMetaData], T]
) -> list[T]:
    """``what`` of each file's footer (paths relative to the table root), concurrently."""
    fs, to_fs = storage.arrow_filesystem()

    def one(path: str) -> T:
        location = storage.root + "/" + path
        try:
            with fs.open_input_file(to_fs(location)) as f:
                return what(pq.ParquetFile(f).metadata)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(location, "read data file footer") from exc

    if not paths:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(paths))) as pool:
        return list(pool.map(one, paths))


def footer_row_counts(storage: Storage, paths: Sequence[str]) -> list[int]:
    """Physical rows of each data file (paths relative to the table root)."""
    return _read_footers(storage, paths, lambda md: int(md.num_rows))


def footer_schemas(storage: Storage, paths: Sequence[str]) -> list[pa.Schema]:
    """The Arrow schema each data file stores (paths relative to the table root)."""
    return _read_footers(storage, paths, lambda md: md.schema.to_arrow_schema())
