"""Delta table schemas (digest §8): parse and write ``schemaString``, map to and from Arrow.

A schema is a :class:`StructType` of :class:`StructField` objects; field types form a small
family of frozen dataclasses (:class:`PrimitiveType`, :class:`DecimalType`,
:class:`ArrayType`, :class:`MapType`, :class:`StructType`). Column metadata is kept exactly
as found in the log, so :func:`schema_to_json` reproduces the ``schemaString`` that Delta
writers produce.

Logical Arrow types follow the conformance README: ``timestamp`` is ``timestamp[us, UTC]``,
``timestamp_ntz`` is ``timestamp[us]``, ``variant`` is ``struct<metadata: binary, value:
binary>``, ``void`` is ``null`` and ``geometry``/``geography`` are ``binary`` (WKB).

Example:
    >>> from lakequery.protocol.schema import parse_schema, schema_to_json, to_arrow_schema
    >>> text = ('{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,'
    ...         '"metadata":{}},{"name":"d","type":"decimal(10,2)","nullable":true,'
    ...         '"metadata":{}}]}')
    >>> schema = parse_schema(text)
    >>> [f.name for f in schema.fields], schema.fields[1].type
    (['id', 'd'], DecimalType(name='decimal(10,2)', precision=10, scale=2))
    >>> to_arrow_schema(schema).types
    [DataType(int64), Decimal128Type(decimal128(10, 2))]
    >>> schema_to_json(schema) == text
    True
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakequery.errors import SchemaError, UnsupportedFeatureError

#: Field-metadata key of the Arrow schema that carries a field's Delta column metadata (JSON).
ARROW_METADATA_KEY = b"delta.metadata"
#: Field-metadata key recording the Delta type where the Arrow type alone is ambiguous
#: (``variant``, ``geometry(...)``, ``geography(...)``), so that Arrow -> Delta round trips.
ARROW_TYPE_KEY = b"delta.type"

_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_GEO_RE = re.compile(r"^(geometry|geography)(\(.*\))?$", re.DOTALL)


class DeltaType:
    """Base class of every Delta data type."""

    __slots__ = ()


@dataclass(frozen=True)
class PrimitiveType(DeltaType):
    """A non-nested type named as in the schema JSON (``"long"``, ``"variant"``, ...).

    ``json_form`` remembers the exact JSON a parsed type came from (for instance the object
    form ``{"type": "variant"}``) so that :func:`schema_to_json` writes it back unchanged; it
    takes no part in equality.
    """

    name: str
    json_form: Any = field(default=None, compare=False, hash=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        if type(self) is PrimitiveType and not (
            self.name in _SIMPLE_NAMES or _GEO_RE.match(self.name)
        ):
            hint = " (use DecimalType)" if self.name.startswith("decimal") else ""
            raise SchemaError(f"unknown primitive type {self.name!r}{hint}")


@dataclass(frozen=True)
class DecimalType(PrimitiveType):
    """``decimal(precision, scale)``: ``1 <= precision <= 38``, ``0 <= scale <= precision``."""

    name: str = field(init=False)
    precision: int
    scale: int

    def __post_init__(self) -> None:
        if not (1 <= self.precision <= 38 and 0 <= self.scale <= self.precision):
            raise SchemaError(f"invalid decimal({self.precision},{self.scale})")
        object.__setattr__(self, "name", f"decimal({self.precision},{self.scale})")


@dataclass(frozen=True)
class ArrayType(DeltaType):
    """A list of ``element`` values (``containsNull`` in JSON)."""

    element: DeltaType
    contains_null: bool = True


@dataclass(frozen=True)
class MapType(DeltaType):
    """A map from ``key`` to ``value`` (keys are never null)."""

    key: DeltaType
    value: DeltaType
    value_contains_null: bool = True


@dataclass(frozen=True)
class StructField:
    """One named field of a struct, with its column metadata kept as parsed."""

    name: str
    type: DeltaType
    nullable: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)


def case_clash(names: Iterable[str]) -> tuple[str, str] | None:
    """The first two of ``names`` that are equal when case is ignored (Delta's names are
    case-insensitive), earlier one first; None when there are none."""
    seen: dict[str, str] = {}
    for name in names:
        low = name.lower()
        if low in seen:
            return seen[low], name
        seen[low] = name
    return None


#: Up to this many fields a struct finds a field by name in a loop; wider ones keep a dict.
_FEW_FIELDS = 32


@dataclass(frozen=True)
class StructType(DeltaType):
    """An ordered sequence of uniquely named (case-insensitively) fields."""

    fields: tuple[StructField, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        clash = case_clash(f.name for f in self.fields)
        if clash is not None:
            raise SchemaError(f"duplicate field name {clash[1]!r} (also {clash[0]!r})")

    @property
    def names(self) -> list[str]:
        """Field names in order."""
        return [f.name for f in self.fields]

    def get(self, name: str) -> StructField | None:
        """The field called ``name`` (exact match), or None."""
        if len(self.fields) <= _FEW_FIELDS:
            return next((f for f in self.fields if f.name == name), None)
        by_name: dict[str, StructField] | None = self.__dict__.get("_by_name")
        if by_name is None:  # built on first use: wide structs are looked up per column
            by_name = {f.name: f for f in self.fields}
            object.__setattr__(self, "_by_name", by_name)
        return by_name.get(name)

    def __getitem__(self, name: str) -> StructField:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[StructField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


# --- JSON ----------------------------------------------------------------------------------


def parse_schema(schema_string: str) -> StructType:
    """Parse a ``metaData.schemaString`` into a :class:`StructType`.

    Args:
        schema_string: JSON of a struct type, Spark style.

    Returns:
        The parsed schema; column metadata is kept unchanged.

    Raises:
        SchemaError: Invalid JSON, an unknown type name, a malformed field or a duplicate
            field name.

    Example:
        >>> s = parse_schema('{"type":"struct","fields":[{"name":"a","type":'
        ...     '{"type":"array","elementType":"integer","containsNull":true},'
        ...     '"nullable":true,"metadata":{}}]}')
        >>> s["a"].type
        ArrayType(element=PrimitiveType(name='integer'), contains_null=True)
    """
    try:
        obj = json.loads(schema_string)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"schemaString is not valid JSON: {exc}") from exc
    parsed = parse_type(obj)
    if not isinstance(parsed, StructType):
        raise SchemaError(f"schemaString must describe a struct, got {obj!r:.80}")
    return parsed


def parse_type(obj: Any, where: str = "schema") -> DeltaType:
    """Parse one type from its JSON value (a type-name string or an object).

    Args:
        obj: The decoded JSON value.
        where: Location used in error messages.

    Raises:
        SchemaError: The value is not a known type.
    """
    if isinstance(obj, str):
        return _parse_type_name(obj, where)
    if not isinstance(obj, dict):
        raise SchemaError(f"{where}: a type must be a string or an object, got {obj!r:.80}")
    kind = obj.get("type")
    try:
        if kind == "struct":
            raw_fields = obj["fields"]
            if not isinstance(raw_fields, list):
                raise SchemaError(f"{where}: struct 'fields' must be a list")
            return StructType(tuple(_parse_field(f, where) for f in raw_fields))
        if kind == "array":
            return ArrayType(
                parse_type(obj["elementType"], f"{where}.element"),
                _bool(obj.get("containsNull", True), where),
            )
        if kind == "map":
            return MapType(
                parse_type(obj["keyType"], f"{where}.key"),
                parse_type(obj["valueType"], f"{where}.value"),
                _bool(obj.get("valueContainsNull", True), where),
            )
    except KeyError as exc:
        raise SchemaError(f"{where}: {kind} type lacks {exc.args[0]!r}") from None
    if isinstance(kind, str) and kind not in ("struct", "array", "map") and len(obj) == 1:
        base = _parse_type_name(kind, where)
        if isinstance(base, DecimalType):
            return DecimalType(base.precision, base.scale, json_form=obj)
        return PrimitiveType(base.name, json_form=obj)
    raise SchemaError(f"{where}: unknown type {obj!r:.80}")


def _parse_type_name(name: str, where: str) -> PrimitiveType:
    if name in _SIMPLE_NAMES or _GEO_RE.match(name):
        return PrimitiveType(name)
    m = _DECIMAL_RE.match(name)
    if m:
        precision, scale = int(m.group(1)), int(m.group(2))
        canonical = f"decimal({precision},{scale})"
        return DecimalType(precision, scale, json_form=None if name == canonical else name)
    raise SchemaError(f"{where}: unknown type name {name!r}")


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SchemaError(f"{where}: expected a boolean, got {value!r:.40}")
    return value


def _parse_field(obj: Any, where: str) -> StructField:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or "type" not in obj:
        raise SchemaError(f"{where}: malformed struct field {obj!r:.80}")
    name = obj["name"]
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise SchemaError(f"{where}.{name}: field metadata must be an object")
    path = name if where == "schema" else f"{where}.{name}"
    return StructField(
        name, parse_type(obj["type"], path), _bool(obj.get("nullable", True), path), metadata
    )


def type_to_json(t: DeltaType) -> Any:
    """The JSON value (before encoding) of one type, with Spark's key order."""
    if isinstance(t, PrimitiveType):
        return t.json_form if t.json_form is not None else t.name
    if isinstance(t, ArrayType):
        return {
            "type": "array",
            "elementType": type_to_json(t.element),
            "containsNull": t.contains_null,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "keyType": type_to_json(t.key),
            "valueType": type_to_json(t.value),
            "valueContainsNull": t.value_contains_null,
        }
    if isinstance(t, StructType):
        return {
            "type": "struct",
            "fields": [
                {
                    "name": f.name,
                    "type": type_to_json(f.type),
                    "nullable": f.nullable,
                    "metadata": dict(f.metadata),
                }
                for f in t.fields
            ],
        }
    raise SchemaError(f"not a Delta type: {t!r}")


