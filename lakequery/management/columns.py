"""Column changes: ADD COLUMNS, RENAME COLUMN, DROP COLUMN (planners, pure).

Rename and drop need column mapping (digest §12): data files keep their physical column
names, so a rename only changes the logical name and a drop only removes the field from
the schema; no data file is rewritten. On a table without column mapping the same
commit switches it to ``delta.columnMapping.mode=name``: every existing field (nested
ones too) gets an id and keeps its current name as physical name, so the files already
written stay readable as they are, and the protocol gains ``columnMapping`` (legacy
reader 2 / writer 5, or the table feature on a table-features protocol).

Columns are named by a dotted path (``"s.inner"``; a name holding dots in backticks,
``"`a.b`"``) or a sequence of names; matching is case-insensitive, as in Spark.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> from lakequery.management.change import commit_change
    >>> uri = "memory://columns-doc"
    >>> _ = lq.write(uri, pa.table({"id": [1], "v": ["a"]}))
    >>> dt = lq.DeltaTable(uri)
    >>> commit_change(dt, lambda s: plan_rename_column(s, "v", "value")).features_added
    ('columnMapping',)
    >>> dt.snapshot().scan().to_arrow().column_names
    ['id', 'value']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from lakequery.errors import AlterTableError
from lakequery.management.change import AlterChange
from lakequery.metadata import Metadata
from lakequery.protocol.column_mapping import (
    PHYSICAL_NAME_KEY,
    without_column_mapping,
)
from lakequery.protocol.features import table_features_in_use, upgraded_protocol
from lakequery.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    StructField,
    StructType,
    from_arrow_field,
    schema_to_json,
)
from lakequery.snapshot import Snapshot
from lakequery.writer.constraints import CHECK_PREFIX, GENERATION_KEY, INVARIANTS_KEY
from lakequery.writer.schema_evolution import assign_column_ids

ColumnPath = str | Sequence[str]
MODE_KEY = "delta.columnMapping.mode"
#: Column metadata an added column may not carry (existing rows could not satisfy it).
_NOT_ADDABLE = (GENERATION_KEY, INVARIANTS_KEY, "delta.identity.", "CURRENT_DEFAULT")
_SEGMENT = re.compile(r"`((?:[^`]|``)*)`|([^.`]+)")


def parse_column_path(column: ColumnPath) -> tuple[str, ...]:
    """``"a.b"`` -> ``("a", "b")``; backticks quote a name holding dots.

    Example:
        >>> parse_column_path("s.`x.y`")
        ('s', 'x.y')
    """
    if not isinstance(column, str):
        parts = tuple(str(p) for p in column)
    else:
        parts = ()
        pos = 0
        while pos <= len(column):
            m = _SEGMENT.match(column, pos)
            if m is None:
                raise ValueError(f"cannot parse column path {column!r}")
            parts += (m.group(1).replace("``", "`") if m.group(1) is not None else m.group(2),)
            pos = m.end()
            if pos == len(column):
                break
            if column[pos] != ".":
                raise ValueError(f"cannot parse column path {column!r}")
            pos += 1
    if not parts or any(not p for p in parts):
        raise ValueError(f"empty column name in {column!r}")
    return parts


def _label(path: Sequence[str]) -> str:
    return ".".join(path)


def _fail(snapshot: Snapshot, operation: str, reason: str) -> AlterTableError:
    return AlterTableError(snapshot.table_uri, operation, reason)


def _struct_of(t: DeltaType) -> StructType | None:
    return t if isinstance(t, StructType) else None


def resolve(
    schema: StructType, path: Sequence[str], snapshot: Snapshot, operation: str
) -> tuple[str, ...]:
    """The path with the schema's spelling of each name (case-insensitive match)."""
    out: list[str] = []
    struct: StructType | None = schema
    for i, name in enumerate(path):
        if struct is None:
            raise _fail(snapshot, operation, f"{_label(out)!r} is not a struct column")
        found = next((f for f in struct.fields if f.name.lower() == name.lower()), None)
        if found is None:
            where = f" in {_label(out)!r}" if out else ""
            raise _fail(snapshot, operation, f"no column {name!r}{where} (path {_label(path)!r})")
        out.append(found.name)
        struct = _struct_of(found.type) if i + 1 < len(path) else None
    return tuple(out)


