"""``DeltaTable.create``: a new, empty Delta table in one commit (``protocol`` + ``metaData``).

The metadata and protocol come from :func:`lakequery.writer.new_table.new_table`, the same
function ``lq.write`` uses when it creates a table, so both agree: deletion vectors are on
unless ``configuration`` says otherwise, ``delta.feature.<name>=supported`` and
``delta.minReaderVersion``/``delta.minWriterVersion`` shape the protocol without being
stored, and the protocol is the smallest that supports what the schema and configuration
use (legacy versions where they suffice).

Modes (decision recorded in ARCHITECTURE.md, "Table management"): ``"error"`` (default,
like ``CREATE TABLE``), ``"ignore"`` (``CREATE TABLE IF NOT EXISTS``: an existing table is
left as it is, whatever its schema) and ``"overwrite"`` (``CREATE OR REPLACE TABLE``: one
commit that removes every live file and replaces schema, partitioning, properties, name and
description; the table id and creation time stay, the protocol is only ever upgraded). An
append-only table is never replaced (:class:`~lakequery.AppendOnlyError`), and a replace
cannot itself set ``delta.appendOnly=true`` (the commit's append-only check sees the new
properties): set it with a later commit.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> dt = lq.DeltaTable.create("memory://create-doc", pa.schema([("id", pa.int64()),
    ...     ("day", pa.string())]), partition_by=["day"],
    ...     configuration={"delta.enableChangeDataFeed": "true"})
    >>> snap = dt.snapshot()
    >>> snap.version, snap.num_files, snap.partition_columns
    (0, 0, ['day'])
    >>> snap.protocol.writer_features
    ('changeDataFeed', 'deletionVectors')
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from lakequery.errors import AppendOnlyError, ClusteringError, TableAlreadyExistsError
from lakequery.protocol.column_mapping import MAX_ID_KEY
from lakequery.protocol.features import table_features_in_use, upgraded_protocol
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.schema import StructType, from_arrow_schema
from lakequery.snapshot import Snapshot, latest_or_none
from lakequery.txn import Transaction
from lakequery.writer.identity import Identity, identity_schema
from lakequery.writer.new_table import new_table, split_configuration

if TYPE_CHECKING:
    from lakequery.metadata import Metadata
    from lakequery.storage import TableLocation
    from lakequery.table import DeltaTable

CreateMode = Literal["error", "ignore", "overwrite"]
_OPERATIONS = {
    "error": "CREATE TABLE",
    "ignore": "CREATE TABLE",
    "overwrite": "CREATE OR REPLACE TABLE",
}


def delta_schema(schema: Any) -> StructType:
    """A Delta :class:`StructType` from a ``pyarrow.Schema``, a ``StructType`` or any
    object exporting an Arrow schema (``__arrow_c_schema__``: Polars, nanoarrow...)."""
    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, pa.Schema):
        return from_arrow_schema(schema)
    if hasattr(schema, "__arrow_c_schema__"):
        return from_arrow_schema(pa.schema(schema))
    raise TypeError(
        f"schema must be a pyarrow.Schema or a lakequery StructType, not {type(schema).__name__}"
    )


def _parameters(metadata: Metadata) -> dict[str, Any]:
    """``commitInfo.operationParameters`` as Spark's CREATE TABLE writes them."""
    return {
        "partitionBy": json.dumps(list(metadata.partition_columns)),
        "description": metadata.description,
        "isManaged": "false",
        "properties": json.dumps(dict(metadata.configuration)),
    }


#: Where in-commit timestamps were turned on (digest §14): versions before it are read by
#: their files' times.
_ICT_ENABLEMENT = (
    "delta.inCommitTimestampEnablementVersion",
    "delta.inCommitTimestampEnablementTimestamp",
)


def _with_ict_enablement(new: Metadata, old: Metadata) -> Metadata:
    """``new`` (a replacing table's metadata) with ``old``'s in-commit timestamp
    enablement, when both have them on: the versions before it still have none."""
    if not (
        TableProperties(old.configuration).in_commit_timestamps
        and TableProperties(new.configuration).in_commit_timestamps
    ):
        return new
    config = dict(new.configuration)
    for key in _ICT_ENABLEMENT:
        if key in old.configuration:
            config.setdefault(key, old.configuration[key])
    return replace(new, configuration=config)