def schema_to_json(schema: StructType) -> str:
    """Serialise a schema as a compact ``schemaString`` (inverse of :func:`parse_schema`)."""
    return json.dumps(type_to_json(schema), separators=(",", ":"), ensure_ascii=False)


# --- Delta -> Arrow --------------------------------------------------------------------------

_ARROW_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
}
_SIMPLE_NAMES = frozenset([*_ARROW_PRIMITIVES, "variant"])

#: Logical Arrow type of ``variant`` (unshredded encoding).
VARIANT_ARROW_TYPE = pa.struct([pa.field("metadata", pa.binary()), pa.field("value", pa.binary())])


def is_variant(t: DeltaType) -> bool:
    """True for the ``variant`` type."""
    return isinstance(t, PrimitiveType) and t.name == "variant"


def primitive_types(t: DeltaType) -> Iterator[PrimitiveType]:
    """Every primitive type ``t`` holds, at any depth: struct fields, array elements,
    map keys and values."""
    if isinstance(t, StructType):
        for f in t.fields:
            yield from primitive_types(f.type)
    elif isinstance(t, ArrayType):
        yield from primitive_types(t.element)
    elif isinstance(t, MapType):
        yield from primitive_types(t.key)
        yield from primitive_types(t.value)
    elif isinstance(t, PrimitiveType):
        yield t