def edit_field(
    struct: StructType,
    path: Sequence[str],
    edit: Callable[[StructField], StructField | None],
) -> StructType:
    """The struct with the field at (resolved) ``path`` replaced by ``edit(field)``
    (None removes it)."""
    fields: list[StructField] = []
    for f in struct.fields:
        if f.name != path[0]:
            fields.append(f)
            continue
        if len(path) == 1:
            new = edit(f)
        else:
            assert isinstance(f.type, StructType)
            new = replace(f, type=edit_field(f.type, path[1:], edit))
        if new is not None:
            fields.append(new)
    return StructType(tuple(fields))


def field_at(schema: StructType, path: Sequence[str]) -> StructField:
    """The field at a resolved path."""
    struct: DeltaType = schema
    found: StructField | None = None
    for name in path:
        assert isinstance(struct, StructType)
        found = struct[name]
        struct = found.type
    assert found is not None
    return found


# --- column mapping ---------------------------------------------------------------------------


def _physical_names_kept(t: DeltaType) -> DeltaType:
    """Every field without a physical name gets its current name as one (digest §12)."""
    if isinstance(t, StructType):
        return StructType(
            tuple(
                replace(
                    f,
                    type=_physical_names_kept(f.type),
                    metadata={PHYSICAL_NAME_KEY: f.name, **f.metadata},
                )
                for f in t.fields
            )
        )
    if isinstance(t, ArrayType):
        return replace(t, element=_physical_names_kept(t.element))
    if isinstance(t, MapType):
        return replace(t, key=_physical_names_kept(t.key), value=_physical_names_kept(t.value))
    return t


def with_name_mapping(
    schema: StructType, config: dict[str, str], snapshot: Snapshot, operation: str
) -> StructType:
    """Switches ``config`` (in place) to ``delta.columnMapping.mode=name`` when the table
    has no column mapping, giving every field an id and its name as physical name;
    returns the schema to commit. A table already in ``name``/``id`` mode is unchanged.
    """
    mode = snapshot.column_mapping_mode
    if mode != "none":
        return schema
    wanted = (config.get(MODE_KEY) or "none").strip().lower()
    if wanted not in ("none", "name"):
        raise _fail(
            snapshot,
            operation,
            f"{MODE_KEY}={wanted!r} on an existing table: only 'none' -> 'name' is allowed "
            "('id' mode only at creation)",
        )
    kept = _physical_names_kept(schema)
    assert isinstance(kept, StructType)
    config[MODE_KEY] = "name"
    return assign_column_ids(kept, config)


def _references(text: str, name: str) -> bool:
    """Whether SQL ``text`` mentions the column ``name`` (as a whole word, any case)."""
    pattern = r"(?<![\w`])`?" + re.escape(name) + r"`?(?![\w`])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def check_unreferenced(
    meta: Metadata, path: Sequence[str], snapshot: Snapshot, operation: str
) -> None:
    """Refuses to rename or drop a column a CHECK constraint, invariant, generated
    column or ``delta.dataSkippingStatsColumns`` refers to (Spark refuses too; the match
    is by name, so a string literal equal to the name also counts)."""
    name = path[0]
    uses: list[str] = []
    for key, expr in meta.configuration.items():
        if key.lower().startswith(CHECK_PREFIX) and _references(expr, name):
            uses.append(f"constraint {key[len(CHECK_PREFIX) :]!r}")
    stats = meta.configuration.get("delta.dataSkippingStatsColumns")
    if stats and _references(stats, name):
        uses.append("delta.dataSkippingStatsColumns")
    for f in meta.schema.fields:
        for key in (GENERATION_KEY, INVARIANTS_KEY):
            raw = f.metadata.get(key)
            if raw is not None and _references(str(raw), name) and f.name != name:
                uses.append(f"{key} of column {f.name!r}")
    if uses:
        raise _fail(
            snapshot,
            operation,
            f"column {_label(path)!r} is referenced by {', '.join(uses)}; drop those first",
        )


