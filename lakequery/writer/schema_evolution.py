"""Schema enforcement and evolution for writes (pure).

:func:`reconcile` compares the Arrow schema of incoming data with the table's Delta
schema. Under enforcement (the default) every data column must exist in the table with
the same type or one that casts to it without loss (``int32`` data into a ``long``
column); anything else raises :class:`~lakequery.errors.SchemaMismatchError` naming the
column and both types. With ``merge``, new columns are appended (nullable, also inside
structs) and a column whose table type is narrower than the data's is widened when the
change is an allowed type widening (digest §14), recorded in ``delta.typeChanges``.

:func:`assign_column_mapping` gives new fields their column-mapping id and physical
name.

Example:
    >>> import pyarrow as pa
    >>> from lakequery.protocol.schema import from_arrow_schema
    >>> table = from_arrow_schema(pa.schema([("id", pa.int64())]))
    >>> reconcile(table, pa.schema([("id", pa.int32())])).changed
    False
    >>> merged = reconcile(table, pa.schema([("id", pa.int64()), ("v", pa.string())]),
    ...                    merge=True)
    >>> merged.schema.names, merged.changed
    (['id', 'v'], True)
    >>> reconcile(table, pa.schema([("id", pa.string())]))
    Traceback (most recent call last):
    ...
    lakequery.errors.SchemaMismatchError: column 'id': table has long, data has string
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from lakequery.errors import SchemaMismatchError
from lakequery.protocol.column_mapping import (
    ID_KEY,
    MAX_ID_KEY,
    PHYSICAL_NAME_KEY,
    without_column_mapping,
)
from lakequery.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    from_arrow_field,
    is_allowed_widening,
    type_to_json,
)
from lakequery.writer.nested_names import respelled_fields


@dataclass(frozen=True)
class Reconciled:
    """The outcome of :func:`reconcile`.

    Attributes:
        schema: the table schema to commit (the old one when nothing changed).
        changed: whether ``schema`` differs from the table's.
        widened: whether a column type was widened (needs the typeWidening feature).
    """

    schema: StructType
    changed: bool
    widened: bool = False


def _label(t: DeltaType) -> str:
    value = type_to_json(t)
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _fits(data: DeltaType, table: DeltaType) -> bool:
    """True when data of type ``data`` can be stored in a ``table`` column without loss."""
    if data == table:
        return True
    if isinstance(data, StructType) and isinstance(table, StructType):
        return all(
            (t := table.get(f.name)) is not None and _fits(f.type, t.type) for f in data.fields
        )
    if isinstance(data, ArrayType) and isinstance(table, ArrayType):
        return _fits(data.element, table.element)
    if isinstance(data, MapType) and isinstance(table, MapType):
        return _fits(data.key, table.key) and _fits(data.value, table.value)
    if isinstance(data, PrimitiveType) and isinstance(table, PrimitiveType):
        if data.name == "void":
            return True
        return is_allowed_widening(data, table) and data.name != "date"
    return False


class _Merger:
    def __init__(self, merge: bool) -> None:
        self.merge = merge
        self.widened = False

    def struct(self, table: StructType, data: StructType, where: str) -> StructType:
        """``table`` itself when nothing changes, else the evolved struct."""
        by_lower = {f.name.lower(): i for i, f in enumerate(table.fields)}
        fields = list(table.fields)
        changed = False
        for df in data.fields:
            path = f"{where}{df.name}"
            i = by_lower.get(df.name.lower())
            if i is None:
                if not self.merge:
                    raise SchemaMismatchError(
                        path,
                        "no such column",
                        _label(df.type),
                        "pass schema_mode='merge' to add it",
                    )
                fields.append(replace(df, nullable=True, metadata={}))
                changed = True
                continue
            tf = fields[i]
            new_type = self.field_type(tf, df, path)
            if new_type is not tf.type:
                fields[i] = self._widened(tf, new_type)
                changed = True
        return StructType(tuple(fields)) if changed else table

    def _widened(self, tf: StructField, new_type: DeltaType) -> StructField:
        if is_type_change(tf.type, new_type):
            self.widened = True
        return widened_field(tf, new_type)

    def field_type(self, tf: StructField, df: StructField, path: str) -> DeltaType:
        """The column's type after the write (``tf.type`` itself when unchanged)."""
        t, d = tf.type, df.type
        if isinstance(t, StructType | ArrayType | MapType) and type(d) is type(t):
            return self.container(t, d, path)
        if _fits(d, t):
            return t
        widenable = isinstance(t, PrimitiveType) and is_allowed_widening(t, d)
        if self.merge and widenable:
            return d
        detail = "pass schema_mode='merge' to widen the column" if widenable else ""
        raise SchemaMismatchError(path, _label(t), _label(d), detail)

    def container(self, t: DeltaType, d: DeltaType, path: str) -> DeltaType:
        """A struct, array or map type after the write: structs gain the data's new fields
        (``merge``), also as array elements and map values (``t`` itself when unchanged)."""
        if isinstance(t, StructType) and isinstance(d, StructType):
            return self.struct(t, d, f"{path}.")
        if isinstance(t, ArrayType) and isinstance(d, ArrayType):
            element = self.inner(t.element, d.element, f"{path}.element")
            return t if element is t.element else replace(t, element=element)
        assert isinstance(t, MapType) and isinstance(d, MapType)
        key = self.inner(t.key, d.key, f"{path}.key")
        value = self.inner(t.value, d.value, f"{path}.value")
        return t if key is t.key and value is t.value else replace(t, key=key, value=value)

    def inner(self, t: DeltaType, d: DeltaType, path: str) -> DeltaType:
        """An array's element or a map's key or value type: containers as above; other
        types must fit (widening a nested leaf is not offered)."""
        if isinstance(t, StructType | ArrayType | MapType) and type(d) is type(t):
            return self.container(t, d, path)
        if _fits(d, t):
            return t
        raise SchemaMismatchError(path, _label(t), _label(d))


