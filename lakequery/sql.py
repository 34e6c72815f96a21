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
        con: connection to use; the names stay registered on it as temporary views
            (its other cursors do not see them: the views may read objects only this
            connection sees). The returned relation is lazy and reads the views by name
            when it runs: bind a name to another table later (another call on ``con``)
            and it reads that one. Fetch first, or give each table its own name. Names
            that differ only in case are refused (SQL ignores case). When None, a new
            cursor of lakequery's
            engine database (:mod:`lakequery.duckdb_databases`), on which the tables are
            registered for that cursor alone: calls in a loop or in several threads do
            not see each other's names, open no database of their own (~10-13 ms each),
            and reuse the footers earlier reads cached.
        **tables: a table URI or path, ``DeltaTable``, ``Snapshot`` (time travel) or ``Scan``
            (a projection / filter) per name (:func:`sql_over` takes any names, ``con``
            included, as a mapping).
    """
    return sql_over(query, tables, con=con)


def _refuse_shadowing(con: duckdb.DuckDBPyConnection, lowered: list[str]) -> None:
    """Refuses names of the caller's own tables and views: a temporary view of the same
    name would hide them from every later query on ``con`` (``main.orders`` included)."""
    found = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
        "AND lower(table_name) IN (SELECT unnest(?)) UNION ALL "
        "SELECT view_name FROM duckdb_views() WHERE NOT temporary AND NOT internal "
        "AND lower(view_name) IN (SELECT unnest(?))",
        [lowered, lowered],
    ).fetchall()
    if found:
        raise ValueError(
            f"table name {found[0][0]!r} is a table or view of the connection's database: "
            "lq.sql would hide it; choose another name"
        )


def sql_over(
    query: str,
    tables: Mapping[str, TableLike],
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """:func:`sql` with the tables as a mapping of name to table."""
    seen: dict[str, str] = {}
    for name in tables:
        if not _NAME.match(name):
            raise ValueError(f"table name {name!r} is not a plain SQL identifier")
        if name.lower() in seen:  # SQL names ignore case: one would hide the other
            raise ValueError(f"table names {seen[name.lower()]!r} and {name!r} are one in SQL")
        seen[name.lower()] = name
    cur = engine_cursor() if con is None else con
    if con is not None:
        _refuse_shadowing(con, list(seen))
    for name, value in tables.items():
        # a temporary view of this connection: the relation may read objects only this
        # connection sees (keep masks, partition and position tables), and a read-only
        # database takes no CREATE VIEW
        cur.register(name, _as_scan(value).to_duckdb(cur))
    return cur.sql(query)