def _commit_schema(
    snapshot: Snapshot,
    operation: str,
    parameters: Mapping[str, Any],
    schema: StructType,
    config: dict[str, str],
    partition_columns: Sequence[str] | None = None,
) -> AlterChange:
    meta = snapshot.metadata
    new_meta = replace(
        meta,
        schema_string=schema_to_json(schema),
        configuration=config,
        partition_columns=tuple(
            meta.partition_columns if partition_columns is None else partition_columns
        ),
    )
    needed = table_features_in_use(schema, config)
    return AlterChange(
        operation, parameters, new_meta, upgraded_protocol(snapshot.protocol, needed)
    )


# --- ADD COLUMNS --------------------------------------------------------------------------------


def _as_fields(fields: Any) -> list[StructField]:
    if isinstance(fields, (StructField, pa.Field)):
        fields = [fields]
    out: list[StructField] = []
    for f in fields:
        if isinstance(f, StructField):
            out.append(f)
        elif isinstance(f, pa.Field):
            out.append(from_arrow_field(f))
        else:
            raise TypeError(f"add_columns takes pyarrow fields or StructFields, not {f!r:.80}")
    return out


def plan_add_columns(snapshot: Snapshot, fields: Any) -> AlterChange:
    """ADD COLUMNS: new nullable top-level columns at the end of the schema.

    Args:
        snapshot: the table version the change is planned on.
        fields: a ``pyarrow.Field``, a ``pyarrow.Schema``, a Delta ``StructField`` or an
            iterable of those.

    Raises:
        AlterTableError: a column exists already, or is not nullable.
    """
    op = "ADD COLUMNS"
    new = _as_fields(fields)
    if not new:
        raise _fail(snapshot, op, "no columns given")
    meta = snapshot.metadata
    have = {n.lower() for n in meta.schema.names}
    for f in new:
        if f.name.lower() in have:
            raise _fail(snapshot, op, f"column {f.name!r} already exists")
        if not f.nullable:
            raise _fail(snapshot, op, f"column {f.name!r} must be nullable (existing rows)")
        special = sorted(k for k in f.metadata if k.startswith(_NOT_ADDABLE))
        if special:
            raise _fail(
                snapshot,
                op,
                f"column {f.name!r} has {special}: generated, identity and default columns "
                "cannot be added to an existing table (Delta's rule); use a CHECK constraint "
                "for invariants",
            )
        have.add(f.name.lower())
    added = list(without_column_mapping(StructType(tuple(new))).fields)
    schema = StructType((*meta.schema.fields, *added))
    config = dict(meta.configuration)
    if snapshot.column_mapping_mode != "none":
        schema = assign_column_ids(schema, config)
    params = {"columns": [{"column": {"name": f.name}} for f in added]}
    return _commit_schema(snapshot, op, params, schema, config)


# --- RENAME COLUMN / DROP COLUMN ----------------------------------------------------------------


def plan_rename_column(snapshot: Snapshot, old: ColumnPath, new: str) -> AlterChange:
    """RENAME COLUMN: the field at ``old`` gets the name ``new`` (same parent struct).

    Raises:
        AlterTableError: no such column, ``new`` is taken, or the column is referenced by
            a constraint or generated column.
    """
    op = "RENAME COLUMN"
    meta = snapshot.metadata
    path = resolve(meta.schema, parse_column_path(old), snapshot, op)
    if not new or not isinstance(new, str):
        raise _fail(snapshot, op, f"new column name must be a non-empty string, not {new!r}")
    parent = meta.schema if len(path) == 1 else field_at(meta.schema, path[:-1]).type
    assert isinstance(parent, StructType)
    taken = {f.name.lower() for f in parent.fields if f.name != path[-1]}
    if new.lower() in taken:
        raise _fail(snapshot, op, f"column {new!r} already exists next to {_label(path)!r}")
    if new != path[-1]:
        check_unreferenced(meta, path, snapshot, op)
    config = dict(meta.configuration)
    schema = with_name_mapping(meta.schema, config, snapshot, op)
    schema = edit_field(schema, path, lambda f: replace(f, name=new))
    parts = [new if len(path) == 1 and c == path[0] else c for c in meta.partition_columns]
    params = {"oldColumnPath": _label(path), "newColumnPath": _label((*path[:-1], new))}
    return _commit_schema(snapshot, op, params, schema, config, parts)


