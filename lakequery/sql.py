"""Several tables in one DuckDB query.

Example:
    >>> import lakequery as lq
    >>> path = lq.demo.example_table()
    >>> lq.sql("SELECT count(*) FROM events", events=path).fetchall()[0][0] > 0
    True
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import duckdb

from lakequery.scan import Scan
from lakequery.snapshot import Snapshot
from lakequery.table import DeltaTable

if TYPE_CHECKING:
    TableLike = str | DeltaTable | Snapshot | Scan

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _as_scan(value: TableLike) -> Scan:
    if isinstance(value, Scan):
        return value
    if isinstance(value, Snapshot):
        return value.scan()
    if isinstance(value, DeltaTable):
        return value.snapshot().scan()
    if isinstance(value, str):
        return DeltaTable(value).snapshot().scan()
    raise TypeError(
        f"cannot query a {type(value).__name__}: pass a URI, DeltaTable, Snapshot or Scan"
    )


def sql(
    query: str, *, con: duckdb.DuckDBPyConnection | None = None, **tables: TableLike
) -> duckdb.DuckDBPyRelation:
    """Runs ``query`` in DuckDB with each keyword argument visible as a view of that name.

    Each table is read through :meth:`Scan.to_duckdb` (DuckDB's native Parquet reader),
    so filters and projections in ``query`` reach the Parquet scans.

    Args:
        query: DuckDB SQL naming the tables by their keyword.
        con: connection to use (a new database when None: the views are views of the
            whole database, which every cursor of a shared one would see); the views stay
            defined on it.
        **tables: a table URI, ``DeltaTable``, ``Snapshot`` (time travel) or ``Scan``
            (a projection / filter) per name.
    """
    con = con if con is not None else duckdb.connect()
    for name, value in tables.items():
        if not _NAME.match(name):
            raise ValueError(f"table name {name!r} is not a plain SQL identifier")
        _as_scan(value).to_duckdb(con).create_view(name, replace=True)
    return con.sql(query)
