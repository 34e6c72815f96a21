"""Row ids and row commit versions in the engines' relations (digest §14).

DuckDB computes them: the scan's files are read with ``file_row_number`` (positions
before deletion vectors apply) and joined with a small Arrow table of each file's
``baseRowId`` and ``defaultRowCommitVersion``; a stored materialized value wins when it is
non-null::

    row id             = coalesce(<materialized row id>, baseRowId + file_row_number)
    row commit version = coalesce(<materialized commit version>, defaultRowCommitVersion)

The Arrow and Polars engines read such scans through DuckDB's relation (one vectorised
plan, so the three engines agree by construction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakequery.engines.sql_types import quote_ident
from lakequery.row_tracking.columns import ROW_COMMIT_VERSION_NAME_KEY, ROW_ID_NAME_KEY

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
            "i": pa.array(np.arange(files.num_rows, dtype=np.int64)),
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


def arrow_reader(scan: Scan) -> pa.RecordBatchReader:
    """The Arrow engine's reader for a scan with row tracking columns: DuckDB's relation,
    streamed, cast to the scan's output schema."""
    import duckdb

    from lakequery.engines.duckdb import duckdb_relation

    con = duckdb.connect()
    try:
        rel = duckdb_relation(scan, con)
        method = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch
        source: pa.RecordBatchReader = method()
    except BaseException:
        con.close()
        raise
    schema = scan.output_schema

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in source:
                yield batch.cast(schema)
        finally:
            con.close()

    return pa.RecordBatchReader.from_batches(schema, batches())