def plan_drop_columns(
    snapshot: Snapshot, columns: ColumnPath | Iterable[ColumnPath]
) -> AlterChange:
    """DROP COLUMNS: removes the fields from the schema (data files untouched).

    Args:
        snapshot: the table version the change is planned on.
        columns: one column path, or a list of them (dropped in one commit).

    Raises:
        AlterTableError: no such column, a partition column, the last data column (of
            the table or of its struct), or a column a constraint or generated column uses.
    """
    from lakequery.clustering.domain import clustering_columns

    op = "DROP COLUMNS"
    meta = snapshot.metadata
    wanted = [columns] if isinstance(columns, str) else list(columns)
    if not wanted:
        raise _fail(snapshot, op, "no columns given")
    config = dict(meta.configuration)
    schema = with_name_mapping(meta.schema, config, snapshot, op)
    dropped: list[str] = []
    clustered = clustering_columns(snapshot) or []
    for column in wanted:
        path = resolve(schema, parse_column_path(column), snapshot, op)
        if len(path) == 1 and path[0] in meta.partition_columns:
            raise _fail(snapshot, op, f"{path[0]!r} is a partition column")
        dotted = ".".join(path)
        held = [c for c in clustered if c == dotted or c.startswith(dotted + ".")]
        if held:  # as Spark refuses (a struct holding a nested clustering column too)
            raise _fail(
                snapshot,
                op,
                f"{held[0]!r} is a clustering column: change the clustering first "
                "(alter.cluster_by)",
            )
        parent = schema if len(path) == 1 else field_at(schema, path[:-1]).type
        assert isinstance(parent, StructType)
        data_fields = [
            f for f in parent.fields if len(path) > 1 or f.name not in meta.partition_columns
        ]
        if len(data_fields) <= 1:
            where = "the table" if len(path) == 1 else f"struct {_label(path[:-1])!r}"
            raise _fail(snapshot, op, f"{_label(path)!r} is the last data column of {where}")
        check_unreferenced(meta, path, snapshot, op)
        schema = edit_field(schema, path, lambda f: None)
        dropped.append(_label(path))
    return _commit_schema(snapshot, op, {"columns": dropped}, schema, config)


# --- column metadata -----------------------------------------------------------------------------


def plan_set_column_metadata(
    snapshot: Snapshot, column: ColumnPath, metadata: Mapping[str, Any]
) -> AlterChange:
    """Merges ``metadata`` into a column's metadata (deltalake's ``set_column_metadata``;
    Spark's ``ALTER COLUMN ... COMMENT`` is ``{"comment": ...}``).

    Raises:
        AlterTableError: no such column, or a ``delta.*`` key (those are the protocol's:
            column mapping, type changes, identity, generation, invariants).
    """
    op = "CHANGE COLUMN"
    meta = snapshot.metadata
    path = resolve(meta.schema, parse_column_path(column), snapshot, op)
    reserved = sorted(k for k in metadata if str(k).startswith("delta."))
    if reserved:
        raise _fail(snapshot, op, f"column metadata keys {reserved} are reserved by Delta")
    added = {str(k): v for k, v in metadata.items()}
    schema = edit_field(meta.schema, path, lambda f: replace(f, metadata={**f.metadata, **added}))
    params = {"column": _label(path), "metadata": added}
    return _commit_schema(snapshot, op, params, schema, dict(meta.configuration))