def reconcile(table: StructType, data: pa.Schema, *, merge: bool = False) -> Reconciled:
    """Checks (and with ``merge`` evolves) the table schema for data of schema ``data``.

    Table columns missing from the data are fine when nullable (written as nulls) or
    generated (computed by the writer); the writer checks the values themselves.

    Raises:
        SchemaMismatchError: a data column the table lacks (without ``merge``), or a type
            that does not fit.
    """
    # nested fields as the table spells them (case-insensitive names, as the writer's cast)
    # the data's own column-mapping keys (a scan of a column-mapped table) never reach it
    incoming = without_column_mapping(
        StructType(tuple(from_arrow_field(f) for f in respelled_fields(data, table)))
    )
    merger = _Merger(merge)
    schema = merger.struct(table, incoming, "")
    changed = schema is not table
    for f in table.fields:
        present = any(d.name.lower() == f.name.lower() for d in incoming.fields)
        generated = "delta.generationExpression" in f.metadata
        if not present and not f.nullable and not generated:
            raise SchemaMismatchError(f.name, _label(f.type), "no such column", "it is NOT NULL")
    return Reconciled(schema, changed, merger.widened)


def is_type_change(old: DeltaType, new: DeltaType) -> bool:
    """Whether ``old -> new`` is a primitive type change that type widening records. A
    ``void`` column (never stored in data files) takes any type without one (digest
    §8.3): no ``typeWidening`` feature, nothing for readers to cast."""
    return isinstance(new, PrimitiveType) and isinstance(old, PrimitiveType) and old.name != "void"


def widened_field(tf: StructField, new_type: DeltaType) -> StructField:
    """``tf`` with type ``new_type``; a primitive type change is recorded in the field's
    ``delta.typeChanges`` (digest §14), which readers use to cast older files up."""
    if is_type_change(tf.type, new_type):
        change = {"fromType": type_to_json(tf.type), "toType": type_to_json(new_type)}
        metadata = dict(tf.metadata)
        metadata["delta.typeChanges"] = [*metadata.get("delta.typeChanges", []), change]
        return replace(tf, type=new_type, metadata=metadata)
    return replace(tf, type=new_type)


def assign_column_mapping(schema: StructType, max_id: int) -> tuple[StructType, int]:
    """Gives every field without one a column-mapping id (``max_id + 1``...) and a
    physical name ``col-<uuid>``; returns the schema and the new maximum id."""
    counter = [max_id]

    def visit_type(t: DeltaType) -> DeltaType:
        if isinstance(t, StructType):
            return StructType(tuple(visit_field(f) for f in t.fields))
        if isinstance(t, ArrayType):
            return replace(t, element=visit_type(t.element))
        if isinstance(t, MapType):
            return replace(t, key=visit_type(t.key), value=visit_type(t.value))
        return t

    def visit_field(f: StructField) -> StructField:
        metadata: dict[str, Any] = dict(f.metadata)
        if ID_KEY not in metadata:
            counter[0] += 1
            metadata[ID_KEY] = counter[0]
        if PHYSICAL_NAME_KEY not in metadata:
            metadata[PHYSICAL_NAME_KEY] = f"col-{uuid.uuid4()}"
        return replace(f, type=visit_type(f.type), metadata=metadata)

    out = visit_type(schema)
    assert isinstance(out, StructType)
    return out, counter[0]


def assign_column_ids(schema: StructType, config: dict[str, str]) -> StructType:
    """:func:`assign_column_mapping` above ``config``'s ``maxColumnId``, which it then
    records in ``config`` (the largest id ever assigned: it only grows)."""
    schema, max_id = assign_column_mapping(schema, int(config.get(MAX_ID_KEY) or 0))
    config[MAX_ID_KEY] = str(max_id)
    return schema
