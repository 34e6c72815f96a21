"""Change data feed rules that need no I/O (digest §13): whether a version records its
changes, and which metadata changes the feed cannot be read across.

Example:
    >>> from lakequery.metadata import Metadata
    >>> from lakequery.protocol.features import Protocol
    >>> schema = '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}'
    >>> md = Metadata("id", schema, (), {"delta.enableChangeDataFeed": "true"})
    >>> cdf_enabled(md, Protocol(1, 4)), cdf_enabled(md, Protocol(1, 2))
    (True, False)
"""

from __future__ import annotations

from lakequery.metadata import Metadata
from lakequery.protocol.column_mapping import ColumnMappingMode, column_mapping_mode, physical_name
from lakequery.protocol.features import Protocol
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.schema import ArrayType, DeltaType, MapType, StructType


def cdf_enabled(metadata: Metadata, protocol: Protocol) -> bool:
    """Whether a version with this metadata and protocol records its changes (digest §13):
    ``delta.enableChangeDataFeed`` (or its legacy alias) is true and the protocol has the
    ``changeDataFeed`` writer feature (writer version 4 to 6 imply it)."""
    on = TableProperties(metadata.configuration).change_data_feed
    return on and protocol.supports("changeDataFeed")


#: The columns a change feed adds to the table's (``lakequery.cdf.CHANGE_COLUMNS``).
CHANGE_FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def change_feed_column_clashes(metadata: Metadata, protocol: Protocol) -> list[str]:
    """Top-level columns named like the change feed's own (case-insensitively) on a table
    that records its changes: Delta refuses such a schema (the feed's rows could not hold
    both), and lakequery's DML would fail on it."""
    if not cdf_enabled(metadata, protocol):
        return []
    reserved = set(CHANGE_FEED_COLUMNS)
    return [f.name for f in metadata.schema.fields if f.name.lower() in reserved]


def column_mapping_of(metadata: Metadata, protocol: Protocol) -> ColumnMappingMode:
    """The column mapping mode in force with this metadata and protocol."""
    return column_mapping_mode(metadata.configuration, protocol.supports("columnMapping"))


def _type_change(old: DeltaType, new: DeltaType, mo: str, mn: str, where: str) -> str | None:
    """Why ``old`` -> ``new`` is not additive (None when it is: same types, new struct
    fields only, same physical names)."""
    if isinstance(old, StructType) and isinstance(new, StructType):
        for f in old.fields:
            g = new.get(f.name)
            if g is None:
                return f"column {where}{f.name} was dropped or renamed"
            if physical_name(f, mo) != physical_name(g, mn):
                return f"column {where}{f.name} now reads a different physical column"
            why = _type_change(f.type, g.type, mo, mn, f"{where}{f.name}.")
            if why:
                return why
        return None
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return _type_change(old.element, new.element, mo, mn, where)
    if isinstance(old, MapType) and isinstance(new, MapType):
        return _type_change(old.key, new.key, mo, mn, where) or _type_change(
            old.value, new.value, mo, mn, where
        )
    if type(old) is not type(new) or old != new:
        return f"column {where.rstrip('.')} changed type"
    return None


def non_additive_change(
    old: Metadata, old_protocol: Protocol, new: Metadata, new_protocol: Protocol
) -> str | None:
    """Why a metadata change cannot be read across by the change feed (a column dropped,
    renamed or retyped, or different partition columns), or None for additive changes."""
    if tuple(old.partition_columns) != tuple(new.partition_columns):
        return "the partition columns changed"
    return _type_change(
        old.schema,
        new.schema,
        column_mapping_of(old, old_protocol),
        column_mapping_of(new, new_protocol),
        "",
    )
