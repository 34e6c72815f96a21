"""Commands that change a table's rows or files: DELETE, UPDATE, MERGE (and maintenance).

Each command plans from one snapshot, does its reading and writing in DuckDB and the
writer, and commits once through :class:`lakequery.txn.Transaction`.
"""
