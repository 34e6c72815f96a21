"""lakequery's own DuckDB work (log replay, data skipping, DML) runs on cursors of one
process-wide in-memory database: opening a database costs tens of milliseconds, a cursor
almost nothing, and temporary tables, views and registered objects stay private to each
cursor. The database spills to a private directory under the system temp directory
(DuckDB's default for in-memory databases would be ``.tmp`` in the working directory)."""

from __future__ import annotations

import atexit
import os
import tempfile
import threading

import duckdb

_DATABASE: list[duckdb.DuckDBPyConnection] = []
_LOCK = threading.Lock()


def private_cursor() -> duckdb.DuckDBPyConnection:
    """A fresh cursor for internal queries (row order never matters there)."""
    with _LOCK:
        if not _DATABASE:
            spill = os.path.join(tempfile.gettempdir(), f"lakequery-duckdb-{os.getpid()}")
            _DATABASE.append(duckdb.connect(":memory:", config={"temp_directory": spill}))
            atexit.register(_close)
        cursor = _DATABASE[0].cursor()
    cursor.execute("SET preserve_insertion_order = false")
    # Replay joins a small table of winners with a large stream of parsed actions; DuckDB's
    # cardinality estimate for JSON scans is poor and it would otherwise hash the stream.
    cursor.execute("SET disabled_optimizers = 'build_side_probe_side'")
    return cursor


def _close() -> None:
    """Closes the shared database before interpreter shutdown (DuckDB's bindings complain
    about objects still alive at teardown otherwise)."""
    with _LOCK:
        while _DATABASE:
            _DATABASE.pop().close()
