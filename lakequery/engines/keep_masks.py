"""Deletion vectors applied in DuckDB by position: a ``read_parquet`` of one file with a DV
``POSITIONAL JOIN`` a one-column boolean relation, its keep mask (False at deleted rows),
``WHERE`` that column; one ``UNION ALL`` branch per such file.

Why each row meets its own mask bit (DuckDB 1.5.5 and 2.0 source,
``plan_positional_join.cpp``, ``physical_positional_scan.cpp``,
``physical_positional_join.cpp``, ``pipeline.cpp``): a positional join of two table
functions runs as one ``POSITIONAL_SCAN`` whose global state allows one thread and which
drives each side through a single local scan state, so the Parquet reader hands over the
file's rows in order; any other plan shape is a ``POSITIONAL_JOIN`` operator, neither a
parallel operator nor a parallel sink, so both of its pipelines run as one sequential task.
No optimizer rule moves a filter, a join filter or a Top-N filter below a positional join (``filter_pushdown``,
``join_filter_pushdown_optimizer`` and ``topn_optimizer`` stop there), and a branch has no
filter of its own below it. One file a branch: with several, every row after the first
file's last (partial) vector would be copied to meet the mask's vectors (1.5-1.8x the
CPU). A positional join pads the shorter side with NULLs, so a mask of the wrong length
would drop rows (``WHERE keep`` is NULL) or add rows of NULLs: each mask's length is the
row count in its file's footer (read through DuckDB, cached by path, size and
modification time), which must equal the log's ``numRecords``, and every deleted position
must lie below it (else the scan keeps the anti-join, which reads such a file as the other
engines do). Each mask is its own one-column relation (DuckDB's Python scan inspects
every column of a registered view each time a query binds it), named by its content and
made once: a temporary table on a caller's connection that preserves insertion order
(32 DuckDB tables bind ~1.5 ms faster than 32 registered NumPy columns, and a query binds
the relation about four times), else the registered NumPy column (a connection that may
reorder rows could lose the table's order). An engine cursor serves one ``to_duckdb()``
call, so there the masks are tables of the engine database, shared by all its cursors and
made on first use, up to :data:`SHARED_MAX_BYTES`; they are never dropped, as a relation
derived from one lakequery handed out (``rel.query(...)``) may name a mask while holding
no object lakequery could watch.
``tests/dv/test_dv_keep_masks.py`` holds the alignment to account (row groups of odd
sizes, threads, insertion order, projections, filters, Top-N and joins added over the
relation).

When it is used (else the anti-join of :mod:`lakequery.engines.duckdb`): plain reads (no
DML row ids, no row tracking); no scan filter on a data column (the positional join keeps
DuckDB from pushing filters, and so row-group skipping, into the DV files' scans; the
anti-join keeps them); at most :data:`MAX_BRANCHES` files with DVs holding at most
:data:`MAX_ROWS` rows (a mask costs a byte a row, the anti-join's keys 8 bytes a deleted
row); and, above :data:`SERIAL_ROWS` rows, at least as many such files as DuckDB has
threads. Filters a caller adds in SQL over the relation are not pushed into the DV files'
scans either: the price of the cheaper filter (1.4-1.5x less CPU than the anti-join on
a 5M-row table with 1% deleted, benchmarks/RESULTS.md section 8). A file whose row groups
are not multiples of DuckDB's vector size (2,048 rows) costs more after its first row
group: the scan's vectors then straddle the mask's and its columns are copied.
"""

from __future__ import annotations

import itertools
import re
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lakequery import arrow_kernels as pc
from lakequery.duckdb_databases import engine_database, is_engine_cursor
from lakequery.engines.deletion import dv_mask
from lakequery.engines.layout import FileGroup
from lakequery.engines.sql_types import glob_list_sql

if TYPE_CHECKING:
    import duckdb
    import numpy.typing as npt

    from lakequery.scan import Scan

#: At most this many positional scans (``UNION ALL`` branches: binding grows with them).
MAX_BRANCHES = 64

#: At most this many rows in all files with DVs (one byte a row while the query lives).
MAX_ROWS = 1 << 26

