"""The two in-memory DuckDB databases lakequery opens in a process, and their cursors.

Opening a database costs ~10 ms (its buffer manager, its worker threads); a cursor of an
open one costs microseconds, and the temporary tables, views and registered objects of a
cursor stay private to it. So lakequery opens at most two databases per process, each on
first use:

* the *private* database replays large log segments (for a snapshot, a checkpoint,
  VACUUM, the change feed or a stream) with two global settings that suit it and would
  not suit a user's query: rows may come back in any order (``preserve_insertion_order``),
  and join sides are never swapped (such a replay joins a small table of winners with a
  large stream of parsed actions; DuckDB's cardinality estimate for JSON scans is poor
  and it would otherwise hash the stream). All other internal work joins only what DuckDB
  knows the size of (the replay of a small segment, parsed into a table; file skipping;
  DML over Parquet scans, Arrow data and temporary tables; history) and runs on a cursor
  of the engine database instead, with insertion order off for that cursor alone
  (``private_cursor(fixed_joins=False)``): a process that reads and changes small tables
  opens one database;
* the *engine* database holds the relations lakequery hands out when the caller gives no
  connection (``Scan.to_duckdb()``, a change feed's ``to_duckdb()``, ``lakequery.sql``,
  whose tables are registered on its own cursor, so no other cursor sees them) and its
  own work that needs DuckDB's defaults (row order kept: constraint checks align results
  with rows). Its settings are DuckDB's defaults plus the Parquet metadata cache: Delta
  data files never change in place, so footers read while planning are not read again by
  the query (DuckDB 1.5 and 2.0 count the cache against the database's memory limit and
  evict from it); and minus the external file cache. Decision: DuckDB 1.5 copies every
  byte it reads from a local file into that cache and frees it all when the database
  closes, which a cold read pays and a warm one does not win back (the operating system's
  page cache already holds the file; object stores are read through lakequery's fsspec
  bridge, which the cache does not serve; DuckDB 2.0 keeps no local file in it). Under
  DuckDB 1.5.5, Figure 4 with 10,000 one-file partitions in a fresh process: 1.65 ->
  1.28 s, of which the close at exit 0.17 -> 0.05 s; warm repeated queries unchanged or
  faster (benchmarks/RESULTS.md section 8, seventh session). Each relation has a cursor
  of its own: relations can be used from different threads, and what a relation
  registers goes away with it. Deletion-vector keep masks are the exception: they are
  tables of the database, shared by its cursors up to a budget and never dropped
  (:mod:`lakequery.engines.keep_masks`).

Both spill to private directories under the system temp directory (DuckDB's default for an
in-memory database would be ``.tmp`` in the working directory).

**After fork().** DuckDB's worker threads do not survive a fork: in a child, a database
the parent opened can hang the first query that waits for a worker, and freeing it crashes
the child when it exits. A forked child therefore opens its own databases on first use and
never touches its parent's: their Python objects are kept referenced for good (neither
closed nor freed), so the child's exit leaves them alone as well.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
import weakref

import duckdb

#: The databases this process opened, by kind ("private", "engine").
_DATABASES: dict[str, duckdb.DuckDBPyConnection] = {}
_LOCK = threading.Lock()

#: The cursors :func:`engine_cursor` handed out (weakly held).
_ENGINE_CURSORS: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()

_PRIVATE_SETTINGS = {
    "preserve_insertion_order": False,
    "disabled_optimizers": "build_side_probe_side",
}


#: See the module docstring (the external file cache).
_ENGINE_SETTINGS = {"enable_external_file_cache": False}


def _database(kind: str) -> duckdb.DuckDBPyConnection:
    """The process's database of ``kind``, opened on first use (the caller holds _LOCK)."""
    db = _DATABASES.get(kind)
    if db is None:
        suffix = "" if kind == "private" else f"-{kind}"
        spill = os.path.join(tempfile.gettempdir(), f"lakequery-duckdb-{os.getpid()}{suffix}")
        settings = _PRIVATE_SETTINGS if kind == "private" else _ENGINE_SETTINGS
        db = duckdb.connect(":memory:", config={"temp_directory": spill, **settings})
        if kind == "engine":
            # an option of the Parquet reader: it can only be set once the database is open
            db.execute("SET GLOBAL parquet_metadata_cache = true")
        _DATABASES[kind] = db
    return db


