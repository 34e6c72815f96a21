"""Row ids and row commit versions in the engines' relations (digest §14).

DuckDB computes them: the scan's files are read with ``file_row_number`` (positions
before deletion vectors apply) and joined with a small Arrow table of each file's
``baseRowId`` and ``defaultRowCommitVersion``; a stored materialized value wins when it is
non-null::

    row id             = coalesce(<materialized row id>, baseRowId + file_row_number)
    row commit version = coalesce(<materialized commit version>, defaultRowCommitVersion)

The Arrow engine (:class:`ArrowRowIds`) reads such scans file by file in order, with no
filter pushdown, so that running row counts are the positions: ``baseRowId +
arange(offset, offset + n)`` per batch, coalesced with the materialized columns, before
the deletion vector mask applies. Polars reads such scans through the Arrow engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakequery.arrow_buffers import int64_array
from lakequery.engines.sql_types import quote_ident
from lakequery.row_tracking.columns import (
    ROW_COMMIT_VERSION_NAME_KEY,
    ROW_ID_NAME_KEY,
    check_readable,
)

if TYPE_CHECKING:
    from lakequery.scan import Scan


def materialized_physical_columns(scan: Scan) -> tuple[str, ...]:
    """The physical (row id, row commit version) columns the table names, or ``()`` when
    its configuration names none (then no file stores them)."""
    config = scan.snapshot.metadata.configuration
    row_id, version = config.get(ROW_ID_NAME_KEY), config.get(ROW_COMMIT_VERSION_NAME_KEY)
    if not row_id or not version:
        return ()
    return row_id, version


def with_row_tracking_sql(
    body: str, scan: Scan, register: Callable[[str, pa.Table], str], names: tuple[str, str]
) -> str:
    """Wraps the engine's row SQL (with ``__lq_file``, ``__lq_row`` and, when the table
    names them, ``__lq_mat0``/``__lq_mat1``) so that it also has the row id and commit
    version columns ``names``."""
    from lakequery.engines.duckdb import ROW_FILE_COLUMN, ROW_NUMBER_COLUMN, materialized_column

    files = scan.plan().files
    table = pa.table(
        {
            "i": int64_array(np.arange(files.num_rows)),
            "b": files.column("base_row_id").cast(pa.int64()),
            "v": files.column("default_row_commit_version").cast(pa.int64()),
        }
    )
    name = register("rowtrack", table)
    row_id = f"f.b + t.{ROW_NUMBER_COLUMN}"
    version = "f.v"
    if materialized_physical_columns(scan):
        row_id = f"coalesce(t.{materialized_column(0)}, {row_id})"
        version = f"coalesce(t.{materialized_column(1)}, {version})"
    return (
        f"SELECT t.*, {row_id} AS {quote_ident(names[0])}, {version} AS {quote_ident(names[1])} "
        f"FROM ({body}) AS t JOIN {name} AS f ON f.i = t.{ROW_FILE_COLUMN}"
    )


class ArrowRowIds:
    """The Arrow engine's side: each batch of a file (read whole, in order, so that running
    row counts are physical positions) gets ``baseRowId + arange(offset, offset + n)`` and
    the default commit version, unless its materialized columns hold values; both ride as
    the batch's last two columns until the engine puts them in the output.

    Args:
        scan: a scan with :attr:`~lakequery.scan.Scan.row_tracking_columns`.
    """

    def __init__(self, scan: Scan) -> None:
        names = scan.row_tracking_columns
        assert names is not None
        plan = scan.plan()
        check_readable(scan.snapshot, plan.files, names)
        self.names = names
        self.materialized = materialized_physical_columns(scan)
        bases: list[Any] = plan.files.column("base_row_id").to_pylist()
        versions: list[Any] = plan.files.column("default_row_commit_version").to_pylist()
        # check_readable made sure that no file lacks them
        self.defaults: dict[str, tuple[int, int]] = {
            loc: (int(b), int(v))
            for loc, b, v in zip(plan.location_list, bases, versions, strict=True)
        }

    def fields(self) -> list[pa.Field[Any]]:
        """The materialized columns to read along (NULL in files that lack them)."""
        return [pa.field(name, pa.int64()) for name in self.materialized]

    def attach(self, raw: pa.RecordBatch, location: str, offset: int) -> pa.RecordBatch:
        """``raw`` (rows ``offset..`` of ``location``) without the materialized columns and
        with the row ids and commit versions appended."""
        base, default = self.defaults[location]
        n = raw.num_rows
        ids: Any = int64_array(np.arange(base + offset, base + offset + n))
        versions: Any = int64_array(np.full(n, default))
        if self.materialized:
            ids = pc.coalesce(raw.column(self.materialized[0]).cast(pa.int64()), ids)
            versions = pc.coalesce(raw.column(self.materialized[1]).cast(pa.int64()), versions)
            raw = raw.drop_columns(list(self.materialized))
        raw = raw.append_column(_ID_COLUMN, ids)
        return raw.append_column(_VERSION_COLUMN, versions)

    def split(
        self, raw: pa.RecordBatch | pa.Table
    ) -> tuple[pa.RecordBatch | pa.Table, dict[str, Any]]:
        """``raw`` without the appended columns, and those columns by output name."""
        columns = {
            self.names[0]: raw.column(_ID_COLUMN),
            self.names[1]: raw.column(_VERSION_COLUMN),
        }
        return raw.drop_columns([_ID_COLUMN, _VERSION_COLUMN]), columns


_ID_COLUMN = "__lq_row_id"
_VERSION_COLUMN = "__lq_row_commit_version"
