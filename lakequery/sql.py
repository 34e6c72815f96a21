"""Several tables in one DuckDB query.

Example:
    >>> import lakequery as lq
    >>> path = lq.demo.example_table()
    >>> lq.sql("SELECT count(*) FROM events", events=path).fetchall()[0][0] > 0
    True
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import duckdb

from lakequery.duckdb_databases import engine_cursor
from lakequery.scan import Scan
from lakequery.snapshot import Snapshot
from lakequery.table import DeltaTable

if TYPE_CHECKING:
    TableLike = str | os.PathLike[str] | DeltaTable | Snapshot | Scan

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _as_scan(value: TableLike) -> Scan:
    if isinstance(value, Scan):
        return value
    if isinstance(value, Snapshot):
        return value.scan()
    if isinstance(value, DeltaTable):
        return value.snapshot().scan()
    if isinstance(value, str | os.PathLike):
        return DeltaTable(value).snapshot().scan()
    raise TypeError(
        f"cannot query a {type(value).__name__}: pass a URI or path, DeltaTable, Snapshot or Scan"
    )


def sql(
    query: str, /, *, con: duckdb.DuckDBPyConnection | None = None, **tables: TableLike
) -> duckdb.DuckDBPyRelation:
    """Runs ``query`` in DuckDB with each keyword argument visible as a view of that name.

    Each table is read through :meth:`Scan.to_duckdb` (DuckDB's native Parquet reader),
    so filters and projections in ``query`` reach the Parquet scans.

    Args:
        query: DuckDB SQL naming the tables by their keyword.
        con: connection to use; the views stay defined on it (``CREATE VIEW``: every
            cursor of its database sees them). The returned relation is lazy and reads
            the views by name when it runs: bind a name to another table later (another
            call, another thread's cursor of the same database) and it reads that one.
            Fetch first, or give each table its own name. When None, a new cursor of lakequery's
            engine database (:mod:`lakequery.duckdb_databases`), on which the tables are
            registered for that cursor alone: calls in a loop or in several threads do
            not see each other's names, open no database of their own (~10-13 ms each),
            and reuse the footers earlier reads cached.
        **tables: a table URI or path, ``DeltaTable``, ``Snapshot`` (time travel) or ``Scan``
            (a projection / filter) per name (:func:`sql_over` takes any names, ``con``
            included, as a mapping).
    """
    return sql_over(query, tables, con=con)


def sql_over(
    query: str,
    tables: Mapping[str, TableLike],
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """:func:`sql` with the tables as a mapping of name to table."""
    own = con is None
    cur = engine_cursor() if con is None else con
    for name, value in tables.items():
        if not _NAME.match(name):
            raise ValueError(f"table name {name!r} is not a plain SQL identifier")
        rel = _as_scan(value).to_duckdb(cur)
        if own:
            cur.register(name, rel)  # a temporary view of this cursor only
        else:
            rel.create_view(name, replace=True)
    return cur.sql(query)
