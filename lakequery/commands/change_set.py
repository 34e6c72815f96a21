"""The rows one DML statement deletes, updates and inserts, and how they become one commit.

DELETE, UPDATE and MERGE each describe their effect as one DuckDB table, the *change
table* ``__lq_change`` (DuckDB spills it to disk when it outgrows memory):

==========================  ===============================================================
``__lq_kind``               ``'delete'``, ``'update'`` or ``'insert'``
``__lq_file``/``__lq_row``  where the target row is stored (NULL for inserts)
``__n0`` … ``__nK``         the row's new values, one per column of the written schema
                            (updates and inserts)
``__o0`` … ``__oJ``         the target row's old values, one per column of the read
                            schema (deletes and updates; only when the change data feed
                            is on)
==========================  ===============================================================

:meth:`Statement.commit_changes` turns it into file actions: the touched rows of each
file are marked in its deletion vector (merge-on-read), or the file is rewritten without
them (copy-on-write: tables without deletion vectors, or files whose deleted fraction
passes ``rewrite_threshold``); new and updated rows go to new files; with the change data
feed on, ``cdc`` files hold the changes (digest §13). Everything is one transaction that
records the files it read, so concurrent writers get the conflicts of digest §17.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import int64_array, int64_scalar, int_values
from lakequery.commands.file_actions import add_actions, remove_actions
from lakequery.commands.progress import ProgressCallback, ProgressReporter, counted
from lakequery.display import HtmlMetrics
from lakequery.duckdb_databases import create_temp_view, private_cursor
from lakequery.dv.writer import DeletionVectorWriter
from lakequery.engines.deletion import dv_cardinalities
from lakequery.engines.duckdb import ROW_FILE_COLUMN, ROW_NUMBER_COLUMN, duckdb_relation
from lakequery.engines.sql_types import duckdb_type, quote_ident
from lakequery.errors import AppendOnlyError, PredicateError
from lakequery.parquet_footers import footer_row_counts
from lakequery.protocol.actions import total_records
from lakequery.protocol.change_feed import cdf_enabled
from lakequery.row_tracking.columns import preserves_row_ids
from lakequery.row_tracking.rewrite import preserving_scan, preserving_state
from lakequery.storage.engine_errors import raise_storage_failure
from lakequery.txn import Transaction
from lakequery.writer.constraints import spark_to_duckdb, table_constraints
from lakequery.writer.data_files import CHANGE_TYPE_COLUMN, write_data_files
from lakequery.writer.inputs import to_reader
from lakequery.writer.state import WriteState

if TYPE_CHECKING:
    from lakequery.scan import ScanPlan
    from lakequery.snapshot import Snapshot
    from lakequery.storage import Storage
    from lakequery.table import DeltaTable

CHANGE_TABLE = "__lq_change"
_IDS_TABLE = "__lq_ids"
_ROW_IDS_TABLE = "__lq_row_ids"
_KINDS_WITH_NEW_ROWS = ("update", "insert")
#: ``_change_type`` values of the change data feed, by what happened to a row.
_CDC_PARTS = (
    ("delete", "o", "delete"),
    ("update", "o", "update_preimage"),
    ("update", "n", "update_postimage"),
    ("insert", "n", "insert"),
)


def parses(predicate: str, schema: pa.Schema) -> bool:
    """Whether lakequery's predicate language (which drives file pruning) reads
    ``predicate`` and binds it to ``schema``; otherwise DuckDB alone evaluates it (its
    dialect is wider: functions, ``%``, implicit casts)."""
    from lakequery.protocol.predicates import bind, parse_predicate

    try:
        bind(parse_predicate(predicate), schema)
    except PredicateError:
        return False
    return True


def new_value_column(i: int) -> str:
    return f"__n{i}"


def old_value_column(i: int) -> str:
    return f"__o{i}"


def cast_sql(expression: str, t: pa.DataType) -> str:
    """``expression`` cast to the DuckDB spelling of the column type ``t``."""
    return f"CAST(({expression}) AS {duckdb_type(t)})"


def generation_expressions(state: WriteState) -> dict[str, str]:
    """The written schema's generated columns: name -> generation expression in DuckDB SQL."""
    _, generated = table_constraints(state.schema, {})
    return {
        name: spark_to_duckdb(expression, feature="generatedColumns")
        for name, expression in generated.items()
    }