def has_variant(t: DeltaType) -> bool:
    """True when the type holds a variant at any depth."""
    return any(is_variant(p) for p in primitive_types(t))


def is_geo(t: DeltaType) -> bool:
    """True for ``geometry(...)`` and ``geography(...)`` types."""
    return isinstance(t, PrimitiveType) and _GEO_RE.match(t.name) is not None


def to_arrow_type(t: DeltaType) -> pa.DataType:
    """The logical Arrow type of a Delta type (see the module docstring)."""
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, PrimitiveType):
        if t.name in _ARROW_PRIMITIVES:
            return _ARROW_PRIMITIVES[t.name]
        if t.name == "variant":
            return VARIANT_ARROW_TYPE
        if is_geo(t):
            return pa.binary()
        raise SchemaError(f"no Arrow type for {t.name!r}")
    if isinstance(t, ArrayType):
        return pa.list_(_arrow_child("element", t.element, t.contains_null))
    if isinstance(t, MapType):
        key = _arrow_child("key", t.key, False)
        value = _arrow_child("value", t.value, t.value_contains_null)
        return pa.map_(key, value)  # type: ignore[call-overload,no-any-return]
    if isinstance(t, StructType):
        return pa.struct([to_arrow_field(f) for f in t.fields])
    raise SchemaError(f"not a Delta type: {t!r}")


def _arrow_child(name: str, t: DeltaType, nullable: bool) -> pa.Field[Any]:
    md = {ARROW_TYPE_KEY: json.dumps(type_to_json(t)).encode()} if _ambiguous(t) else None
    # Arrow's null type is always nullable
    return pa.field(name, to_arrow_type(t), nullable=nullable or is_void(t), metadata=md)


def is_void(t: DeltaType) -> bool:
    """True for the ``void`` type (an always-null column no data file stores, §8.3)."""
    return isinstance(t, PrimitiveType) and t.name == "void"