#: Files with DVs holding more rows than this in all are read by position only when they
#: are at least as many as DuckDB's threads (a positional scan runs on one thread).
SERIAL_ROWS = 1 << 19

#: (DuckDB path, size, modification time) -> rows in the file's footer. Data files are
#: immutable; the key is what the log says about the file.
_FOOTER_ROWS: dict[tuple[str, int, int], int] = {}
_FOOTER_ROWS_MAX = 1 << 16

#: Connection -> the masks registered on it, by content (file, rows, the deleted positions'
#: bytes, compared exactly) -> name. A mask registered once serves every later query of
#: the same file and DV on that connection: repeated queries neither rebuild nor
#: re-register it, nor pile up one copy per query. (Masks of files and DVs the table no
#: longer has stay registered while the connection lives, as the anti-join's keys do.)
_REGISTERED: weakref.WeakKeyDictionary[
    duckdb.DuckDBPyConnection, dict[tuple[str, int, bytes], str]
] = weakref.WeakKeyDictionary()
#: Mask names; a process-wide counter, so two threads never give one name two contents.
_NAMES = itertools.count()
_PREFIX = "_lq_keep_"
#: Masks made as temporary tables (the others are registered NumPy columns).
_TABLE_PREFIX = f"{_PREFIX}t"
#: Masks made as tables of the engine database, which all its cursors share.
_SHARED_PREFIX = f"{_PREFIX}s"
_MASK_NAME = re.compile(rf"{_PREFIX}[a-z]?[0-9]+")

#: Bytes (rows) of the masks the engine database may hold for its cursors; beyond, masks
#: are registered on each cursor as they were before (nothing is ever dropped: a relation
#: derived from one lakequery handed out may name a mask without holding the object).
SHARED_MAX_BYTES = 1 << 26


@dataclass
class _Shared:
    """The masks one engine database holds, by content, their bytes, and the lock that
    guards both (a forked child opens a database of its own, so it never meets a lock a
    parent thread held)."""

    names: dict[tuple[str, int, bytes], str] = field(default_factory=dict)
    nbytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


#: Engine database -> its shared masks.
_SHARED: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, _Shared] = weakref.WeakKeyDictionary()


def forget_missing(con: duckdb.DuckDBPyConnection, error: Exception) -> bool:
    """Whether ``error`` (raised binding a relation on ``con``) names a mask this module
    made; if so, unregisters or drops and forgets all of ``con``'s own masks and forgets
    the named shared ones (engine cursors), so that the next build makes them again. A
    mask is a catalog entry: a transaction that made one and was rolled back took it
    away (as would the caller's ``con.unregister`` or a ``DROP TABLE``)."""
    named = set(_MASK_NAME.findall(str(error)))
    if not named:
        return False
    forgot = False
    shared = _SHARED.get(engine_database()) if is_engine_cursor(con) else None
    if shared is not None:
        with shared.lock:
            gone = [c for c, name in shared.names.items() if name in named]
            for content in gone:
                del shared.names[content]
                shared.nbytes -= _charged(content[1])
            forgot = bool(gone)
    if con in _REGISTERED:
        for name in _REGISTERED.pop(con).values():
            if name.startswith(_TABLE_PREFIX):
                con.execute(f"DROP TABLE IF EXISTS temp.{name}")
            else:
                con.unregister(name)  # a no-op for a name that is gone
        forgot = True
    return forgot


@dataclass(frozen=True)
class KeepMask:
    """Where a file's mask is: the registered table and its column."""

    table: str
    column: str


def applicable(scan: Scan, deleted: dict[str, npt.NDArray[np.int64]], *, row_ids: bool) -> bool:
    """Whether the scan's files with DVs are read by position (see the module docstring)."""
    if row_ids or not deleted:
        return False
    if scan.filter is not None:
        partitions = set(scan.snapshot.partition_columns)
        from lakequery.protocol.predicate_ast import referenced_columns

        if any(path[0] not in partitions for path in referenced_columns(scan.filter)):
            return False
    return True


