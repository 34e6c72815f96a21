"""OPTIMIZE: compaction (bin-packing small files, purging deletion vectors) and
clustering (Z-order / Hilbert) of a table, committed as one ``dataChange=false`` commit.

Plan, then execute:

1. :func:`plan_optimize` (pure, over :meth:`Snapshot.files` metadata) picks the files:
   per partition, files smaller than ``min_file_size`` and files whose deletion vector
   leaves them small (``size * live fraction < min_file_size``) or hides more than
   :data:`DV_PURGE_RATIO` of their rows are sorted by size and packed into bins of up
   to ``target_file_size``; a bin of one file without a DV is dropped (rewriting it
   would change nothing). With ``z_order_by`` every partition holding more than one
   file (or any DV, or one file larger than ``target_file_size``, which clustering cuts
   into several) is one unit.
2. :func:`optimize` rewrites the bins on ``max_concurrent_tasks`` threads (default:
   the CPU count). Compaction streams each bin's live rows (DVs applied) through
   :func:`~lakequery.writer.data_files.write_data_files`. Clustering gives every row of
   a partition a 64-bit curve key (:mod:`lakequery.commands.zorder`) and sorts by it: in
   memory (a sort of row-tagged keys, then ``take``) when the partition fits in half of
   its share of :data:`SORT_MEMORY_BYTES`, else in DuckDB, which spills to a temporary directory
   (then the partition is read twice: the clustering columns to sample the quantile
   boundaries, then every row). The sorted rows are cut into files near
   ``target_file_size`` at curve-cell boundaries and written on a small thread pool
   (one :class:`~lakequery.writer.data_files.DataFilesWriter` per thread, not one
   writer set up per file), with tight statistics.
3. One transaction removes the rewritten files and adds the new ones, all with
   ``dataChange=false``: it runs under snapshot isolation, records the files it read,
   and fails with a :class:`~lakequery.errors.CommitConflictError` (new files deleted)
   when a concurrent commit removed one of them; unrelated commits are retried past.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://optimize-doc"
    >>> for i in range(4):
    ...     _ = lq.write(uri, pa.table({"x": [i, i + 10]}), mode="append")
    >>> m = lq.DeltaTable(uri).optimize()
    >>> m.files_removed, m.files_added, m.version
    (4, 1, 4)
    >>> lq.DeltaTable(uri).optimize().committed      # nothing left to do
    False
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakequery.arrow_buffers import int64_array, numeric_array
from lakequery.clustering.optimize import clustered_layout
from lakequery.commands.file_actions import (
    only_partition_columns,
    partition_match,
    partition_strings,
    remove_actions,
)
from lakequery.commands.metrics import OptimizeMetrics
from lakequery.commands.progress import ProgressCallback, ProgressReporter
from lakequery.commands.zorder import (
    Curve,
    KeySampler,
    best_cut,
    check_clusterable,
    file_bounds,
    table_keys,
)
from lakequery.engines.deletion import dv_cardinalities
from lakequery.errors import CommitConflictError, PredicateError
from lakequery.row_tracking.rewrite import preserving_scan, preserving_state
from lakequery.snapshot import Snapshot
from lakequery.storage import Storage
from lakequery.storage.engine_errors import relation_reader
from lakequery.txn import Transaction
from lakequery.writer.data_files import DataFilesWriter, write_data_files
from lakequery.writer.state import WriteState
from udfs.zorder import row_numbers, sort_keys, tag_row_numbers

#: A file whose deletion vector hides more than this share of its rows is rewritten.
DV_PURGE_RATIO = 0.05
#: Memory DuckDB may use for one clustering sort before it spills (split among tasks).
SORT_MEMORY_BYTES = 1 << 30
_KEY = "__lq_cluster_key"
#: Clustered files end at the best curve boundary within ``rows * (1 ± CUT_SLACK)``.
CUT_SLACK = 0.3


@dataclass(frozen=True)
class Bin:
    """Files rewritten together: indexes into the considered files, one partition."""

    partition: tuple[tuple[str, str | None], ...]
    rows: tuple[int, ...]
    size: int


@dataclass(frozen=True)
class OptimizePlan:
    """What :func:`optimize` will rewrite.

    Attributes:
        files: the considered rows of :meth:`Snapshot.files` (after the predicate).
        bins: groups of ``files`` rows to rewrite.
    """

    files: pa.Table
    bins: tuple[Bin, ...]

    @property
    def num_files(self) -> int:
        return sum(len(b.rows) for b in self.bins)

    @property
    def num_bytes(self) -> int:
        return sum(b.size for b in self.bins)


def _considered(snapshot: Snapshot, predicate: str | None) -> pa.Table:
    files = snapshot.files()
    if predicate is None or not files.num_rows:
        return files
    if not only_partition_columns(predicate, snapshot):
        raise PredicateError(
            predicate,
            f"OPTIMIZE predicates may only use partition columns ({snapshot.partition_columns})",
        )
    return files.filter(partition_match(files, predicate))


def _dv_cardinality(files: pa.Table) -> list[int]:
    return [int(c) for c in dv_cardinalities(files).to_pylist()]


def plan_optimize(
    snapshot: Snapshot,
    files: pa.Table,
    *,
    target_file_size: int,
    min_file_size: int,
    cluster: bool,
) -> OptimizePlan:
    """Chooses the bins (pure: reads only the metadata in ``files``).

    Example:
        >>> import lakequery as lq
        >>> snap = lq.DeltaTable(lq.demo.example_table()).snapshot()
        >>> plan = plan_optimize(snap, snap.files(), target_file_size=1 << 20,
        ...                      min_file_size=1 << 20, cluster=False)
        >>> plan.num_files <= snap.num_files
        True
    """
    sizes = [int(s or 0) for s in files.column("size").to_pylist()]
    records = files.column("num_records").to_pylist()
    cards = _dv_cardinality(files)
    parts = partition_strings(snapshot, files)
    groups: dict[tuple[tuple[str, str | None], ...], list[int]] = {}
    for i, pv in enumerate(parts):
        groups.setdefault(tuple(sorted(pv.items())), []).append(i)
    bins: list[Bin] = []
    for key in sorted(groups, key=lambda k: [(n, v or "") for n, v in k]):
        members = groups[key]
        if cluster:
            # one clean file is rewritten only when it is cut into several (as Spark
            # would); sorting one file in place is left out, so a re-run stays cheap
            lone = len(members) == 1 and not cards[members[0]]
            if not lone or sizes[members[0]] > target_file_size:
                bins.append(Bin(key, tuple(members), sum(sizes[i] for i in members)))
            continue
        candidates = []
        for i in members:
            n = records[i]
            live = 1.0 - cards[i] / n if n else 1.0
            effective = int(sizes[i] * live)
            purge = cards[i] > 0 and (
                effective < min_file_size or (n and cards[i] / n > DV_PURGE_RATIO)
            )
            if sizes[i] < min_file_size or purge:
                candidates.append((effective, i))
        candidates.sort()
        current: list[int] = []
        filled = 0
        packed: list[list[int]] = []
        for effective, i in candidates:
            if current and filled + effective > target_file_size:
                packed.append(current)
                current, filled = [], 0
            current.append(i)
            filled += effective
        if current:
            packed.append(current)
        for rows in packed:
            if len(rows) == 1 and not cards[rows[0]]:
                continue  # one file, nothing deleted: rewriting it changes nothing
            bins.append(Bin(key, tuple(rows), sum(sizes[i] for i in rows)))
    return OptimizePlan(files, tuple(bins))


#: Small input files come out of DuckDB as one small batch each; the writer gets them
#: regrouped into batches of about this many rows (its per-batch work is not free).
COALESCE_ROWS = 1 << 17


def _coalesced(batches: Any, rows: int = COALESCE_ROWS) -> Any:
    """Record batches regrouped (one copy) into batches of at least ``rows`` rows."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if batch.num_rows >= rows and not pending:
            yield batch
            continue
        pending.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
            pending, held = [], 0
    if pending:
        yield from pa.Table.from_batches(pending).combine_chunks().to_batches()