def private_cursor(*, fixed_joins: bool = True, utc: bool = False) -> duckdb.DuckDBPyConnection:
    """A fresh cursor for internal queries (row order never matters there).

    With ``fixed_joins``, a cursor of the private database, whose joins keep their sides
    as written: replay of a large log joins streams of JSON lines, whose sizes DuckDB
    guesses badly. Without, a cursor of the engine database with insertion order off for
    itself, for work that joins only what DuckDB knows the size of (tables, Arrow data,
    Parquet): the replay of a small log segment (see
    :func:`lakequery.log_reader.replay_cursor`) and file skipping. A process that reads
    small tables through DuckDB then opens one database, not two (~10 ms to open one,
    ~3 ms to close it at exit). ``utc``: as for :func:`engine_cursor`."""
    if not fixed_joins:
        cur = engine_cursor(utc=utc)
        cur.execute("SET SESSION preserve_insertion_order = false")
        return cur
    with _LOCK:
        cur = _database("private").cursor()
    if utc:
        cur.execute(_UTC)
    return cur


#: The session zone of cursors that evaluate the user's SQL over table rows (CHECK
#: constraints, generated columns, DML expressions): timestamps as the log stores them,
#: whatever the machine's zone.
_UTC = "SET SESSION TimeZone = 'UTC'"


def engine_cursor(*, utc: bool = False) -> duckdb.DuckDBPyConnection:
    """A fresh cursor of the engine database: for a relation handed to the caller, or
    internal work that needs DuckDB's default settings (rows kept in order). With
    ``utc``, its session zone is UTC (for evaluating the user's SQL over table rows)."""
    with _LOCK:
        cur = _database("engine").cursor()
    _ENGINE_CURSORS.add(cur)
    if utc:
        cur.execute(_UTC)
    return cur


def engine_database() -> duckdb.DuckDBPyConnection:
    """The engine database's own connection (opened on first use): the key of what its
    cursors share, and a source of cursors with its default settings. A forked child gets
    its own (see the module docstring)."""
    with _LOCK:
        return _database("engine")


def is_engine_cursor(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con`` came from :func:`engine_cursor`: its database's global settings
    (the Parquet metadata cache) already hold for it, so nothing needs setting per cursor
    (``lakequery.sql`` builds every call's relations on such a cursor)."""
    return con in _ENGINE_CURSORS


def create_temp_view(
    con: duckdb.DuckDBPyConnection, name: str, rel: duckdb.DuckDBPyRelation
) -> None:
    """Makes ``rel`` (built on ``con``) the temporary view ``name`` of ``con``: seen by
    that cursor only. ``DuckDBPyRelation.create_view`` makes a view of the whole database,
    which every cursor of a shared database sees, and statements running in other threads
    would replace each other's views of the same name. The view's definition is the
    relation's SQL text, so ``rel`` must read only sources SQL names (files, tables,
    objects registered on ``con``), not a Python object it was built from."""
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {rel.sql_query()}")


def _close() -> None:
    """Closes this process's databases before interpreter shutdown (DuckDB's bindings
    complain about objects still alive at teardown otherwise)."""
    with _LOCK:
        while _DATABASES:
            _DATABASES.popitem()[1].close()


def _forget_parent_databases() -> None:
    """In a forked child: the parent's databases are set aside for good (see the module
    docstring), and the lock starts free whatever thread held it in the parent."""
    global _LOCK
    _LOCK = threading.Lock()
    if _DATABASES:
        import ctypes

        for db in _DATABASES.values():
            # one reference that is never released: the object is never freed in the child
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(db))
        _DATABASES.clear()


atexit.register(_close)
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_parent_databases)
