"""Commands that change a table's rows or files. Each plans from one snapshot, reads and
writes with DuckDB and the writer, and commits once through
:class:`lakequery.txn.Transaction`.

DML: :mod:`~lakequery.commands.delete`, :mod:`~lakequery.commands.update` and
:mod:`~lakequery.commands.merge` over one change table (:mod:`~lakequery.commands.change_set`).
Maintenance: :mod:`~lakequery.commands.optimize` (compaction, DV purge, Z-order /
Hilbert clustering), :mod:`~lakequery.commands.vacuum`, :mod:`~lakequery.commands.restore`,
:mod:`~lakequery.commands.manifest` and :mod:`~lakequery.commands.log_cleanup`.
"""
