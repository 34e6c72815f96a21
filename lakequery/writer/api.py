"""``lq.write``: append to, overwrite or create a Delta table from Arrow-compatible data.

A write runs in three steps that are also public for jobs that distribute the middle one
(``lakequery.spark.write`` runs it on Spark executors):

1. :func:`plan_write` (driver): reads the latest snapshot, applies the mode, checks or
   evolves the schema, decides the new metadata and protocol and returns a
   :class:`WritePlan` holding a picklable :class:`~lakequery.writer.state.WriteState`;
2. :func:`~lakequery.writer.data_files.write_data_files` (anywhere): data -> Parquet files
   -> ``add`` actions;
3. :func:`commit_write` (driver): one transaction that adds those files (and removes the
   overwritten ones), retrying on concurrent commits that do not conflict.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://write-doc"
    >>> lq.write(uri, pa.table({"id": [1, 2], "day": ["a", "b"]}), partition_by=["day"]).version
    0
    >>> lq.write(uri, pa.table({"id": [3], "day": ["a"]}), mode="append").version
    1
    >>> lq.DeltaTable(uri).snapshot().scan(filter="day = 'a'").to_arrow().num_rows
    2
    >>> lq.write(uri, pa.table({"id": [9], "day": ["a"]}), mode="overwrite",
    ...          predicate="day = 'a'").num_removed_files
    2
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import pyarrow as pa

from lakequery.clustering.create import (
    apply_clustering,
    clustering_pseudo_properties,
    requested_clustering,
)
from lakequery.commands.file_actions import (
    only_partition_columns,
    partition_match,
    remove_actions,
)
from lakequery.commands.progress import ProgressCallback, ProgressReporter, counted
from lakequery.errors import (
    AppendOnlyError,
    ClusteringError,
    ConcurrentTransactionError,
    LakeQueryError,
    SchemaError,
    TableAlreadyExistsError,
)
from lakequery.metadata import Metadata
from lakequery.protocol.actions import total_records
from lakequery.protocol.column_mapping import PHYSICAL_NAME_KEY
from lakequery.protocol.conflicts import partition_part
from lakequery.protocol.features import Protocol, table_features_in_use, upgraded_protocol
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.row_tracking_enablement import (
    check_row_tracking_enablement,
    with_row_tracking_columns,
)
from lakequery.protocol.schema import (
    schema_to_json,
)
from lakequery.snapshot import Snapshot, latest_or_none
from lakequery.storage import Storage, open_storage
from lakequery.storage.engine_errors import relation_reader
from lakequery.txn import CommitResult, Transaction
from lakequery.writer.data_files import CHANGE_TYPE_COLUMN, write_data_files
from lakequery.writer.identity import (
    Identity,
    commit_rebasing_identity,
    declared_schema,
    stage_high_water_marks,
    with_generation,
)
from lakequery.writer.inputs import to_reader
from lakequery.writer.new_table import (
    check_partition_columns,
    new_table,
    new_table_metadata,
    split_configuration,
)
from lakequery.writer.schema_evolution import assign_column_ids, reconcile
from lakequery.writer.state import WriteState

log = logging.getLogger("lakequery.write")

WriteMode = Literal["error", "append", "overwrite", "ignore"]
SchemaMode = Literal["merge", "overwrite"]
_MODE_NAMES = {
    "error": "ErrorIfExists",
    "append": "Append",
    "overwrite": "Overwrite",
    "ignore": "Ignore",
}


@dataclass(frozen=True)
class WriteResult:
    """What a write did.

    Attributes:
        version: the table version after the write (the existing one when skipped).
        mode: the write mode.
        num_files: data files added.
        num_rows: rows written.
        num_bytes: bytes of the added files.
        num_removed_files: files removed (overwrite).
        skipped: True when nothing was written (``mode="ignore"`` on an existing table,
            or an ``app_id``/``app_version`` that was already committed).
        message: why the write was skipped, or ``""``.
        attempts: versions tried before the commit landed (1 = no race lost).
    """

    version: int
    mode: str
    num_files: int = 0
    num_rows: int = 0
    num_bytes: int = 0
    num_removed_files: int = 0
    skipped: bool = False
    message: str = ""
    attempts: int = 0


@dataclass
class WritePlan:
    """A write decided on the driver: the state writers need and what the commit adds.

    Attributes:
        storage: the table's storage.
        snapshot: the version the write read (None: it creates the table).
        mode: the write mode.
        state: the picklable state for :func:`~lakequery.writer.data_files.write_data_files`
            (None when the write is skipped).
        metadata: the metadata to commit (None: unchanged).
        protocol: the protocol to commit (None: unchanged).
        skip_reason: non-empty when nothing is to be written.
    """

    storage: Storage
    snapshot: Snapshot | None
    mode: str
    state: WriteState | None
    metadata: Metadata | None = None
    protocol: Protocol | None = None
    predicate: str | None = None
    partition_by: tuple[str, ...] = ()
    app_id: str | None = None
    app_version: int | None = None
    skip_reason: str = ""
    storage_options: Mapping[str, Any] | None = None
    target_file_size: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: domainMetadata to commit: name -> configuration (e.g. ``delta.clustering``).
    domains: dict[str, str] = field(default_factory=dict)
    #: The clustering columns this write sets (new or replaced clustered table).
    cluster_by: tuple[str, ...] | None = None

    @property
    def skipped(self) -> bool:
        return bool(self.skip_reason)


def _storage_of(table: Any, storage_options: Mapping[str, Any] | None) -> Storage:
    from lakequery.table import DeltaTable

    if isinstance(table, DeltaTable):
        return table.storage
    if isinstance(table, str | os.PathLike):
        return open_storage(table, storage_options)
    raise TypeError(f"write to a URI string, a path or a DeltaTable, not {type(table).__name__}")


def plan_write(
    table: Any,
    schema: pa.Schema,
    *,
    mode: WriteMode = "error",
    partition_by: Sequence[str] | str | None = None,
    predicate: str | None = None,
    schema_mode: SchemaMode | None = None,
    configuration: Mapping[str, str] | None = None,
    target_file_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    app_id: str | None = None,
    app_version: int | None = None,
    name: str | None = None,
    description: str | None = None,
    identity: Mapping[str, Identity] | None = None,
    cluster_by: Sequence[str] | None = None,
) -> WritePlan:
    """Step 1 of a write: decide everything on the driver (see the module docstring).

    Raises:
        TableAlreadyExistsError: ``mode="error"`` and the table exists.
        SchemaMismatchError: the data does not fit the table schema.
        ClusteringError: ``cluster_by`` cannot be honoured (:mod:`lakequery.clustering`).
        SchemaError, ValueError: invalid options.
    """
    if mode not in _MODE_NAMES:
        raise ValueError(f"mode must be one of {sorted(_MODE_NAMES)}, not {mode!r}")
    if schema_mode not in (None, "merge", "overwrite"):
        raise ValueError(f"schema_mode must be None, 'merge' or 'overwrite', not {schema_mode!r}")
    if schema_mode == "overwrite" and mode != "overwrite":
        raise ValueError("schema_mode='overwrite' needs mode='overwrite'")
    if predicate is not None and mode != "overwrite":
        raise ValueError("predicate is only for mode='overwrite' (replace the matching rows)")
    if (app_id is None) != (app_version is None):
        raise ValueError("pass app_id and app_version together")
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    storage = _storage_of(table, storage_options)
    if storage_options is None:
        storage_options = storage.options
    snapshot = latest_or_none(storage)
    plan = WritePlan(
        storage,
        snapshot,
        mode,
        None,
        predicate=predicate,
        app_id=app_id,
        app_version=app_version,
        storage_options=storage_options,
        target_file_size=target_file_size,
    )
    stored, pseudo = split_configuration(configuration)
    if snapshot is not None and mode == "error":  # before the other options are checked
        raise TableAlreadyExistsError(storage.root, "use mode='append' or 'overwrite'")
    if snapshot is not None and mode == "ignore":
        plan.skip_reason = f"a table exists at {storage.root!r} (mode='ignore')"
        return plan
    if identity and snapshot is not None and schema_mode != "overwrite":
        raise ValueError("identity= declares the identity columns of a new table")
    plan.extra["identity"] = dict(identity or {})
    replacing = snapshot is not None and schema_mode == "overwrite"
    clustering = requested_clustering(snapshot, cluster_by, partition_by, replacing=replacing)
    pseudo.update(clustering_pseudo_properties(snapshot, clustering))
    if clustering:
        partition_by = []  # clustered tables are never partitioned
    if snapshot is None:
        plan = _plan_create(plan, schema, partition_by, stored, pseudo, name, description)
        return with_generation(apply_clustering(plan, clustering), schema)
    done = _committed_app_version(plan, snapshot)
    if done is not None:
        plan.skip_reason = f"appId {app_id!r} already committed version {done} >= {app_version}"
        return plan
    if schema_mode == "overwrite":
        if predicate is not None:
            # the kept rows' files hold the old schema (and physical names): the new one
            # would be wrong for them (Delta Spark ignores overwriteSchema beside replaceWhere)
            raise ValueError(
                "schema_mode='overwrite' replaces the whole table and its schema; an "
                "overwrite with predicate= keeps the other rows: leave one of them out "
                "(schema_mode='merge' adds columns to a predicate overwrite)"
            )
        plan = _plan_replace(plan, schema, partition_by, stored, pseudo, name, description)
        return with_generation(apply_clustering(plan, clustering), schema)
    meta = snapshot.metadata
    if partition_by is not None and [c.lower() for c in partition_by] != [
        c.lower() for c in meta.partition_columns
    ]:
        raise SchemaError(
            f"partition_by {list(partition_by)} differs from the table's "
            f"{list(meta.partition_columns)} (use schema_mode='overwrite' to change it)"
        )
    result = reconcile(meta.schema, schema, merge=schema_mode == "merge")
    config = {**meta.configuration, **stored}
    check_row_tracking_enablement(snapshot, config)
    config = with_row_tracking_columns(config)
    new_schema = result.schema
    if result.changed and snapshot.column_mapping_mode != "none":
        new_schema = assign_column_ids(new_schema, config)
    if result.widened:
        config["delta.enableTypeWidening"] = "true"
    if result.changed or config != dict(meta.configuration):
        from lakequery.clustering.domain import clustering_stats_problem

        problem = clustering_stats_problem(snapshot, new_schema, config)
        if problem:  # the statistics settings or a merged schema's column order
            raise ClusteringError(problem)
        plan.metadata = replace(
            meta,
            schema_string=schema_to_json(new_schema),
            configuration=config,
            name=name if name is not None else meta.name,
            description=description if description is not None else meta.description,
        )
        needed = table_features_in_use(new_schema, {**config, **pseudo})
        plan.protocol = upgraded_protocol(snapshot.protocol, needed)
    plan.state = WriteState.for_table(
        storage.root,
        plan.metadata or meta,
        plan.protocol or snapshot.protocol,
        storage_options=storage_options,
        target_file_size=target_file_size,
    )
    return with_generation(_with_predicate_constraint(plan), schema)


def _plan_create(
    plan: WritePlan,
    schema: pa.Schema,
    partition_by: Sequence[str] | None,
    stored: dict[str, str],
    pseudo: dict[str, str],
    name: str | None,
    description: str | None,
) -> WritePlan:
    # one definition of a new table's metadata and protocol (lakequery.writer.new_table)
    plan.metadata, plan.protocol = new_table(
        declared_schema(schema, plan.extra.get("identity"), partition_by),
        partition_by or (),
        {**stored, **pseudo},
        name=name,
        description=description,
    )
    parts = plan.metadata.partition_columns
    plan.partition_by = parts
    plan.state = WriteState.for_table(
        plan.storage.root,
        plan.metadata,
        plan.protocol,
        storage_options=plan.storage_options,
        target_file_size=plan.target_file_size,
    )
    return plan


def _plan_replace(
    plan: WritePlan,
    schema: pa.Schema,
    partition_by: Sequence[str] | None,
    stored: dict[str, str],
    pseudo: dict[str, str],
    name: str | None,
    description: str | None,
) -> WritePlan:
    """``schema_mode="overwrite"``: new schema and partitioning, same table id."""
    assert plan.snapshot is not None
    old = plan.snapshot.metadata
    delta_schema = declared_schema(schema, plan.extra.get("identity"), partition_by)
    if partition_by is None:  # keep the old partitioning when the columns still exist
        names = {n.lower() for n in delta_schema.names}
        partition_by = [c for c in old.partition_columns if c.lower() in names]
    parts = check_partition_columns(delta_schema, partition_by)
    config = {**old.configuration, **stored}
    fresh = new_table_metadata(delta_schema, parts, config, name=name, description=description)
    plan.metadata = replace(fresh, id=old.id, created_time=old.created_time)
    needed = table_features_in_use(plan.metadata.schema, {**config, **pseudo})
    plan.protocol = upgraded_protocol(plan.snapshot.protocol, needed)
    plan.partition_by = parts
    plan.state = WriteState.for_table(
        plan.storage.root,
        plan.metadata,
        plan.protocol or plan.snapshot.protocol,
        storage_options=plan.storage_options,
        target_file_size=plan.target_file_size,
    )
    return _with_predicate_constraint(plan)


def _with_predicate_constraint(plan: WritePlan) -> WritePlan:
    """Overwrite with a predicate: every written row must match it (like replaceWhere).

    The rule is the predicate as lakequery's predicate language binds it to the written
    schema and renders it for DuckDB, the semantics that also prune the files it replaces
    and pick the rows of those files to keep (:func:`_removes_for_overwrite`): literals
    typed as their columns (a naive timestamp is UTC, ``0.1`` against a FLOAT column is
    the float ``0.1``), whatever the process's time zone."""
    if plan.predicate is not None and plan.state is not None:
        from lakequery.protocol.predicates import bind, parse_predicate, to_duckdb_sql

        meta = plan.metadata or (plan.snapshot.metadata if plan.snapshot else None)
        assert meta is not None
        sql = to_duckdb_sql(bind(parse_predicate(plan.predicate), meta.arrow_schema))
        extra = (*plan.state.extra_constraints, ("predicate", plan.predicate, sql))
        plan.state = replace(plan.state, extra_constraints=extra)
    return plan


