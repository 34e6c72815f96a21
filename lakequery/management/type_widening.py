"""CHANGE COLUMN ... TYPE: type widening on an existing table (digest §14, planner, pure).

Only the widenings readers must support are allowed (``byte -> short -> integer ->
long``; ``float -> double``; ``byte/short/integer -> double``; ``date ->
timestamp_ntz``; integers to decimals with enough integer digits; ``decimal(p, s) ->
decimal(p + k1, s + k2)`` with ``k1 >= k2 >= 0``). The commit sets
``delta.enableTypeWidening=true``, adds the ``typeWidening`` reader-writer feature (and
``timestampNtz`` for ``date -> timestamp_ntz``) and records ``{fromType, toType}`` in the
field's ``delta.typeChanges``; no data file is rewritten: readers cast older files up.
A ``void`` column (never stored in data files) takes any type as a plain schema change:
no feature, no ``delta.typeChanges`` entry (digest §8.3).

Decision: partition columns are not widened (their values live in the log as strings,
and not every reader re-parses them with a new type); nested struct fields are.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> from lakequery.management.change import commit_change
    >>> uri = "memory://widening-doc"
    >>> _ = lq.write(uri, pa.table({"n": pa.array([1], pa.int32())}))
    >>> dt = lq.DeltaTable(uri)
    >>> commit_change(dt, lambda s: plan_change_column_type(s, "n", "long")).features_added
    ('typeWidening',)
    >>> dt.snapshot().schema.field("n").type
    DataType(int64)
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pyarrow as pa

from lakequery.errors import AlterTableError, SchemaError
from lakequery.management.change import AlterChange
from lakequery.management.columns import (
    ColumnPath,
    edit_field,
    field_at,
    parse_column_path,
    resolve,
)
from lakequery.protocol.features import table_features_in_use, upgraded_protocol
from lakequery.protocol.schema import (
    DeltaType,
    PrimitiveType,
    from_arrow_type,
    is_allowed_widening,
    parse_type,
    schema_to_json,
    type_to_json,
)
from lakequery.snapshot import Snapshot
from lakequery.writer.schema_evolution import is_type_change, widened_field

ENABLE_KEY = "delta.enableTypeWidening"


def as_delta_type(value: Any) -> DeltaType:
    """A Delta type from its name (``"long"``, ``"decimal(12,2)"``), a pyarrow type or
    a Delta type.

    Example:
        >>> as_delta_type("decimal(12,2)")
        DecimalType(name='decimal(12,2)', precision=12, scale=2)
    """
    if isinstance(value, DeltaType):
        return value
    if isinstance(value, pa.DataType):
        return from_arrow_type(value)
    if isinstance(value, str):
        return parse_type(value.strip().lower(), "new type")
    raise TypeError(f"a type name, pyarrow type or Delta type, not {value!r:.80}")


def _name(t: DeltaType) -> str:
    value = type_to_json(t)
    return value if isinstance(value, str) else json.dumps(value)


def plan_change_column_type(snapshot: Snapshot, column: ColumnPath, new_type: Any) -> AlterChange:
    """CHANGE COLUMN ``column`` TYPE ``new_type`` (a widening; see the module doc).

    Raises:
        AlterTableError: no such column, a partition, identity or non-primitive column, or
            a type change that is not an allowed widening.
    """
    op = "CHANGE COLUMN"
    meta = snapshot.metadata
    path = resolve(meta.schema, parse_column_path(column), snapshot, op)
    try:
        target = as_delta_type(new_type)
    except SchemaError as exc:
        raise AlterTableError(snapshot.table_uri, op, str(exc)) from None
    current = field_at(meta.schema, path)
    label = ".".join(path)
    if len(path) == 1 and path[0] in meta.partition_columns:
        raise AlterTableError(
            snapshot.table_uri, op, f"{label!r} is a partition column (not widened)"
        )
    if not isinstance(current.type, PrimitiveType) or not isinstance(target, PrimitiveType):
        raise AlterTableError(
            snapshot.table_uri,
            op,
            f"only primitive columns change type; {label!r} is {_name(current.type)}, "
            f"asked for {_name(target)}",
        )
    if current.type == target:
        raise AlterTableError(snapshot.table_uri, op, f"{label!r} is already {_name(target)}")
    if any(str(k).startswith("delta.identity.") for k in current.metadata):
        raise AlterTableError(  # identity values are longs (and Delta refuses it too)
            snapshot.table_uri, op, f"{label!r} is an identity column: its type stays long"
        )
    if not is_allowed_widening(current.type, target):
        raise AlterTableError(
            snapshot.table_uri,
            op,
            f"{_name(current.type)} -> {_name(target)} of {label!r} is not a type widening "
            "Delta allows (digest §14); rewrite the table to change it",
        )
    schema = edit_field(meta.schema, path, lambda f: widened_field(f, target))
    config = dict(meta.configuration)
    if is_type_change(current.type, target):  # not a void column's first type (§8.3)
        config[ENABLE_KEY] = "true"
    new_meta = replace(meta, schema_string=schema_to_json(schema), configuration=config)
    protocol = upgraded_protocol(snapshot.protocol, table_features_in_use(schema, config))
    params = {
        "column": label,
        "fromType": _name(current.type),
        "toType": _name(target),
    }
    return AlterChange(op, params, new_meta, protocol)