def _compact(snapshot: Snapshot, files: pa.Table, state: WriteState) -> list[dict[str, Any]]:
    # DuckDB's Parquet reader opens many small files faster than pyarrow.dataset; it
    # applies the DVs (anti-join on file_row_number) and streams batches to the writer.
    import duckdb

    con = duckdb.connect(config={"threads": 2})
    try:
        rel = preserving_scan(snapshot, snapshot.scan().restricted_to(files)).to_duckdb(con)
        return write_data_files(_coalesced(relation_reader(rel, snapshot.table_uri)), state)
    finally:
        con.close()


def _rows_per_file(files: pa.Table, target_file_size: int) -> int:
    """Live rows per output file so that files come out near the target size."""
    sizes = pc.sum(files.column("size")).as_py() or 0
    records = pc.sum(files.column("num_records")).as_py() or 0
    deleted = sum(_dv_cardinality(files))
    live = max(0, int(records) - deleted)
    if not records:
        return 1 << 20
    live_bytes = int(sizes) * live / int(records)
    n_files = max(1, round(live_bytes / target_file_size))
    return max(1, -(-live // n_files))


class _Writers:
    """Writes files on ``threads`` threads while the caller prepares the next ones; at most
    ``threads`` files wait, so memory stays bounded. Each thread writes every one of its
    files through one :class:`DataFilesWriter` (the writer's setup is paid per thread,
    not per file)."""

    def __init__(self, state: WriteState, threads: int) -> None:
        self.state = state
        self.pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="lakequery-cluster")
        self.limit = max(1, threads)
        self.pending: list[Any] = []
        self.adds: list[dict[str, Any]] = []
        self.local = threading.local()
        self.made: list[DataFilesWriter] = []

    def write(self, data: pa.Table) -> list[dict[str, Any]]:
        writer = getattr(self.local, "writer", None)
        if writer is None:
            writer = self.local.writer = DataFilesWriter(self.state)
            self.made.append(writer)
        return writer.write(data)

    def submit(self, make: Any) -> None:
        while len(self.pending) >= self.limit:
            self.adds.extend(self.pending.pop(0).result())
        self.pending.append(self.pool.submit(lambda: self.write(make())))

    def finish(self) -> list[dict[str, Any]]:
        try:
            for f in self.pending:
                self.adds.extend(f.result())
        finally:
            self.pool.shutdown(wait=True)
            for writer in self.made:
                writer.close()
        return self.adds


def _cut_files(
    sorted_batches: Any, rows_per_file: int, writers: _Writers, *, slack: float = CUT_SLACK
) -> list[dict[str, Any]]:
    """Cuts a stream of key-sorted batches (last column: the key) into files of about
    ``rows_per_file`` rows, each ended at the coarsest curve boundary within
    ``rows_per_file * (1 ± slack)`` rows (:func:`~lakequery.commands.zorder.best_cut`).
    Holds about one file per writer thread plus one batch in memory."""
    lo = max(1, int(rows_per_file * (1 - slack)))
    hi = max(lo + 1, int(rows_per_file * (1 + slack)))
    pending: list[pa.RecordBatch] = []
    held = 0
    previous: int | None = None

    def emit(count: int) -> None:
        nonlocal pending, held, previous
        table = pa.Table.from_batches(pending)
        keys = table.column(table.num_columns - 1)
        previous = int(keys[count - 1].as_py())
        data = table.drop_columns([table.column_names[-1]])
        chunk = data.slice(0, count)
        writers.submit(lambda: chunk)
        rest = table.slice(count)
        pending = rest.to_batches()
        held = rest.num_rows

    for batch in sorted_batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        held += batch.num_rows
        while held >= hi:
            keys_table = pa.Table.from_batches(pending)
            keys = keys_table.column(keys_table.num_columns - 1)
            window = np.asarray(keys.slice(0, hi).to_numpy(), dtype=np.uint64)
            emit(best_cut(previous, window, lo, hi))
    if held:
        emit(held)
    return writers.finish()


#: Bytes per row assumed for the columns a scan adds (row ids, commit versions).
_EXTRA_ROW_BYTES = 16
#: In-memory bytes assumed per byte of Parquet for variable-width and nested columns.
_EXPANSION = 8


def _batch_rows(snapshot: Snapshot, files: pa.Table, budget: int) -> int | None:
    """Rows per read batch for a clustering read: all the live rows of ``files`` in one
    batch (a contiguous table, so the per-file ``take`` gathers without concatenating
    chunks) when their estimated in-memory size fits ``budget``; else None (DuckDB's
    default batches, read until the budget says spill).

    The estimate: fixed-width columns at their width, plus ``_EXPANSION`` times the
    files' Parquet bytes when any column has variable width. An underestimate only
    makes the read hold one batch larger than the budget before it falls back to
    spilling; the result is the same.
    """
    rows = int(pc.sum(files.column("num_records")).as_py() or 0) - sum(_dv_cardinality(files))
    if rows <= 0:
        return None
    fixed, variable = _EXTRA_ROW_BYTES, False
    for f in snapshot.schema:
        try:
            fixed += max(1, f.type.bit_width // 8) + 1  # + validity, generously
        except (ValueError, TypeError, AttributeError):  # strings, binaries, nested types
            variable = True
    estimate = rows * fixed
    if variable:
        estimate += _EXPANSION * int(pc.sum(files.column("size")).as_py() or 0)
    return rows if estimate <= budget else None


def _read_within(reader: pa.RecordBatchReader, budget: int) -> tuple[list[pa.RecordBatch], bool]:
    """Batches of ``reader`` until ``budget`` bytes; True when the stream ended within it."""
    batches: list[pa.RecordBatch] = []
    held = 0
    for batch in reader:
        batches.append(batch)
        held += batch.nbytes
        if held > budget:
            return batches, False
    return batches, True


def _cluster(
    snapshot: Snapshot,
    files: pa.Table,
    state: WriteState,
    columns: Sequence[str],
    curve: Curve,
    *,
    threads: int,
    memory_bytes: int,
) -> list[dict[str, Any]]:
    # One output file per write: the cut decides the size, not the writer's rollover.
    one_file = replace(state, target_file_size=1 << 62)
    rows_per_file = _rows_per_file(files, state.target_file_size)
    writers = _Writers(one_file, threads)
    try:
        # A partition that fits in half the budget (the sorted copy needs the other half)
        # is sorted in memory; a larger one goes through DuckDB, which spills. The first
        # read uses DuckDB's Parquet reader: on 2M rows it took ~30% less time and ~100 MB
        # less peak memory than pyarrow.dataset (its batches are owned by Arrow, so the
        # connection can close right after). Rows are sorted afterwards, so their order
        # does not matter. A database of its own, closed after the read, gives its memory
        # back: a cursor of the shared database saved ~20 ms but left ~110 MB more peak RSS.
        import duckdb

        con = duckdb.connect(config={"threads": max(1, threads), "preserve_insertion_order": False})
        try:
            rel = preserving_scan(snapshot, snapshot.scan().restricted_to(files)).to_duckdb(con)
            budget = memory_bytes // 2
            reader = relation_reader(
                rel, snapshot.table_uri, batch_size=_batch_rows(snapshot, files, budget)
            )
            batches, complete = _read_within(reader, budget)
        finally:
            con.close()
        if complete:
            return _cluster_in_memory(batches, columns, curve, rows_per_file, writers)
        del batches
        return _cluster_spilling(
            snapshot, files, columns, curve, rows_per_file, writers, threads, memory_bytes
        )
    except BaseException:
        with contextlib.suppress(Exception):
            writers.finish()
        raise


def _cluster_in_memory(
    batches: list[pa.RecordBatch],
    columns: Sequence[str],
    curve: Curve,
    rows_per_file: int,
    writers: _Writers,
) -> list[dict[str, Any]]:
    if not batches:
        return writers.finish()
    # One contiguous table: pyarrow's ``take`` on a chunked table concatenates all the
    # chunks on every call, so a per-file take from the chunked partition cost one copy
    # of the whole partition per output file (2M rows, 2 or 16 chunks, 128 files:
    # 0.32-0.53 s against 0.04 s). Combining once is one copy, within the half of the
    # budget kept for the sorted rows. (Gathering each file from the chunks that hold
    # it, without combining, kept ~50 MB less peak memory but cost 8-10% more CPU at
    # 8 and at 128 files: each file's rows were copied twice more; a numpy gather for
    # fixed-width columns was slower still, 2x on 16 chunks.)
    table = pa.Table.from_batches(batches)
    del batches
    if any(c.num_chunks > 1 for c in table.columns):
        table = table.combine_chunks()
    keys = table_keys(table, columns, curve)
    # Rows ordered by sorting keys tagged with their row numbers, in the keys' own memory
    # (a radix sort, ``sort_keys``: 2M rows 26 ms, where ``ndarray.sort`` took 12 ms on
    # a CPU whose numpy sort is vectorised and 109 ms on one where it is not; argsort is
    # slower than either, it moves the row numbers too). The tags replace
    # the keys' lowest ~log2(rows) bits: with up to three columns those hold no rank
    # information; with four, at 2M rows, each column keeps 1024 of its 4096 rank levels
    # within a file's order, still far finer than the files. Cuts use the tagged keys.
    index_bits = tag_row_numbers(keys)
    sort_keys(keys)
    bounds = file_bounds(keys, rows_per_file, CUT_SLACK)
    order = row_numbers(keys, index_bits)
    del keys
    for start, end in bounds:
        rows = numeric_array(order[start:end])
        writers.submit(lambda rows=rows: table.take(rows))
    return writers.finish()


def _cluster_spilling(
    snapshot: Snapshot,
    files: pa.Table,
    columns: Sequence[str],
    curve: Curve,
    rows_per_file: int,
    writers: _Writers,
    threads: int,
    memory_bytes: int,
) -> list[dict[str, Any]]:
    import duckdb

    expected = pc.sum(files.column("num_records")).as_py() or None
    sampler = KeySampler(columns, expected)
    for batch in snapshot.scan(columns=list(columns)).restricted_to(files).to_arrow_reader():
        sampler.add(batch)
    builder = sampler.builder(curve)
    source = preserving_scan(snapshot, snapshot.scan().restricted_to(files)).to_arrow_reader()
    schema = source.schema.append(pa.field(_KEY, pa.uint64()))

    def tagged() -> Any:
        for batch in source:
            keys = numeric_array(np.asarray(builder.keys(batch), dtype=np.uint64))
            yield pa.RecordBatch.from_arrays([*batch.columns, keys], schema=schema)

    spill = tempfile.mkdtemp(prefix="lakequery-sort-")
    con = duckdb.connect(
        config={
            "memory_limit": f"{max(64 << 20, memory_bytes) >> 20}MB",
            "temp_directory": spill,
            "threads": max(1, threads),
            "preserve_insertion_order": False,
        }
    )
    try:
        con.register("lq_cluster_source", pa.RecordBatchReader.from_batches(schema, tagged()))
        rel = con.sql(f"SELECT * FROM lq_cluster_source ORDER BY {_KEY}")
        return _cut_files(relation_reader(rel), rows_per_file, writers)
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def _delete_quietly(storage: Storage, adds: Sequence[dict[str, Any]]) -> None:
    from urllib.parse import unquote

    for a in adds:
        with contextlib.suppress(Exception):  # best effort: leftovers are orphans for VACUUM
            storage.delete(storage.join(unquote(a["path"])))


def optimize(
    storage: Storage,
    *,
    predicate: str | None = None,
    target_file_size: int | None = None,
    min_file_size: int | None = None,
    z_order_by: Sequence[str] | str | None = None,
    curve: Curve = "zorder",
    max_concurrent_tasks: int | None = None,
    progress: ProgressCallback | None = None,
    full: bool = False,
) -> OptimizeMetrics:
    """Compacts (or clusters) the latest version of a table; see the module docstring.

    Args:
        storage: the table's storage.
        predicate: only files whose partition values match (partition columns only).
        target_file_size: bytes per output file; default ``delta.targetFileSize``, else
            128 MiB.
        min_file_size: files below this are compacted; default ``target_file_size``.
        z_order_by: clustering columns (rewrites whole partitions, sorted by the key).
        curve: ``"zorder"`` (bit interleaving) or ``"hilbert"``.
        max_concurrent_tasks: bins rewritten at once (default: CPU count).
        progress: called with a :class:`~lakequery.commands.progress.Progress` as files
            finish; without it, a bar is drawn when stderr is a terminal.
        full: on a clustered table, recluster every file, not only the unclustered ones
            (:mod:`lakequery.clustering.optimize`).

    Returns:
        :class:`~lakequery.commands.metrics.OptimizeMetrics`; ``version`` is None when
        nothing needed rewriting (nothing is committed then).

    Raises:
        PredicateError: the predicate uses a non-partition column.
        SchemaError: a clustering column is missing or of an unsupported type.
        ClusteringError: ``z_order_by`` on a clustered table (or ``full`` on another).
        CommitConflictError: a concurrent commit removed a rewritten file.
    """
    from lakequery.errors import SchemaError
    from lakequery.log_segment import load_state

    started = time.monotonic()
    snapshot = Snapshot(storage, load_state(storage, None))
    columns: tuple[str, ...] = ()
    layout = clustered_layout(snapshot, z_order_by=z_order_by, full=full)
    if layout is not None and layout.clusters:  # liquid clustering: its columns, Hilbert
        columns, curve = layout.columns, "hilbert"
    elif z_order_by is not None:
        names = [z_order_by] if isinstance(z_order_by, str) else list(z_order_by)
        if not names:
            raise ValueError("z_order_by needs at least one column")
        schema = snapshot.schema
        lowered = {n.lower(): n for n in schema.names}
        resolved = []
        for name in names:
            real = name if name in schema.names else lowered.get(name.lower())
            if real is None:
                raise SchemaError(f"no column {name!r} to cluster by (columns: {schema.names})")
            if real in snapshot.partition_columns:
                raise SchemaError(f"{real!r} is a partition column: clustering by it is useless")
            check_clusterable(real, schema.field(real).type)
            resolved.append(real)
        columns = tuple(resolved)
    if curve not in ("zorder", "hilbert"):
        raise ValueError(f"curve must be 'zorder' or 'hilbert', not {curve!r}")
    options = storage.options
    state = WriteState.for_table(
        storage.root,
        snapshot.metadata,
        snapshot.protocol,
        storage_options=options,
        target_file_size=target_file_size,
        data_change=False,
    )
    # Rewritten files often hold mostly-distinct columns (ids, keys, payloads): skipping
    # their doomed dictionary attempt roughly halves the Parquet encoding time.
    state = preserving_state(snapshot, replace(state, adaptive_dictionary=True))
    target = state.target_file_size
    minimum = target if min_file_size is None else int(min_file_size)
    files = _considered(snapshot, predicate)
    if layout is not None and layout.clusters:
        plan = layout.plan(snapshot, files)
    else:
        plan = plan_optimize(
            snapshot, files, target_file_size=target, min_file_size=minimum, cluster=bool(columns)
        )
    tasks = max(1, max_concurrent_tasks or os.cpu_count() or 1)
    all_adds: list[dict[str, Any]] = []
    if plan.bins:
        order = sorted(plan.bins, key=lambda b: -b.size)  # big first: better load balance
        cores = os.cpu_count() or 1
        workers = min(tasks, len(order))
        with (
            ProgressReporter(
                "OPTIMIZE", plan.num_files, plan.num_bytes, callback=progress
            ) as reporter,
            ThreadPoolExecutor(workers, thread_name_prefix="lakequery-optimize") as pool,
        ):

            def run(b: Bin) -> list[dict[str, Any]]:
                chosen = files.take(int64_array(b.rows))
                if columns:
                    adds = _cluster(
                        snapshot,
                        chosen,
                        state,
                        columns,
                        curve,
                        threads=max(1, cores // workers),
                        memory_bytes=SORT_MEMORY_BYTES // workers,
                    )
                else:
                    adds = _compact(snapshot, chosen, state)
                reporter.advance(len(b.rows), b.size)
                return adds

            futures = [pool.submit(run, b) for b in order]
            failure: BaseException | None = None
            for f in futures:
                try:
                    all_adds.extend(f.result())
                except BaseException as exc:  # finish the others, then clean up and raise
                    failure = failure or exc
            if failure is not None:
                _delete_quietly(storage, all_adds)
                raise failure
    if layout is not None and layout.clusters:
        all_adds = layout.mark(all_adds)
    rows = sorted(i for b in plan.bins for i in b.rows)
    removed = files.take(int64_array(rows)) if rows else files.slice(0, 0)
    cards = _dv_cardinality(removed)
    metrics = OptimizeMetrics(
        version=None,
        files_added=len(all_adds),
        files_removed=removed.num_rows,
        bytes_added=sum(int(a["size"]) for a in all_adds),
        bytes_removed=int(pc.sum(removed.column("size")).as_py() or 0),
        partitions_optimized=len({b.partition for b in plan.bins}),
        num_bins=len(plan.bins),
        dvs_purged=sum(1 for c in cards if c),
        files_considered=files.num_rows,
        files_skipped=files.num_rows - removed.num_rows,
        duration_ms=0,
        rows_purged=sum(cards),
        z_order_by=columns,
        curve=curve if columns else None,
    )
    if not plan.bins:
        return replace(metrics, duration_ms=int((time.monotonic() - started) * 1000))
    txn = Transaction(
        storage,
        snapshot,
        operation="OPTIMIZE",
        parameters={
            "predicate": [predicate] if predicate else [],
            "zOrderBy": list(columns),
            **({"curve": curve} if columns else {}),
            "targetSize": target,
            **(layout.parameters() if layout is not None else {}),
        },
    )
    txn.read_files(str(p) for p in removed.column("path").to_pylist())
    txn.remove_files(
        remove_actions(snapshot, removed, now_ms=int(time.time() * 1000), data_change=False)
    )
    txn.add_files(all_adds)
    duration = int((time.monotonic() - started) * 1000)
    metrics = replace(metrics, duration_ms=duration)
    txn.metrics = dict(metrics.operation_metrics())
    try:
        result = txn.commit()
    except CommitConflictError:
        _delete_quietly(storage, all_adds)
        raise
    return replace(
        metrics,
        version=result.version,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


__all__ = ["DV_PURGE_RATIO", "Bin", "OptimizePlan", "optimize", "plan_optimize"]