# -- commit -------------------------------------------------------------------------------------


def _removes_for_overwrite(
    plan: WritePlan, txn: Transaction, new_files: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(remove actions, add actions of rewritten rows, cdc actions) for an overwrite that
    writes ``new_files``."""
    snapshot = plan.snapshot
    assert snapshot is not None
    now = int(time.time() * 1000)
    if plan.predicate is None:
        txn.read_whole_table()
        files = snapshot.files()
        return remove_actions(snapshot, files, now), [], []
    txn.read_predicate(plan.predicate)
    scan = snapshot.scan(filter=plan.predicate)
    candidates = scan.plan().files
    txn.read_files(str(p) for p in candidates.column("path").to_pylist())
    if not candidates.num_rows:
        return [], [], []
    part = partition_part(plan.predicate, snapshot.partition_columns)
    exact = part is not None and only_partition_columns(plan.predicate, snapshot)
    if exact:
        files = candidates.filter(partition_match(candidates, plan.predicate))
        return remove_actions(snapshot, files, now), [], []
    # Rows of the candidate files that do not match stay: copy them into new files. The
    # predicate as the scan bound it (see _with_predicate_constraint), not its raw text,
    # which DuckDB would read with its own literal types and the process's time zone.
    from lakequery.duckdb_databases import engine_cursor
    from lakequery.protocol.predicates import to_duckdb_sql
    from lakequery.row_tracking.rewrite import preserving_scan, preserving_state

    assert scan.filter is not None
    keep_sql = f"NOT coalesce(({to_duckdb_sql(scan.filter)}), false)"
    con = engine_cursor(utc=True)
    # An unfiltered scan of the candidate files: the filtered ``scan`` would drop exactly
    # the rows that must be kept. Kept rows keep their row ids, as in a copy-on-write DML.
    whole = preserving_scan(snapshot, snapshot.scan().restricted_to(candidates))
    reader = relation_reader(whole.to_duckdb(con).filter(keep_sql), snapshot.table_uri)
    assert plan.state is not None
    rewrite_state = replace(plan.state, extra_constraints=(), identity=())
    kept = write_data_files(reader, preserving_state(snapshot, rewrite_state))
    cdc: list[dict[str, Any]] = []
    if TableProperties((plan.metadata or snapshot.metadata).configuration).change_data_feed:
        # The copied rows did not change, yet the commit removes and adds them: its change
        # data files name what did (digest §13), the rows replaced and the new ones.
        cdc = _overwrite_change_data(plan, con, candidates, keep_sql, new_files, rewrite_state)
    con.close()
    return remove_actions(snapshot, candidates, now), kept, cdc


def _overwrite_change_data(
    plan: WritePlan,
    con: Any,
    candidates: pa.Table,
    keep_sql: str,
    new_files: Sequence[Mapping[str, Any]],
    state: WriteState,
) -> list[dict[str, Any]]:
    """Change data files of an overwrite that copied rows: the candidate files' rows the
    predicate replaced as deletes, the rows of ``new_files`` as inserts."""
    from lakequery.cdf import staged_scan
    from lakequery.duckdb_databases import create_temp_view

    snapshot = plan.snapshot
    assert snapshot is not None
    old = snapshot.scan().restricted_to(candidates).to_duckdb(con).filter(f"NOT ({keep_sql})")
    create_temp_view(con, "__lq_overwrite_deleted", old)
    parts = [f"SELECT *, 'delete' AS {CHANGE_TYPE_COLUMN} FROM __lq_overwrite_deleted"]
    if new_files:
        metadata = plan.metadata or snapshot.metadata
        protocol = plan.protocol or snapshot.protocol
        new = staged_scan(plan.storage, snapshot.version + 1, metadata, protocol, new_files)
        create_temp_view(con, "__lq_overwrite_inserted", new.to_duckdb(con))
        parts.append(f"SELECT *, 'insert' AS {CHANGE_TYPE_COLUMN} FROM __lq_overwrite_inserted")
    changes = relation_reader(con.sql(" UNION ALL BY NAME ".join(parts)), snapshot.table_uri)
    return write_data_files(changes, replace(state, change_data=True, materialized_columns=()))


def commit_write(
    plan: WritePlan,
    adds: Iterable[Mapping[str, Any]],
    *,
    max_attempts: int | None = None,
) -> WriteResult:
    """Step 3 of a write: commit the data files written for ``plan`` as ONE transaction.

    Raises:
        CommitConflictError: a concurrent commit conflicts (a subclass names the kind).
        TableAlreadyExistsError: the table was created concurrently and differs.
    """
    staged = [dict(a) for a in adds]
    if plan.skipped:
        version = plan.snapshot.version if plan.snapshot else -1
        log.info("write skipped: %s", plan.skip_reason)
        return WriteResult(version, plan.mode, skipped=True, message=plan.skip_reason)
    creating = plan.snapshot is None
    if plan.snapshot is not None:  # rebased onto a newer snapshot (identity values)
        _refuse_committed_app(plan, plan.snapshot, plan.snapshot.version)
    txn = Transaction(
        plan.storage,
        plan.snapshot,
        operation="CREATE TABLE" if creating and plan.mode != "overwrite" else "WRITE",
        parameters=_parameters(plan),
    )
    if not stage_high_water_marks(txn, plan, staged) and plan.metadata is not None:
        txn.set_metadata(plan.metadata)
    if plan.protocol is not None:
        txn.set_protocol(plan.protocol)
    for domain, configuration in plan.domains.items():
        txn.set_domain(domain, configuration)
    removes: list[dict[str, Any]] = []
    if plan.mode == "overwrite" and not creating:
        assert plan.snapshot is not None
        if TableProperties(plan.snapshot.metadata.configuration).append_only:
            # as Spark: an overwrite is refused whatever it would remove
            raise AppendOnlyError(plan.storage.root, "WRITE (mode='overwrite')")
        removes, kept, cdc = _removes_for_overwrite(plan, txn, staged)
        staged += kept
        txn.add_cdc_files(cdc)
    if plan.app_id is not None and plan.app_version is not None:
        txn.read_app_id(plan.app_id)
        txn.set_app_transaction(plan.app_id, plan.app_version)
    txn.add_files(staged)
    txn.remove_files(removes)
    rows = total_records(staged)
    size = sum(int(a.get("size") or 0) for a in staged)
    txn.metrics = {
        "numFiles": len(staged),
        "numOutputRows": rows,
        "numOutputBytes": size,
        "numRemovedFiles": len(removes),
        "numRemovedBytes": sum(int(r.get("size") or 0) for r in removes),
    }
    try:
        result = txn.commit(**({"max_attempts": max_attempts} if max_attempts else {}))
    except TableAlreadyExistsError:
        if plan.mode != "append":
            raise
        result = _commit_as_append(plan, staged)
    return WriteResult(
        result.version,
        plan.mode,
        num_files=len(staged),
        num_rows=rows,
        num_bytes=size,
        num_removed_files=len(removes),
        attempts=result.attempts,
    )


def _committed_app_version(plan: WritePlan, snapshot: Snapshot) -> int | None:
    """The version ``snapshot`` records for the write's ``app_id`` when it is at least the
    write's ``app_version`` (the write is done already), else None."""
    if plan.app_id is None or plan.app_version is None:
        return None
    done = snapshot.txns.get(plan.app_id)
    return done if done is not None and done >= plan.app_version else None


def _refuse_committed_app(plan: WritePlan, snapshot: Snapshot, read_version: int) -> None:
    """Raises :class:`ConcurrentTransactionError` when ``snapshot`` (newer than the one
    the write planned on: a rebase, or a table created concurrently) already holds this
    write's ``(app_id, app_version)``: the concurrent writer did this write."""
    done = _committed_app_version(plan, snapshot)
    if done is not None:
        raise ConcurrentTransactionError(
            plan.storage.root,
            read_version,
            snapshot.version,
            f"it committed a txn for appId {plan.app_id!r} at version "
            f"{done} (>= {plan.app_version})",
        )


def _commit_as_append(plan: WritePlan, adds: list[dict[str, Any]]) -> CommitResult:
    """Another writer created the table first: append instead when it is the same table
    shape (same schema and partitioning), else give up."""
    snapshot = latest_or_none(plan.storage)
    assert plan.metadata is not None and snapshot is not None
    if plan.state is not None and plan.state.identity:  # our values started from scratch
        raise TableAlreadyExistsError(
            plan.storage.root,
            "created concurrently; identity values were generated for a new table",
        )
    _refuse_committed_app(plan, snapshot, -1)
    ours, theirs = plan.metadata, snapshot.metadata
    uses_mapping = any(PHYSICAL_NAME_KEY in f.metadata for f in theirs.schema.fields)
    if (
        theirs.schema_string != ours.schema_string
        or tuple(theirs.partition_columns) != tuple(ours.partition_columns)
        or uses_mapping
    ):
        raise TableAlreadyExistsError(
            plan.storage.root, "created concurrently with a different schema or partitioning"
        )
    if dict(theirs.configuration) != dict(ours.configuration):
        # its constraints, generated columns or features were never applied to our rows
        raise TableAlreadyExistsError(
            plan.storage.root, "created concurrently with different table properties"
        )
    txn = Transaction(plan.storage, snapshot, operation="WRITE", parameters=_parameters(plan))
    if plan.app_id is not None and plan.app_version is not None:
        txn.read_app_id(plan.app_id)
        txn.set_app_transaction(plan.app_id, plan.app_version)
    txn.add_files(adds)
    return txn.commit()


def _parameters(plan: WritePlan) -> dict[str, Any]:
    params: dict[str, Any] = {"mode": _MODE_NAMES[plan.mode]}
    parts = plan.metadata.partition_columns if plan.metadata else None
    if parts is None and plan.snapshot is not None:
        parts = plan.snapshot.metadata.partition_columns
    params["partitionBy"] = list(parts or ())
    if plan.predicate is not None:
        params["predicate"] = plan.predicate
    if plan.cluster_by is not None:
        params["clusterBy"] = json.dumps(list(plan.cluster_by), separators=(",", ":"))
    return params


def write(
    table: Any,
    data: Any,
    *,
    mode: WriteMode = "error",
    partition_by: Sequence[str] | str | None = None,
    predicate: str | None = None,
    schema_mode: SchemaMode | None = None,
    configuration: Mapping[str, str] | None = None,
    target_file_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    app_id: str | None = None,
    app_version: int | None = None,
    name: str | None = None,
    description: str | None = None,
    identity: Mapping[str, Identity] | None = None,
    progress: ProgressCallback | None = None,
    cluster_by: Sequence[str] | None = None,
) -> WriteResult:
    """Writes data to a Delta table, creating it when missing.

    Args:
        table: a table URI (local path, ``file://``, ``s3://``, ``memory://``) or a
            :class:`~lakequery.DeltaTable`.
        data: a ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader``, an iterable
            of record batches, a Polars or pandas DataFrame, a DuckDB relation, or any
            object with ``__arrow_c_stream__``. Streamed: not all held in memory.
        mode: ``"error"`` (default: fail if the table exists), ``"append"``,
            ``"overwrite"`` (replace all rows, or those matching ``predicate``) or
            ``"ignore"`` (do nothing if the table exists).
        partition_by: partition columns of a new table (must match an existing table's).
        predicate: with ``mode="overwrite"``, a filter in the language of
            ``Snapshot.scan(filter=...)``: only matching rows are replaced, and every
            written row must match it (the same semantics for both, whatever the
            process's time zone).
        schema_mode: ``"merge"`` adds new columns and widens types; ``"overwrite"`` (with
            ``mode="overwrite"``) replaces the schema and partitioning.
        configuration: table properties (``delta.*`` and user keys) for a new table, or
            added to an existing one.
        target_file_size: bytes per data file (default ``delta.targetFileSize``, else
            128 MiB).
        storage_options: s3fs options for ``s3://`` tables.
        app_id: application id for an idempotent write (with ``app_version``): a write
            whose ``(app_id, app_version)`` is already committed is skipped.
        app_version: the application's progress marker for this write.
        name: table name stored in the metadata (new tables).
        description: table description stored in the metadata.
        identity: identity columns of a new table, column name ->
            :class:`~lakequery.Identity` (``GENERATED ALWAYS`` or ``BY DEFAULT AS
            IDENTITY``); columns the data lacks are added in front as ``long``. Writes
            generate the values of identity columns missing from their data (see
            :mod:`lakequery.writer.identity`).
        progress: a callback receiving :class:`~lakequery.commands.progress.Progress`
            (rows and bytes written so far) after every batch; without one, a bar is
            drawn on a terminal or in Jupyter when the write takes a while.
        cluster_by: liquid clustering columns of a new table (instead of
            ``partition_by``; see :mod:`lakequery.clustering`); on an existing table it must
            equal the table's clustering columns.

    Returns:
        A :class:`WriteResult` (``.version``, counts, ``.skipped``/``.message``).

    Raises:
        TableAlreadyExistsError: ``mode="error"`` and the table exists.
        SchemaMismatchError: the data does not fit the table's schema.
        ConstraintViolationError: a row breaks a CHECK constraint, an invariant, a
            generated column or the overwrite predicate.
        AppendOnlyError: overwrite of a ``delta.appendOnly`` table.
        CommitConflictError: a concurrent commit conflicts (a subclass names the kind).
        IdentityColumnError: the data holds a ``GENERATED ALWAYS`` identity column.

    Example:
        >>> import pyarrow as pa, lakequery as lq
        >>> r = lq.write("memory://write-fn-doc", pa.table({"x": [1, 2, 3]}))
        >>> r.version, r.num_rows
        (0, 3)
        >>> lq.write("memory://write-fn-doc", pa.table({"x": [4]}), mode="append",
        ...          app_id="job", app_version=7).version
        1
        >>> lq.write("memory://write-fn-doc", pa.table({"x": [4]}), mode="append",
        ...          app_id="job", app_version=7).skipped
        True
    """
    reader = to_reader(data)
    plan = plan_write(
        table,
        reader.schema,
        mode=mode,
        partition_by=partition_by,
        predicate=predicate,
        schema_mode=schema_mode,
        configuration=configuration,
        target_file_size=target_file_size,
        storage_options=storage_options,
        app_id=app_id,
        app_version=app_version,
        name=name,
        description=description,
        identity=identity,
        cluster_by=cluster_by,
    )
    if plan.skipped or plan.state is None:
        return commit_write(plan, [])
    with ProgressReporter("WRITE", 0, 0, callback=progress, unit="rows") as reporter:
        adds = write_data_files(counted(reader, reporter), plan.state)
    try:
        return commit_rebasing_identity(plan, adds, commit_write)
    except LakeQueryError:
        log.info("commit failed; %d data files written for it are orphans", len(adds))
        raise