def void_layout_problem(schema: StructType, partition_columns: Iterable[str] = ()) -> str | None:
    """Why no data file may be written under ``schema`` (digest §8.3), or None: a ``void``
    inside an array or map, a struct whose fields are all ``void`` (or that has none), or
    no column a data file would store (only ``void`` and partition columns).

    Example:
        >>> void = PrimitiveType("void")
        >>> s = StructType((StructField("a", PrimitiveType("long")), StructField("n", void)))
        >>> void_layout_problem(s) is None
        True
        >>> void_layout_problem(StructType((StructField("n", void),)))
        'no column would be stored in data files (only void or partition columns)'
        >>> void_layout_problem(StructType((StructField("l", ArrayType(void)), *s.fields)))
        'l.element is void inside an array or map'
    """

    def walk(t: DeltaType, path: str, nested: bool) -> str | None:
        if is_void(t):
            return f"{path} is void inside an array or map" if nested else None
        if isinstance(t, StructType):
            if all(is_void(f.type) for f in t.fields):
                return f"struct {path} has no field that is not void"
            return next(
                (p for f in t.fields if (p := walk(f.type, f"{path}.{f.name}", nested))), None
            )
        if isinstance(t, ArrayType):
            return walk(t.element, f"{path}.element", True)
        if isinstance(t, MapType):
            return walk(t.key, f"{path}.key", True) or walk(t.value, f"{path}.value", True)
        return None

    parts = set(partition_columns)
    data = [f for f in schema.fields if f.name not in parts]
    for f in data:
        problem = walk(f.type, f.name, False)
        if problem:
            return problem
    if all(is_void(f.type) for f in data):
        return "no column would be stored in data files (only void or partition columns)"
    return None


def without_void_fields(f: StructField) -> StructField:
    """``f`` with the ``void`` fields of its structs left out, at any depth (what a data
    file stores of it, digest §8.3: no void sits in an array or map)."""
    t = f.type
    if not isinstance(t, StructType):
        return f
    kept = tuple(without_void_fields(c) for c in t.fields if not is_void(c.type))
    if kept == t.fields:
        return f
    return StructField(f.name, StructType(kept), f.nullable, f.metadata)


def _ambiguous(t: DeltaType) -> bool:
    return is_variant(t) or is_geo(t)


def to_arrow_field(f: StructField) -> pa.Field[Any]:
    """Arrow field of a struct field; Delta metadata goes to ``b"delta.metadata"`` if any."""
    md: dict[bytes, bytes] = {}
    if f.metadata:
        md[ARROW_METADATA_KEY] = json.dumps(dict(f.metadata), ensure_ascii=False).encode()
    if _ambiguous(f.type):
        md[ARROW_TYPE_KEY] = json.dumps(type_to_json(f.type)).encode()
    nullable = f.nullable or is_void(f.type)
    return pa.field(f.name, to_arrow_type(f.type), nullable=nullable, metadata=md or None)


def to_arrow_schema(schema: StructType) -> pa.Schema:
    """The logical Arrow schema of a Delta schema (logical names, logical types)."""
    return pa.schema([to_arrow_field(f) for f in schema.fields])


# --- Arrow -> Delta --------------------------------------------------------------------------


def from_arrow_schema(schema: pa.Schema) -> StructType:
    """Delta schema for an Arrow schema (for writers).

    Integers map by width (``uint8`` -> short, ``uint16`` -> integer, ``uint32`` -> long,
    ``uint64`` -> decimal(20,0)), every string/binary flavour to string/binary, timestamps of
    any unit to ``timestamp`` (with a zone) or ``timestamp_ntz`` (without), ``date64`` to
    date, dictionaries and run-end encoded arrays to their value type, any list flavour to
    array and ``null`` to void. Delta metadata saved by :func:`to_arrow_field` is restored.

    Raises:
        SchemaError: A type Delta cannot store (time, duration, interval, union, ...).
    """
    return StructType(tuple(from_arrow_field(f) for f in schema))


def from_arrow_field(f: pa.Field[Any]) -> StructField:
    """Delta struct field for one Arrow field."""
    md = f.metadata or {}
    metadata: dict[str, Any] = {}
    if ARROW_METADATA_KEY in md:
        try:
            metadata = json.loads(md[ARROW_METADATA_KEY])
        except ValueError as exc:
            raise SchemaError(f"field {f.name!r}: bad {ARROW_METADATA_KEY!r}: {exc}") from exc
    return StructField(f.name, _field_type(f), f.nullable, metadata)