def footer_rows(
    con: duckdb.DuckDBPyConnection, files: list[tuple[str, int, int]], key: Callable[[str], str]
) -> list[int]:
    """Rows in the footer of each ``(DuckDB path, size, modification time)``, through
    DuckDB (its metadata cache then serves the scan); ``key`` normalises a path as DuckDB
    may respell it."""
    todo = [f for f in dict.fromkeys(files) if f not in _FOOTER_ROWS]
    if todo:
        paths = glob_list_sql([p for p, _, _ in todo])
        got = {
            key(str(name)): int(n)
            for name, n in con.execute(
                f"SELECT file_name, num_rows FROM parquet_file_metadata({paths})"
            ).fetchall()
        }
        for f in todo:
            if len(_FOOTER_ROWS) >= _FOOTER_ROWS_MAX:
                _FOOTER_ROWS.pop(next(iter(_FOOTER_ROWS)))
            _FOOTER_ROWS[f] = got[key(f[0])]
    return [_FOOTER_ROWS[f] for f in files]


def register(
    con: duckdb.DuckDBPyConnection,
    scan: Scan,
    deleted: dict[str, npt.NDArray[np.int64]],
    groups: list[FileGroup],
    duckdb_path: Callable[[str], str],
    key: Callable[[str], str],
) -> list[tuple[FileGroup, KeepMask]] | None:
    """Makes (or reuses) keep masks on ``con`` for the files in ``deleted`` (location -> sorted
    deleted positions), which ``groups`` holds by partition values. Returns the branches
    to read (one file each, with its partition values) and where each one's mask is. None
    (read them with the anti-join) when they are more than :data:`MAX_BRANCHES` files,
    hold more than :data:`MAX_ROWS` rows, or more than :data:`SERIAL_ROWS` rows in fewer
    files than DuckDB has threads (each branch runs on one thread).

    Also None when a footer's row count differs from the log's ``numRecords`` or a DV
    deletes a row past it: a mask's length must be exact, and the anti-join reads such a
    file as the other engines do.
    """
    if len(deleted) > MAX_BRANCHES:
        return None
    plan = scan.plan()
    # Python values for the files with DVs only (at most MAX_BRANCHES), never for the
    # whole plan: ``deleted`` holds exactly the files ``dv_mask`` selects
    with_dv = dv_mask(plan)
    dv_files = pc.filter(plan.files, with_dv)
    index = {str(loc): i for i, loc in enumerate(pc.filter(plan.locations, with_dv).to_pylist())}
    locs = [p for g in groups for p in g.locations]
    at = [index[p] for p in locs]
    sizes = dv_files.column("size").to_pylist()
    times = dv_files.column("modification_time").to_pylist()
    logged = dv_files.column("num_records").to_pylist()
    known = [int(n) for n in (logged[i] for i in at) if n is not None]
    if len(known) == len(at) and sum(known) > MAX_ROWS:
        return None  # before reading footers
    found = footer_rows(
        con,
        [
            (duckdb_path(p), int(sizes[i] or 0), int(times[i] or 0))
            for p, i in zip(locs, at, strict=True)
        ],
        key,
    )
    rows = dict(zip(locs, found, strict=True))
    total = sum(found)
    if total > MAX_ROWS:
        return None
    for p, i in zip(locs, at, strict=True):
        n, positions = rows[p], deleted[p]
        if (logged[i] is not None and logged[i] != n) or (
            positions.size and int(positions[-1]) >= n
        ):
            # A mask of the wrong length would misalign; the log and the file disagree, so
            # read as every other engine does (the anti-join needs no row count).
            return None
    contents = [(p, rows[p], deleted[p].tobytes()) for g in groups for p in g.locations]
    engine = is_engine_cursor(con)
    registered = _REGISTERED.setdefault(con, {})
    # temporary tables only on a caller's connection that keeps insertion order, shared
    # tables on engine cursors (see the module docstring)
    may_be_tables = not engine and any(c not in registered for c in contents)
    as_tables = False
    if total > SERIAL_ROWS or may_be_tables:
        ((threads, ordered),) = con.execute(
            "SELECT current_setting('threads'), current_setting('preserve_insertion_order')"
        ).fetchall()
        if total > SERIAL_ROWS and len(locs) < int(threads):
            return None  # too few scans for DuckDB's threads: the anti-join runs on all
        as_tables = may_be_tables and bool(ordered)
    names = _shared_masks(contents, deleted) if engine else {}
    names.update((c, registered[c]) for c in contents if c in registered)
    new = [c for c in contents if c not in names]
    for content in dict.fromkeys(new):
        keep = _keep(content, deleted)
        if as_tables:
            name = f"{_TABLE_PREFIX}{next(_NAMES)}"
            _create_table(con, name, keep, temporary=True)
        else:
            name = f"{_PREFIX}{next(_NAMES)}"
            con.register(name, {"keep": keep})
        registered[content] = names[content] = name
    out: list[tuple[FileGroup, KeepMask]] = []
    at_content = iter(contents)
    for g in groups:
        for p in g.locations:
            out.append((FileGroup(g.values, [p]), KeepMask(names[next(at_content)], "keep")))
    return out


