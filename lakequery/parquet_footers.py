"""Row counts of data files from their Parquet footers, for files logged without
``stats.numRecords`` (the statistics are optional in the protocol).

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> _ = lq.write("memory://footers-doc", pa.table({"x": [1, 2, 3]}))
    >>> snap = lq.DeltaTable("memory://footers-doc").snapshot()
    >>> footer_row_counts(snap.storage, snap.files().column("path").to_pylist())
    [3]
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq

from lakequery.errors import ObjectNotFoundError
from lakequery.storage import Storage


def footer_row_counts(storage: Storage, paths: Sequence[str]) -> list[int]:
    """Physical rows of each data file (paths relative to the table root), read from the
    footers concurrently."""
    fs, to_fs = storage.arrow_filesystem()

    def one(path: str) -> int:
        location = storage.root + "/" + path
        try:
            with fs.open_input_file(to_fs(location)) as f:
                return int(pq.ParquetFile(f).metadata.num_rows)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(location, "read data file footer") from exc

    if not paths:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(paths))) as pool:
        return list(pool.map(one, paths))