def _field_type(f: pa.Field[Any]) -> DeltaType:
    md = f.metadata or {}
    if ARROW_TYPE_KEY in md:
        try:
            return parse_type(json.loads(md[ARROW_TYPE_KEY]), f.name)
        except ValueError as exc:
            raise SchemaError(f"field {f.name!r}: bad {ARROW_TYPE_KEY!r}: {exc}") from exc
    return from_arrow_type(f.type, f.name)


_FROM_ARROW = {
    **dict.fromkeys(["int8"], "byte"),
    **dict.fromkeys(["int16", "uint8"], "short"),
    **dict.fromkeys(["int32", "uint16"], "integer"),
    **dict.fromkeys(["int64", "uint32"], "long"),
    **dict.fromkeys(["halffloat", "float"], "float"),
    **dict.fromkeys(["double"], "double"),
    **dict.fromkeys(["bool"], "boolean"),
    **dict.fromkeys(["date32[day]", "date64[ms]"], "date"),
    **dict.fromkeys(["null"], "void"),
    **dict.fromkeys(["string", "large_string", "string_view"], "string"),
    **dict.fromkeys(["binary", "large_binary", "binary_view"], "binary"),
}


def is_arrow_list(t: pa.DataType) -> bool:
    """True for every Arrow list flavour (list, large, fixed-size, list views)."""
    kinds = ("list", "large_list", "fixed_size_list", "list_view", "large_list_view")
    return any(getattr(pa.types, f"is_{k}")(t) for k in kinds)


def from_arrow_type(arrow_type: pa.DataType, where: str = "column") -> DeltaType:
    """Delta type for one Arrow type (see :func:`from_arrow_schema`)."""
    t: Any = arrow_type
    types = pa.types
    simple = _FROM_ARROW.get(str(t))
    if simple is not None:
        return PrimitiveType(simple)
    if types.is_uint64(t):
        return DecimalType(20, 0)
    if types.is_fixed_size_binary(t):
        return PrimitiveType("binary")
    if types.is_timestamp(t):
        return PrimitiveType("timestamp" if t.tz is not None else "timestamp_ntz")
    if types.is_decimal(t):
        if t.precision > 38:
            raise SchemaError(f"{where}: {t} exceeds Delta's maximum decimal precision 38")
        return DecimalType(t.precision, t.scale)
    if types.is_dictionary(t):
        return from_arrow_type(t.value_type, where)
    if types.is_run_end_encoded(t):
        return from_arrow_type(t.value_type, where)
    if types.is_map(t):
        return MapType(_field_type(t.key_field), _field_type(t.item_field), t.item_field.nullable)
    if is_arrow_list(t):
        return ArrayType(_field_type(t.value_field), t.value_field.nullable)
    if types.is_struct(t):
        return StructType(tuple(from_arrow_field(t.field(i)) for i in range(t.num_fields)))
    if isinstance(t, pa.OpaqueType):  # a value its producer could not give an Arrow type
        raise SchemaError(
            f"{where}: {t.vendor_name} type {t.type_name} (Arrow opaque) has no Delta equivalent"
        )
    if isinstance(t, pa.BaseExtensionType):  # Python-defined and canonical (uuid, json)
        return from_arrow_type(t.storage_type, where)
    raise SchemaError(f"{where}: Arrow type {t} has no Delta equivalent")


# --- traversal -------------------------------------------------------------------------------


def leaf_paths(schema: StructType) -> list[tuple[tuple[str, ...], DeltaType]]:
    """Depth-first leaf columns: struct fields are expanded, arrays and maps are leaves.

    Example:
        >>> s = parse_schema('{"type":"struct","fields":[{"name":"s","type":{"type":"struct",'
        ...     '"fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]},'
        ...     '"nullable":true,"metadata":{}}]}')
        >>> leaf_paths(s)
        [(('s', 'x'), PrimitiveType(name='long'))]
    """
    out: list[tuple[tuple[str, ...], DeltaType]] = []

    def walk(prefix: tuple[str, ...], st: StructType) -> None:
        for f in st.fields:
            if isinstance(f.type, StructType):
                walk((*prefix, f.name), f.type)
            else:
                out.append(((*prefix, f.name), f.type))

    walk((), schema)
    return out