def _keep(
    content: tuple[str, int, bytes], deleted: dict[str, npt.NDArray[np.int64]]
) -> npt.NDArray[np.bool_]:
    """The keep mask of one content: True but at the deleted positions."""
    path, n, _ = content
    keep = np.ones(n, dtype=np.bool_)
    keep[deleted[path]] = False
    return keep


#: DuckDB keeps a table of more than :data:`_SMALL_TABLE_ROWS` rows in blocks of this
#: many bytes (measured: a mask of 2,049 or 100,000 rows holds ~266 KB; one of 1,000, ~4 KB).
_BLOCK_BYTES = 1 << 18
_SMALL_TABLE_ROWS = 2048


def _charged(rows: int) -> int:
    """The bytes a mask of ``rows`` rows (one byte each) takes in the engine database."""
    return rows if rows <= _SMALL_TABLE_ROWS else -(-rows // _BLOCK_BYTES) * _BLOCK_BYTES


def _shared_masks(
    contents: list[tuple[str, int, bytes]], deleted: dict[str, npt.NDArray[np.int64]]
) -> dict[tuple[str, int, bytes], str]:
    """The masks of ``contents`` as tables of the engine database, made on first use
    while they fit in :data:`SHARED_MAX_BYTES`; the others are left out (the caller
    registers them on its cursor). ``to_duckdb()`` without a connection builds on a new
    cursor each call: shared tables spare each call the masks' building and registration
    and bind faster."""
    db = engine_database()
    shared = _SHARED.setdefault(db, _Shared())  # one dict call: atomic between threads
    with shared.lock:
        missing = [c for c in dict.fromkeys(contents) if c not in shared.names]
        fits = []
        budget = SHARED_MAX_BYTES - shared.nbytes
        for content in missing:
            if _charged(content[1]) > budget:
                break
            budget -= _charged(content[1])
            fits.append(content)
        if fits:
            cur = db.cursor()  # the database's defaults: insertion order kept
            try:
                for content in fits:
                    name = f"{_SHARED_PREFIX}{next(_NAMES)}"
                    _create_table(cur, name, _keep(content, deleted), temporary=False)
                    shared.names[content] = name
                    shared.nbytes += _charged(content[1])
            finally:
                cur.close()
        return {c: shared.names[c] for c in contents if c in shared.names}


def _create_table(
    con: duckdb.DuckDBPyConnection, name: str, keep: npt.NDArray[np.bool_], *, temporary: bool
) -> None:
    """Makes ``keep`` the table ``name`` (temporary: of ``con`` alone), rows in their
    order (``con`` preserves insertion order: the caller checked). A table binds faster
    than a registered NumPy column and outlives the query: a caller's connection keeps its
    temporary masks for every later query; the engine database shares its masks with all
    its cursors."""
    staged = f"{name}_np"
    con.register(staged, {"keep": keep})
    try:
        kind = "TEMP TABLE" if temporary else "TABLE"
        con.execute(f"CREATE {kind} {name} AS SELECT keep FROM {staged}")
    finally:
        con.unregister(staged)