def with_generated_values(
    select_sql: str, schema: pa.Schema, regenerate: Mapping[str, tuple[str, str]]
) -> str:
    """Wraps a change-table query so that generated columns get their values computed.

    A DML statement that does not give a generated column a value (UPDATE without it in
    ``set``, a MERGE clause that neither assigns it nor finds it in the source) writes
    the generation expression evaluated over the row's *new* values, as Spark does,
    rather than the old value, which no longer satisfies the expression (digest §14).

    Args:
        select_sql: the query with ``__n<i>`` new-value columns in ``schema`` order.
        schema: the written schema.
        regenerate: column -> (generation expression, SQL condition over the query's
            columns telling which rows to compute it for).
    """
    if not regenerate:
        return select_sql
    names = list(schema.names)
    aliases = ", ".join(f"{new_value_column(i)} AS {quote_ident(c)}" for i, c in enumerate(names))
    computed = []
    for column, (expression, condition) in regenerate.items():
        n = new_value_column(names.index(column))
        value = cast_sql(expression, schema.field(column).type)
        computed.append(f"CASE WHEN {condition} THEN {value} ELSE {n} END AS {n}")
    return (
        f"SELECT * EXCLUDE ({', '.join(quote_ident(c) for c in names)}) "
        f"REPLACE ({', '.join(computed)}) FROM (SELECT *, {aliases} FROM ({select_sql}))"
    )


@dataclass(frozen=True)
class DmlMetrics(HtmlMetrics):
    """What a DELETE, UPDATE or MERGE did (also in ``commitInfo.operationMetrics``).

    Attributes:
        version: the committed version; when nothing changed, the version that was read.
        committed: False when no row changed and no commit was made.
        num_deleted_rows / num_updated_rows / num_inserted_rows: rows changed.
        num_copied_rows: unchanged rows rewritten into new files (copy-on-write).
        num_added_files / num_removed_files: data files added, and data files removed
            whole (fully deleted or rewritten).
        num_deletion_vectors_added / num_deletion_vectors_removed: DVs written, and old
            DVs replaced or dropped with their files.
        num_added_change_files: ``cdc`` files written (change data feed).
        num_added_bytes / num_removed_bytes: bytes of data files added and removed whole,
            plus DV bytes written.
        num_files_scanned / num_files_skipped: files read after pruning, and pruned.
        execution_time_ms: wall time of the command.
    """

    version: int
    committed: bool
    num_deleted_rows: int = 0
    num_updated_rows: int = 0
    num_inserted_rows: int = 0
    num_copied_rows: int = 0
    num_added_files: int = 0
    num_removed_files: int = 0
    num_deletion_vectors_added: int = 0
    num_deletion_vectors_removed: int = 0
    num_added_change_files: int = 0
    num_added_bytes: int = 0
    num_removed_bytes: int = 0
    num_files_scanned: int = 0
    num_files_skipped: int = 0
    execution_time_ms: int = 0


@dataclass
class _Outcome:
    """Counts gathered while building the commit."""

    kinds: dict[str, int] = field(default_factory=dict)
    copied: int = 0
    added_files: int = 0
    removed_files: int = 0
    dvs_added: int = 0
    dvs_removed: int = 0
    cdc_files: int = 0
    added_bytes: int = 0
    removed_bytes: int = 0


def _row_counts(files: pa.Table) -> tuple[list[int], list[int]]:
    """(physical rows, rows its deletion vector already deletes) of each file (0 rows
    where ``stats.numRecords`` is missing)."""
    zero = int64_scalar(0)
    total: Any = pc.fill_null(files.column("num_records").combine_chunks(), zero)
    deleted = dv_cardinalities(files)
    return [int(x) for x in total.to_pylist()], [int(x) for x in deleted.to_pylist()]