def iter_fields(
    t: DeltaType, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], StructField]]:
    """Every struct field at any depth with its logical path.

    Paths through arrays and maps use the steps ``element``, ``key`` and ``value``.
    """
    if isinstance(t, StructType):
        for f in t.fields:
            path = (*prefix, f.name)
            yield path, f
            yield from iter_fields(f.type, path)
    elif isinstance(t, ArrayType):
        yield from iter_fields(t.element, (*prefix, "element"))
    elif isinstance(t, MapType):
        yield from iter_fields(t.key, (*prefix, "key"))
        yield from iter_fields(t.value, (*prefix, "value"))


# --- type widening (§14) -----------------------------------------------------------------------


@dataclass(frozen=True)
class TypeChange:
    """One ``delta.typeChanges`` entry.

    Attributes:
        path: Logical path of the struct field whose metadata holds the entry.
        field_path: Steps inside that field's type (``()``, ``("element",)``,
            ``("value", "element")``, ...), from the optional ``fieldPath``.
        from_type: Type before the change.
        to_type: Type after the change.
        table_version: ``tableVersion`` when the writer recorded it.
    """

    path: tuple[str, ...]
    field_path: tuple[str, ...]
    from_type: DeltaType
    to_type: DeltaType
    table_version: int | None = None


_INT_RANK = {"byte": 0, "short": 1, "integer": 2, "long": 3}
_INT_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}


def type_changes(schema: StructType) -> list[TypeChange]:
    """Every ``delta.typeChanges`` entry of the schema, in field order.

    Raises:
        SchemaError: An entry is malformed.
    """
    out: list[TypeChange] = []
    for path, f in iter_fields(schema):
        entries = f.metadata.get("delta.typeChanges")
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise SchemaError(f"{'.'.join(path)}: delta.typeChanges must be a list")
        for e in entries:
            where = ".".join(path)
            if not isinstance(e, dict) or "fromType" not in e or "toType" not in e:
                raise SchemaError(f"{where}: malformed delta.typeChanges entry {e!r:.80}")
            fp = e.get("fieldPath")
            version = e.get("tableVersion")
            out.append(
                TypeChange(
                    path,
                    tuple(fp.split(".")) if isinstance(fp, str) and fp else (),
                    parse_type(e["fromType"], where),
                    parse_type(e["toType"], where),
                    version if isinstance(version, int) else None,
                )
            )
    return out


def is_allowed_widening(from_type: DeltaType, to_type: DeltaType) -> bool:
    """True if ``from_type -> to_type`` is a type-widening change readers must support.

    Integers widen to wider integers, to double and to decimals with at least as many
    integer digits (3/5/10/20 for byte/short/integer/long: Spark's rule, which admits e.g.
    byte -> decimal(4,1) beside the protocol's decimal(10+k1, k2)); float to double; date to
    timestamp_ntz; decimal(p,s) to decimal(p+k1, s+k2) with ``k1 >= k2 >= 0``; void to anything.
    """
    if from_type == to_type:
        return True
    if not isinstance(from_type, PrimitiveType) or not isinstance(to_type, PrimitiveType):
        return False
    f, t = from_type.name, to_type.name
    if f == "void":
        return True
    if f in _INT_RANK:
        if t in _INT_RANK:
            return _INT_RANK[f] < _INT_RANK[t]
        if t == "double":
            return f != "long"
        if isinstance(to_type, DecimalType):
            return to_type.precision - to_type.scale >= _INT_DIGITS[f]
        return False
    if isinstance(from_type, DecimalType) and isinstance(to_type, DecimalType):
        return (
            to_type.scale >= from_type.scale
            and to_type.precision - to_type.scale >= from_type.precision - from_type.scale
        )
    return (f, t) in {("float", "double"), ("date", "timestamp_ntz")}


def validate_type_changes(schema: StructType) -> None:
    """Refuse a schema whose ``delta.typeChanges`` hold a change readers cannot apply.

    Raises:
        UnsupportedFeatureError: A recorded change is not an allowed widening.
        SchemaError: An entry is malformed.
    """
    for change in type_changes(schema):
        if not is_allowed_widening(change.from_type, change.to_type):
            where = ".".join(change.path + change.field_path)
            raise UnsupportedFeatureError(
                "typeWidening",
                detail=(
                    f"unsupported type change of {where!r} from "
                    f"{json.dumps(type_to_json(change.from_type))} to "
                    f"{json.dumps(type_to_json(change.to_type))}"
                ),
            )
