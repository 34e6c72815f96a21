"""Table commands: each is a pure plan over snapshot metadata plus an execute step that
writes files and commits through :class:`lakequery.txn.Transaction`.

Maintenance: :mod:`~lakequery.commands.optimize` (compaction, DV purge, Z-order /
Hilbert clustering), :mod:`~lakequery.commands.vacuum`, :mod:`~lakequery.commands.restore`,
:mod:`~lakequery.commands.manifest` and :mod:`~lakequery.commands.log_cleanup`.
"""