def create_table(
    uri: TableLocation,
    schema: Any,
    *,
    partition_by: Sequence[str] | str | None = None,
    configuration: Mapping[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
    mode: CreateMode = "error",
    storage_options: Mapping[str, Any] | None = None,
    identity: Mapping[str, Identity] | None = None,
    cluster_by: Sequence[str] | None = None,
) -> DeltaTable:
    """Creates an empty Delta table (see :meth:`lakequery.DeltaTable.create`)."""
    from lakequery.table import DeltaTable

    if mode not in _OPERATIONS:
        raise ValueError(f"mode must be one of {sorted(_OPERATIONS)}, not {mode!r}")
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    table = DeltaTable(uri, storage_options=storage_options)
    storage = table.storage
    fields = delta_schema(schema)
    if identity:
        fields = identity_schema(fields, identity, partition_by=partition_by or ())
    existing = latest_or_none(storage)
    config = dict(configuration or {})
    if existing is not None and MAX_ID_KEY in existing.metadata.configuration:
        # CREATE OR REPLACE: column ids only grow (digest: maxColumnId)
        config.setdefault(MAX_ID_KEY, existing.metadata.configuration[MAX_ID_KEY])
    metadata, protocol = new_table(
        fields, partition_by or (), config, name=name, description=description
    )
    clustering = None
    if cluster_by:  # liquid clustering: two more features and the delta.clustering domain
        from lakequery.clustering.create import clustering_for_new_table
        from lakequery.clustering.domain import CLUSTERING_DOMAIN, clustering_domain_name

        # CREATE OR REPLACE of a clustered table keeps its domain (a preview table's
        # delta.liquid), as the writer's replace and alter.cluster_by do
        domain = CLUSTERING_DOMAIN
        if existing is not None:
            domain = clustering_domain_name(existing.protocol, existing.domains) or domain
        clustering = clustering_for_new_table(metadata, list(cluster_by), domain=domain)
        protocol = upgraded_protocol(protocol, set(clustering.features)) or protocol
    if existing is not None:
        if mode == "ignore":
            return table
        if mode == "error":
            raise TableAlreadyExistsError(
                storage.root, "use mode='ignore' (IF NOT EXISTS) or 'overwrite' (OR REPLACE)"
            )
    parameters = _parameters(metadata)
    if clustering is not None:
        parameters["clusterBy"] = clustering.operation_parameter
    txn = Transaction(storage, existing, operation=_OPERATIONS[mode], parameters=parameters)
    if clustering is not None:
        txn.set_domain(clustering.domain, clustering.configuration)
    if existing is None:
        txn.set_protocol(protocol)
        txn.set_metadata(metadata)
    else:  # CREATE OR REPLACE: same table id, every live file removed
        _, pseudo = split_configuration(configuration)
        old = existing.metadata
        if TableProperties(old.configuration).append_only:
            raise AppendOnlyError(storage.root, _OPERATIONS[mode])
        if clustering is None:
            _unclustered(existing, txn, partition_by or ())
        kept = replace(metadata, id=old.id, created_time=old.created_time)
        txn.set_metadata(_with_ict_enablement(kept, old))
        needed = table_features_in_use(metadata.schema, {**metadata.configuration, **pseudo})
        if clustering is not None:
            needed |= set(clustering.features)
        upgraded = upgraded_protocol(existing.protocol, needed)
        if upgraded is not None:
            txn.set_protocol(upgraded)
        from lakequery.commands.file_actions import remove_actions

        txn.read_whole_table()
        txn.remove_files(remove_actions(existing, existing.files(), int(time.time() * 1000)))
    try:
        txn.commit()
    except TableAlreadyExistsError:
        if mode != "ignore":
            raise  # created concurrently
    return table


def _unclustered(existing: Snapshot, txn: Transaction, partition_by: Sequence[str]) -> None:
    """CREATE OR REPLACE of a clustered table without ``cluster_by``: the new table has
    no clustering columns (the domain says so), as in Delta; partitioned, it is refused
    (a table is clustered or partitioned, digest §14)."""
    from lakequery.clustering.domain import (
        clustering_columns,
        clustering_configuration,
        clustering_domain_name,
    )

    columns = clustering_columns(existing)
    if columns is None:  # the protocol does not list clustering
        return
    if partition_by:  # also without clustering columns: the protocol still lists it
        raise ClusteringError(
            f"table {existing.table_uri!r} is clustered: CREATE OR REPLACE cannot make it "
            f"partitioned by {list(partition_by)} (cluster it, or drop and create it)"
        )
    if columns:
        name = clustering_domain_name(existing.protocol, existing.domains)
        assert name is not None
        txn.set_domain(name, clustering_configuration([]))


__all__ = ["CreateMode", "create_table", "delta_schema"]
