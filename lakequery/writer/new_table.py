"""What a new table's first commit holds: its ``metaData`` and the smallest ``protocol``.

Shared by ``lq.write`` (creating a table with data), ``DeltaTable.create`` (an empty table)
and ``lq.convert_to_delta`` (a table over existing Parquet files), so that the three agree
on defaults (deletion vectors on), pseudo-properties (``delta.feature.*``,
``delta.minReaderVersion``...) and protocol computation.

Example:
    >>> from lakequery.protocol.schema import from_arrow_schema
    >>> import pyarrow as pa
    >>> meta, proto = new_table(from_arrow_schema(pa.schema([("x", pa.int64())])), (), {})
    >>> meta.configuration["delta.enableDeletionVectors"], proto.writer_features
    ('true', ('deletionVectors',))
    >>> _, proto = new_table(from_arrow_schema(pa.schema([("x", pa.int64())])), (),
    ...                      {"delta.enableDeletionVectors": "false"})
    >>> proto.min_reader_version, proto.min_writer_version
    (1, 1)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence

from lakequery.errors import SchemaError
from lakequery.metadata import Metadata
from lakequery.protocol.column_mapping import without_column_mapping
from lakequery.protocol.features import Protocol, protocol_for, table_features_in_use
from lakequery.protocol.properties import PropertyError, property_value_problem
from lakequery.protocol.row_tracking_enablement import with_row_tracking_columns
from lakequery.protocol.schema import PrimitiveType, StructType, schema_to_json
from lakequery.writer.schema_evolution import assign_column_ids

#: Creation-time pseudo-properties: they shape the protocol and are not stored.
PSEUDO_PREFIXES = ("delta.feature.", "delta.minReaderVersion", "delta.minWriterVersion")
#: Table property that lets DML write deletion vectors; on by default for new tables.
DELETION_VECTORS_KEY = "delta.enableDeletionVectors"


def split_configuration(
    configuration: Mapping[str, str] | None,
) -> tuple[dict[str, str], dict[str, str]]:
    """(stored properties, pseudo-properties), after checking the values of the
    properties lakequery knows, before anything is committed (as ALTER does).

    Raises:
        PropertyError: a value the property cannot take (``delta.checkpointInterval``
            of ``"abc"`` was committed, and then failed every later write).
    """
    stored: dict[str, str] = {}
    pseudo: dict[str, str] = {}
    for key, value in (configuration or {}).items():
        target = pseudo if key.startswith(PSEUDO_PREFIXES) else stored
        target[str(key)] = str(value)
    for key, value in stored.items():
        problem = property_value_problem(key, value)
        if problem:
            raise PropertyError(problem)
    return stored, pseudo


def check_partition_columns(schema: StructType, partition_by: Sequence[str]) -> tuple[str, ...]:
    """The partition columns as the schema spells them; refuses unknown, repeated or
    non-primitive columns and a table of partition columns only."""
    out = []
    for name in partition_by:
        f = next((f for f in schema.fields if f.name.lower() == name.lower()), None)
        if f is None:
            raise SchemaError(f"partition column {name!r} is not in the data ({schema.names})")
        if not isinstance(f.type, PrimitiveType) or f.type.name in ("void", "variant"):
            raise SchemaError(f"column {name!r} of type {f.type} cannot be a partition column")
        out.append(f.name)
    if len(set(out)) != len(out):
        raise SchemaError(f"partition columns repeat: {list(partition_by)}")
    if schema.fields and len(out) == len(schema.fields):
        raise SchemaError("a table needs at least one column that is not a partition column")
    return tuple(out)


def new_table_metadata(
    schema: StructType,
    partition_by: tuple[str, ...],
    configuration: Mapping[str, str],
    *,
    name: str | None = None,
    description: str | None = None,
) -> Metadata:
    """A fresh ``metaData`` action (new id, creation time, column mapping ids assigned
    above the ``maxColumnId`` of ``configuration``: a replaced table's ids only grow)."""
    config = with_row_tracking_columns(dict(configuration))
    mode = (config.get("delta.columnMapping.mode") or "none").lower()
    # ids and physical names the given schema brings (another table's) are not kept
    schema = without_column_mapping(schema)
    if mode != "none":
        schema = assign_column_ids(schema, config)
    return Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema_to_json(schema),
        partition_columns=partition_by,
        configuration=config,
        name=name,
        description=description,
        created_time=int(time.time() * 1000),
    )


def new_table(
    schema: StructType,
    partition_by: Sequence[str],
    configuration: Mapping[str, str] | None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> tuple[Metadata, Protocol]:
    """The metadata and the smallest protocol of a new table.

    ``configuration`` may hold pseudo-properties (``delta.feature.<name>=supported``,
    ``delta.minReaderVersion``...): they shape the protocol and are not stored. Deletion
    vectors are on unless the configuration sets ``delta.enableDeletionVectors``
    (documented default of tables lakequery creates).
    """
    stored, pseudo = split_configuration(configuration)
    parts = check_partition_columns(schema, partition_by)
    # DELETE/UPDATE/MERGE mark rows in deletion vectors instead of rewriting files; new
    # tables opt in unless the configuration says otherwise (documented default).
    stored = {DELETION_VECTORS_KEY: "true", **stored}
    metadata = new_table_metadata(schema, parts, stored, name=name, description=description)
    protocol = protocol_for(table_features_in_use(metadata.schema, {**stored, **pseudo}))
    return metadata, protocol


__all__ = [
    "DELETION_VECTORS_KEY",
    "check_partition_columns",
    "new_table",
    "new_table_metadata",
    "split_configuration",
]