class Statement:
    """One DML statement's working state: the snapshot it reads, its transaction, a DuckDB
    cursor (spilling to disk when large), and the write state of new files.

    Use as a context manager; the cursor and its temporary tables go away on exit.

    Args:
        storage: the table's storage.
        snapshot: the version the statement reads.
        operation: ``commitInfo.operation``.
        parameters: ``commitInfo.operationParameters``.
        copy_on_write: rewrite touched files even when the table has deletion vectors.
        rewrite_threshold: with deletion vectors, rewrite a file instead when more than
            this fraction of its rows would be deleted (None: never).
        storage_options: the table's storage options (for the files the writer opens).
        progress: receives :class:`~lakequery.commands.progress.Progress` (rows written
            into new files so far); without it a bar is drawn when someone is watching.
    """

    def __init__(
        self,
        storage: Storage,
        snapshot: Snapshot,
        *,
        operation: str,
        parameters: Mapping[str, Any] | None = None,
        copy_on_write: bool = False,
        rewrite_threshold: float | None = None,
        storage_options: Mapping[str, Any] | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        if rewrite_threshold is not None and not 0.0 <= rewrite_threshold <= 1.0:
            raise ValueError("rewrite_threshold is a fraction between 0 and 1")
        self.started = time.monotonic()
        self.storage = storage
        self.snapshot = snapshot
        self.txn = Transaction(storage, snapshot, operation=operation, parameters=parameters)
        props = snapshot.properties
        self.change_data_feed = cdf_enabled(snapshot.metadata, snapshot.protocol)
        self.deletion_vectors = (
            not copy_on_write
            and props.enable_deletion_vectors
            and snapshot.protocol.supports("deletionVectors")
        )
        self.rewrite_threshold = rewrite_threshold
        self.state = WriteState.for_table(
            storage.root, snapshot.metadata, snapshot.protocol, storage_options=storage_options
        )
        self.read_columns: list[str] = list(snapshot.schema.names)
        # the materialized row-id columns rewritten rows carry (row tracking), or None
        self.row_id_columns = preserves_row_ids(snapshot)
        self.plan: ScanPlan | None = None
        # a cursor of lakequery's engine database: its temp tables and views are private,
        # and large change tables spill to the database's temp directory. Its joins may
        # swap sides: they join Parquet scans, Arrow data and temporary tables, whose
        # sizes DuckDB knows (the private database's fixed sides are for JSON streams)
        self.con = private_cursor(fixed_joins=False, utc=True)
        # rows written into new data and change-data files (copy-on-write, updates, inserts)
        self.reporter = ProgressReporter(operation, 0, 0, callback=progress, unit="rows")

    @classmethod
    def for_table(
        cls,
        table: DeltaTable,
        *,
        operation: str,
        parameters: Mapping[str, Any],
        copy_on_write: bool = False,
        rewrite_threshold: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> Statement:
        """A statement on the latest version of ``table``."""
        return cls(
            table.storage,
            table.snapshot(),
            operation=operation,
            parameters=parameters,
            copy_on_write=copy_on_write,
            rewrite_threshold=rewrite_threshold,
            storage_options=table.storage_options,
            progress=progress,
        )

    def __enter__(self) -> Statement:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.reporter.close()
        self.con.close()

    # -- checks -------------------------------------------------------------------------------
    def refuse_on_append_only(self) -> None:
        if self.snapshot.properties.append_only:
            raise AppendOnlyError(self.storage.root, self.txn.operation)

    # -- reading the target -------------------------------------------------------------------
    def target(
        self, predicate: str | None, *, columns: Sequence[str] | None = None, name: str
    ) -> None:
        """Creates the view ``name``: the live rows for which ``predicate`` (SQL, DuckDB
        dialect) is TRUE, with their storage position.

        When lakequery's predicate language reads it, files are first pruned by partition
        values and statistics, the transaction records it as its read predicate, and the
        rows are selected by its rendering for DuckDB: the semantics of
        ``scan(filter=)`` (a literal typed as its column: ``f > 0.1e0`` compares a FLOAT
        column with the float 0.1), so which rows match does not depend on which files
        pruning kept (DuckDB's own reading compared as DOUBLE: the row 0.1f matched in a
        file that was kept and not in one that was pruned). Otherwise DuckDB's own
        semantics select them, every file is read and the statement counts as reading
        the whole table. The files read are recorded either way."""
        pruning = (
            predicate if predicate is None or parses(predicate, self.snapshot.schema) else None
        )
        pruned = self.snapshot.scan(filter=pruning)
        self.plan = pruned.plan()
        self.txn.read_predicate(pruning)
        self.txn.read_files(str(p) for p in self.plan.files.column("path").to_pylist())
        if predicate is not None:
            columns = None  # the predicate may use any column
        scan = self.snapshot.scan(columns=columns).restricted_to(self.plan.files)
        rel = duckdb_relation(scan, self.con, row_ids=True)
        if predicate is not None:
            if pruned.filter is not None:
                from lakequery.protocol.predicates import to_duckdb_sql

                predicate = to_duckdb_sql(pruned.filter)
            try:
                rel = rel.filter(predicate)  # WHERE keeps only rows where it is TRUE
            except duckdb.Error as exc:
                raise_storage_failure(exc, self.snapshot.table_uri)
                raise PredicateError(predicate, str(exc).splitlines()[0]) from exc
        try:
            create_temp_view(self.con, name, rel)
        except duckdb.Error as exc:
            raise_storage_failure(exc, self.snapshot.table_uri)
            raise

    def build_change_table(self, select_sql: str, what: str) -> None:
        """Creates the change table from ``select_sql``; DuckDB errors in the user's
        expressions (``what``) become :class:`~lakequery.errors.PredicateError`."""
        try:
            self.con.execute(f"CREATE TEMP TABLE {CHANGE_TABLE} AS {select_sql}")
        except (duckdb.BinderException, duckdb.ParserException, duckdb.ConversionException) as exc:
            raise PredicateError(what, str(exc).splitlines()[0]) from exc
        except duckdb.Error as exc:
            raise_storage_failure(exc, self.snapshot.table_uri)
            raise

    def old_value_columns(self) -> str:
        """``"col" AS __o{i}`` for every read column when the change data feed is on."""
        if not self.change_data_feed:
            return ""
        return "".join(
            f", {quote_ident(c)} AS {old_value_column(i)}" for i, c in enumerate(self.read_columns)
        )

    # -- from change table to commit ----------------------------------------------------------
    def count_kinds(self) -> dict[str, int]:
        rows = self.con.sql(
            f"SELECT __lq_kind, count(*) FROM {CHANGE_TABLE} GROUP BY __lq_kind"
        ).fetchall()
        return {str(k): int(n) for k, n in rows}

    def commit_changes(
        self,
        *,
        state: WriteState | None = None,
        extra_metrics: Mapping[str, Any] | None = None,
        metric_names: Mapping[str, str] | None = None,
    ) -> DmlMetrics:
        """Turns the change table into file actions and commits them as one transaction.

        Args:
            state: the write state of new files (default: the table's, unchanged schema).
            extra_metrics: further ``operationMetrics`` entries.
            metric_names: how this operation names the row counts in ``operationMetrics``
                (``deleted``, ``updated``, ``inserted``, ``copied`` -> metric name).
        """
        state = preserving_state(self.snapshot, state or self.state)
        out = _Outcome(kinds=self.count_kinds())
        self.con.execute(
            f"CREATE TEMP TABLE {_IDS_TABLE} AS SELECT DISTINCT {ROW_FILE_COLUMN}, "
            f"{ROW_NUMBER_COLUMN} FROM {CHANGE_TABLE} WHERE {ROW_FILE_COLUMN} IS NOT NULL"
        )
        now = int(time.time() * 1000)
        dv_actions, rewrite = self._mark_deleted_rows(now)
        kept_sql = self._rewrite_sql(rewrite)
        new_rows = out.kinds.get("update", 0) + out.kinds.get("insert", 0)
        adds: list[dict[str, Any]] = []
        if kept_sql or new_rows:
            parts = [kept_sql] if kept_sql else []
            if new_rows:
                parts.append(self._new_rows_sql(state))
            adds = write_data_files(
                counted(to_reader(self.con.sql(" UNION ALL BY NAME ".join(parts))), self.reporter),
                state,
            )
            out.copied = total_records(adds) - new_rows
        cdc: list[dict[str, Any]] = []
        if self.change_data_feed and out.kinds:
            cdc = write_data_files(
                to_reader(self.con.sql(self._change_data_sql(state, out.kinds))),
                replace(state, change_data=True, materialized_columns=()),
            )
        assert self.plan is not None
        removes = remove_actions(self.snapshot, pc.take(self.plan.files, rewrite), now)
        dv_adds = [a["add"] for a in dv_actions if "add" in a]
        dv_removes = [a["remove"] for a in dv_actions if "remove" in a]
        rewritten_paths = {a["path"] for a in dv_adds}
        out.added_files = len(adds)
        out.removed_files = len(removes) + sum(
            1 for r in dv_removes if r["path"] not in rewritten_paths
        )
        out.dvs_added = len(dv_adds)
        out.dvs_removed = sum(1 for r in dv_removes + removes if r.get("deletionVector"))
        out.cdc_files = len(cdc)
        dv_bytes = sum(
            int(a["deletionVector"]["sizeInBytes"])
            for a in dv_adds
            if a["deletionVector"]["storageType"] != "i"
        )
        out.added_bytes = sum(int(a["size"]) for a in adds) + dv_bytes
        out.removed_bytes = sum(
            int(r.get("size") or 0)
            for r in removes + dv_removes
            if r["path"] not in rewritten_paths
        )
        if not (adds or removes or dv_actions or cdc):
            return self.metrics(out, committed=False, version=self.snapshot.version)
        txn = self.txn
        txn.add_actions(dv_actions)
        txn.remove_files(removes)
        txn.add_files(adds)
        txn.add_cdc_files(cdc)
        txn.metrics = self._operation_metrics(out, metric_names or {}, extra_metrics or {})
        result = txn.commit()
        return self.metrics(out, committed=True, version=result.version)

    def commit_file_removal(self, files: pa.Table) -> DmlMetrics:
        """Removes whole files (DELETE by partition values or of everything): no reading."""
        out = _Outcome()
        if files.num_rows:
            total, deleted = _row_counts(files)
            counted = pc.is_valid(files.column("num_records")).to_pylist()
            uncounted = [
                str(p)
                for p, ok in zip(files.column("path").to_pylist(), counted, strict=True)
                if not ok
            ]
            rows = sum(total) + sum(footer_row_counts(self.storage, uncounted))
            out.kinds = {"delete": rows - sum(deleted)}
            removes = remove_actions(self.snapshot, files, int(time.time() * 1000))
            out.removed_files = len(removes)
            out.removed_bytes = sum(int(r.get("size") or 0) for r in removes)
            out.dvs_removed = sum(1 for r in removes if r.get("deletionVector"))
            self.txn.remove_files(removes)
            self.txn.metrics = self._operation_metrics(out, {"deleted": "numDeletedRows"}, {})
            return self.metrics(out, committed=True, version=self.txn.commit().version)
        return self.metrics(out, committed=False, version=self.snapshot.version)

    def metrics(self, out: _Outcome, *, committed: bool, version: int) -> DmlMetrics:
        plan = self.plan
        scanned = plan.num_files if plan is not None else 0
        return DmlMetrics(
            version=version,
            committed=committed,
            num_deleted_rows=out.kinds.get("delete", 0),
            num_updated_rows=out.kinds.get("update", 0),
            num_inserted_rows=out.kinds.get("insert", 0),
            num_copied_rows=out.copied,
            num_added_files=out.added_files,
            num_removed_files=out.removed_files,
            num_deletion_vectors_added=out.dvs_added,
            num_deletion_vectors_removed=out.dvs_removed,
            num_added_change_files=out.cdc_files,
            num_added_bytes=out.added_bytes,
            num_removed_bytes=out.removed_bytes,
            num_files_scanned=scanned,
            num_files_skipped=(plan.skipped_files if plan is not None else 0),
            execution_time_ms=int((time.monotonic() - self.started) * 1000),
        )

    def _operation_metrics(
        self, out: _Outcome, names: Mapping[str, str], extra: Mapping[str, Any]
    ) -> dict[str, Any]:
        rows = {
            "deleted": out.kinds.get("delete", 0),
            "updated": out.kinds.get("update", 0),
            "inserted": out.kinds.get("insert", 0),
            "copied": out.copied,
        }
        metrics: dict[str, Any] = {names[k]: v for k, v in rows.items() if k in names}
        metrics.update(
            {
                "numAddedFiles": out.added_files,
                "numRemovedFiles": out.removed_files,
                "numDeletionVectorsAdded": out.dvs_added,
                "numDeletionVectorsRemoved": out.dvs_removed,
                "numAddedChangeFiles": out.cdc_files,
                "numAddedBytes": out.added_bytes,
                "numRemovedBytes": out.removed_bytes,
                "executionTimeMs": int((time.monotonic() - self.started) * 1000),
            }
        )
        metrics.update(extra)
        return metrics

    def _touched_files(self) -> tuple[pa.Array[Any], list[np.ndarray]]:
        """The plan indices of the scanned files that lose rows and, for each, the sorted
        physical positions of the rows it loses."""
        grouped = self.con.sql(
            f"SELECT {ROW_FILE_COLUMN} AS f, list({ROW_NUMBER_COLUMN} ORDER BY "
            f"{ROW_NUMBER_COLUMN}) AS r FROM {_IDS_TABLE} GROUP BY ALL ORDER BY f"
        ).to_arrow_table()
        lists: Any = grouped.column("r").combine_chunks()
        if not grouped.num_rows:
            return int64_array([]), []
        offsets = int_values(lists.offsets)
        values = int_values(lists.values).astype(np.int64, copy=False)
        rows = [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
        return grouped.column("f").combine_chunks(), rows

    def _mark_deleted_rows(self, now_ms: int) -> tuple[list[dict[str, Any]], pa.Array[Any]]:
        """DV actions for the files that keep a deletion vector, and the plan indices of the
        files to rewrite."""
        assert self.plan is not None
        indices, rows = self._touched_files()
        if not len(indices) or not self.deletion_vectors:
            return [], indices
        files = pc.take(self.plan.files, indices)
        adds = add_actions(self.snapshot, files)
        writer = DeletionVectorWriter(self.storage)
        rewrite: list[int] = []
        threshold = self.rewrite_threshold
        totals, already = _row_counts(files)
        known = pc.is_valid(files.column("num_records")).to_pylist()
        for i, (add, deleted) in enumerate(zip(adds, rows, strict=True)):
            total, gone = int(totals[i]), int(already[i]) + len(deleted)
            if not known[i]:
                rewrite.append(i)  # a DV needs stats.numRecords: rewrite instead
            elif threshold is not None and total and gone < total and gone / total > threshold:
                rewrite.append(i)
            else:
                writer.delete_rows(add, deleted)
        return writer.finish(now_ms=now_ms), pc.take(indices, int64_array(rewrite))

    def _rewrite_sql(self, indices: pa.Array[Any]) -> str | None:
        """The rows that stay in the files to rewrite (copy-on-write), as SQL."""
        if not len(indices):
            return None
        assert self.plan is not None
        scan = self.snapshot.scan().restricted_to(pc.take(self.plan.files, indices))
        scan = preserving_scan(self.snapshot, scan)
        create_temp_view(self.con, "__lq_rewrite", duckdb_relation(scan, self.con, row_ids=True))
        # the rewrite scan numbers its files 0..n-1 in the order of ``indices``
        remap = pa.table({"o": indices, "n": int64_array(np.arange(len(indices)))})
        self.con.register("__lq_remap", remap)
        kept = list(self.snapshot.schema.names) + list(self.row_id_columns or ())
        cols = ", ".join(f"t.{quote_ident(c)}" for c in kept)
        return (
            f"SELECT {cols} FROM __lq_rewrite AS t ANTI JOIN (SELECT m.n AS f, i.{ROW_NUMBER_COLUMN}"
            f" AS r FROM {_IDS_TABLE} AS i JOIN __lq_remap AS m ON i.{ROW_FILE_COLUMN} = m.o) AS x"
            f" ON t.{ROW_FILE_COLUMN} = x.f AND t.{ROW_NUMBER_COLUMN} = x.r"
        )

    def _new_rows_sql(self, state: WriteState) -> str:
        cols = ", ".join(
            f"{new_value_column(i)} AS {quote_ident(c)}"
            for i, c in enumerate(state.arrow_schema.names)
        )
        kinds = ", ".join(f"'{k}'" for k in _KINDS_WITH_NEW_ROWS)
        if self.row_id_columns is None:
            return f"SELECT {cols} FROM {CHANGE_TABLE} WHERE __lq_kind IN ({kinds})"
        # updated rows keep their id and take this commit's version (NULL: the new file's
        # defaultRowCommitVersion); inserted rows get fresh ids (NULL: baseRowId + position)
        row_id, version = (quote_ident(c) for c in self.row_id_columns)
        self._updated_row_ids()
        return (
            f"SELECT {cols}, i.__lq_rt_id AS {row_id}, CAST(NULL AS BIGINT) AS {version} "
            f"FROM {CHANGE_TABLE} AS c LEFT JOIN {_ROW_IDS_TABLE} AS i "
            f"ON c.{ROW_FILE_COLUMN} = i.__lq_rt_file AND c.{ROW_NUMBER_COLUMN} = i.__lq_rt_row "
            f"WHERE c.__lq_kind IN ({kinds})"
        )

    def _updated_row_ids(self) -> None:
        """Creates :data:`_ROW_IDS_TABLE`: the row id of every updated row, by its file (plan
        index) and position, read from the files holding updated rows (their
        materialized row-id column, else ``baseRowId`` + position)."""
        assert self.plan is not None
        touched = self.con.sql(
            f"SELECT DISTINCT {ROW_FILE_COLUMN} AS o FROM {CHANGE_TABLE} "
            f"WHERE __lq_kind = 'update' ORDER BY o"
        ).to_arrow_table()
        indices = pc.cast(touched.column("o").combine_chunks(), pa.int64())
        scan = self.snapshot.scan(columns=[]).restricted_to(pc.take(self.plan.files, indices))
        scan = scan.with_row_tracking_columns(("__lq_rt_id", "__lq_rt_version"))
        create_temp_view(self.con, "__lq_rt_ids", duckdb_relation(scan, self.con, row_ids=True))
        remap = pa.table({"o": indices, "n": int64_array(np.arange(len(indices)))})
        self.con.register("__lq_rt_remap", remap)
        self.con.execute(
            f"CREATE OR REPLACE TEMP TABLE {_ROW_IDS_TABLE} AS SELECT m.o AS __lq_rt_file, "
            f"x.{ROW_NUMBER_COLUMN} AS __lq_rt_row, x.__lq_rt_id FROM __lq_rt_ids AS x "
            f"JOIN __lq_rt_remap AS m ON x.{ROW_FILE_COLUMN} = m.n"
        )

    def _change_data_sql(self, state: WriteState, kinds: Mapping[str, int]) -> str:
        names = {"n": list(state.arrow_schema.names), "o": self.read_columns}
        parts = []
        for kind, side, change_type in _CDC_PARTS:
            if not kinds.get(kind):
                continue
            column = new_value_column if side == "n" else old_value_column
            cols = ", ".join(f"{column(i)} AS {quote_ident(c)}" for i, c in enumerate(names[side]))
            parts.append(
                f"SELECT {cols}, '{change_type}' AS {CHANGE_TYPE_COLUMN} "
                f"FROM {CHANGE_TABLE} WHERE __lq_kind = '{kind}'"
            )
        return " UNION ALL BY NAME ".join(parts)
