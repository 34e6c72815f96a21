r"""Typed partition values from ``add.partitionValues`` strings (digest §9.1).

Everything is vectorised with ``pyarrow.compute`` and numpy; Python loops over values run
only to name the offending value once a parse has already failed.

Decisions:

* ``null`` and ``""`` are both SQL NULL for every type (so an empty string or empty binary
  partition value reads as NULL).
* **Zone-less timestamps** (``YYYY-MM-DD HH:MM:SS[.ffffff]``, the legacy form written in the
  writer's session zone, which the log does not record) are interpreted as **UTC**, as
  delta-rs, polars and Delta Kernel do. Values with a zone suffix (``Z``, ``+05:30``, ...),
  such as the ISO form ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` current writers produce, are
  converted to UTC with their own offset. ``timestamp_ntz`` values must not carry a zone.
* **Binary**: writers store the bytes reinterpreted as a string. Spark and Delta Kernel
  decode them as UTF-8 (Spark's binary -> string cast), so by default the string's UTF-8
  bytes are the value: ``"😈"`` gives ``F0 9F 98 88`` as in the DAT ``multi_partitioned``
  expected data, and ``"\u0001\u0002"`` (JSON escapes in the log) gives ``01 02``. A
  value made only of literal ``\u00XX`` sequences (six characters per byte, what delta-rs
  writes) is decoded to those bytes. ``binary_encoding="latin-1"`` instead maps a value
  whose code points are all below 256 back byte per byte (for writers that turned each
  byte into one code point); it differs from UTF-8 only for code points 0x80-0xFF, which
  the conformance data does not contain, and would corrupt Spark-written values such as
  UTF-8 ``"é"``.
* Floats accept Java (``1.0E20``, ``NaN``, ``Infinity``, ``-Infinity``) and Python
  (``1e+20``, ``nan``, ``inf``) spellings; decimals accept plain and exponent forms
  (``0E-18``) and must fit the column's precision and scale exactly; integers accept an
  optional sign and decimal digits only; booleans are ``true``/``false`` in any case.

Example:
    >>> import pyarrow as pa
    >>> from lakequery.protocol.schema import PrimitiveType
    >>> parse_partition_values(pa.array(["1", "", None]), PrimitiveType("integer"), column="p")
    <pyarrow.lib.Int32Array object at ...>
    [
      1,
      null,
      null
    ]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, cast

import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import python_scalar
from lakequery.errors import SchemaError
from lakequery.protocol.schema import (
    DecimalType,
    DeltaType,
    PrimitiveType,
    to_arrow_type,
    type_to_json,
)

BinaryEncoding = Literal["utf-8", "latin-1"]

_INT_RE = r"^[+-]?[0-9]+$"
#: The directory value Hive-style layouts give a null partition value (``col=<this>``);
#: Hive readers (DuckDB's, Polars') read it back as NULL.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
#: A binary partition value spelled as one literal ``\u00XX`` escape per byte (what
#: delta-rs writes, and lakequery for bytes that are not UTF-8 text).
ESCAPED_BINARY_RE = r"^(\\u00[0-9A-Fa-f]{2})+$"
# A zone suffix right after a time of day: Z, +HH, +HHMM or +HH:MM.
_ZONE_RE = r"[0-9]:[0-9]{2}(:[0-9]{2}(\.[0-9]*)?)?\s*(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"
_SPACED_ZONE_RE = r"([0-9])\s+(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"
_STRING = pa.string()

_HEX = np.full(256, 0, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i


def _type_label(t: DeltaType) -> str:
    label = type_to_json(t)
    return label if isinstance(label, str) else str(label)


def _as_strings(values: Any) -> Any:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.nulls(0, _STRING)
    if pa.types.is_dictionary(values.type):
        values = pc.cast(values, values.type.value_type)
    if not pa.types.is_string(values.type):
        values = pc.cast(values, _STRING)
    return values


def _check(ok: Any, strings: Any, column: str, t: DeltaType) -> None:
    """Raise naming the first non-null value whose ``ok`` flag is false."""
    bad = pc.and_(pc.is_valid(strings), pc.invert(pc.fill_null(ok, _bool(False))))
    if pc.any(bad).as_py():
        shown = pc.filter(strings, bad)[0].as_py()
        raise SchemaError(
            f"partition column {column!r}: cannot parse {shown!r} as {_type_label(t)}"
        )


def _cast(
    strings: Any,
    target: Any,
    column: str,
    t: DeltaType,
    original: Any = None,
) -> Any:
    try:
        return pc.cast(strings, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        # Error path only: find the first value that fails on its own to name it.
        shown = (original if original is not None else strings).to_pylist()
        for value, text in zip(strings.to_pylist(), shown, strict=True):
            if value is None:
                continue
            try:
                pc.cast(pa.array([value], _STRING), target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as one:
                raise SchemaError(
                    f"partition column {column!r}: cannot parse {text!r} as {_type_label(t)}: {one}"
                ) from exc
        raise SchemaError(f"partition column {column!r}: {exc}") from exc


def _parse_bool(strings: Any, column: str, t: DeltaType) -> Any:
    low = pc.utf8_lower(strings)
    is_true = pc.equal(low, python_scalar("true", _STRING))
    _check(pc.or_(is_true, pc.equal(low, python_scalar("false", _STRING))), strings, column, t)
    return is_true


def _parse_timestamp(strings: Any, t: DeltaType, column: str) -> Any:
    if t == PrimitiveType("timestamp_ntz"):
        zoned = pc.match_substring_regex(strings, _ZONE_RE)
        _check(pc.invert(zoned), strings, column, t)
        return _cast(strings, pa.timestamp("us"), column, t)
    zoned = pc.fill_null(pc.match_substring_regex(strings, _ZONE_RE), _bool(True))
    z, empty = python_scalar("Z", _STRING), python_scalar("", _STRING)
    with_zone = pc.if_else(zoned, strings, pc.binary_join_element_wise(strings, z, empty))
    with_zone = pc.replace_substring_regex(with_zone, _SPACED_ZONE_RE, r"\1\2")
    return _cast(with_zone, pa.timestamp("us", tz="UTC"), column, t, original=strings)


def _decode_binary(strings: Any, encoding: str) -> Any:
    """Bytes of binary partition values (see the module docstring), vectorised."""
    n = len(strings)
    raw = pc.cast(strings, pa.binary())
    escaped = pc.fill_null(pc.match_substring_regex(strings, ESCAPED_BINARY_RE), _bool(False))
    if n == 0 or (encoding == "utf-8" and not pc.any(escaped).as_py()):
        return raw
    offsets = np.frombuffer(raw.buffers()[1], dtype=np.int32)[raw.offset : raw.offset + n + 1]
    offsets = offsets.astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    data_buf = raw.buffers()[2]
    if data_buf is None or start == end:
        return raw
    data = np.frombuffer(data_buf, dtype=np.uint8)[start:end]
    row = np.repeat(np.arange(n), np.diff(offsets))
    values = data.copy()
    keep = np.ones(data.size, dtype=bool)
    esc_rows = np.asarray(escaped.to_numpy(zero_copy_only=False), dtype=bool)
    esc = esc_rows[row]
    if encoding == "latin-1":
        # Rows whose code points are all < 256 have no UTF-8 lead byte >= 0xC4; in them a
        # two-byte sequence C2/C3 xx becomes the single byte it encodes.
        high_rows = np.zeros(n, dtype=bool)
        high_rows[row[data >= 0xC4]] = True
        latin = (~high_rows & ~esc_rows)[row]
        lead_idx = np.nonzero(latin & ((data == 0xC2) | (data == 0xC3)))[0]
        values[lead_idx] = ((data[lead_idx] & 0x1F) << 6) | (data[lead_idx + 1] & 0x3F)
        keep &= ~(latin & ((data & 0xC0) == 0x80))
    # Escaped rows: each "\u00XY" (6 bytes) becomes the byte 0xXY, kept at its last position.
    pos = np.arange(data.size) - (offsets[:-1] - start)[row]
    last_idx = np.nonzero(esc & (pos % 6 == 5))[0]
    values[last_idx] = (_HEX[data[last_idx - 1]] << 4) | _HEX[data[last_idx]]
    keep &= ~esc | (pos % 6 == 5)
    new_offsets = np.concatenate([[0], np.cumsum(np.bincount(row[keep], minlength=n))])
    buffers = [
        None,
        pa.py_buffer(new_offsets.astype(np.int32).tobytes()),
        pa.py_buffer(values[keep].tobytes()),
    ]
    out = pa.Array.from_buffers(pa.binary(), n, buffers)
    return pc.if_else(pc.is_valid(strings), out, python_scalar(None, pa.binary()))


def parse_partition_values(
    values: pa.Array[Any] | pa.ChunkedArray[Any],
    t: DeltaType,
    *,
    column: str,
    binary_encoding: BinaryEncoding = "utf-8",
) -> pa.Array[Any]:
    """Parse serialised partition values into an array of the column's logical Arrow type.

    Args:
        values: String values (null or ``""`` for NULL), as found in ``partitionValues``.
        t: The partition column's Delta type.
        column: Column name for error messages.
        binary_encoding: How ``binary`` values were turned into strings: ``"utf-8"``
            (Spark, Delta Kernel; the default) or ``"latin-1"`` (a value whose code points
            are all below 256 is mapped back byte per byte, any other value as UTF-8).

    Returns:
        An array of ``to_arrow_type(t)`` with one element per input value.

    Raises:
        SchemaError: A value does not parse (the message names column and value), or the
            type cannot be a partition column.
    """
    if binary_encoding not in ("utf-8", "latin-1"):
        raise ValueError(f"binary_encoding must be 'utf-8' or 'latin-1', not {binary_encoding!r}")
    return _parse(_as_strings(values), t, column, binary_encoding)  # type: ignore[no-any-return]


def _parse(strings: Any, t: DeltaType, column: str, binary_encoding: str) -> Any:
    present = pc.fill_null(
        pc.not_equal(pc.binary_length(strings), python_scalar(0, pa.int32())), _bool(False)
    )
    strings = pc.if_else(present, strings, python_scalar(None, _STRING))
    if not isinstance(t, PrimitiveType):
        raise SchemaError(f"partition column {column!r}: nested type cannot be a partition column")
    target = to_arrow_type(t)
    name = t.name
    if isinstance(t, DecimalType):
        return _cast(strings, target, column, t)
    if name == "string":
        return strings
    if name == "void":
        return pa.nulls(len(strings), pa.null())
    if name == "binary":
        return _decode_binary(strings, binary_encoding)
    if name == "boolean":
        return _parse_bool(strings, column, t)
    if name in ("byte", "short", "integer", "long"):
        _check(pc.match_substring_regex(strings, _INT_RE), strings, column, t)
        return _cast(pc.replace_substring_regex(strings, r"^\+", ""), target, column, t)
    if name in ("float", "double", "date"):
        return _cast(strings, target, column, t)
    if name in ("timestamp", "timestamp_ntz"):
        return _parse_timestamp(strings, t, column)
    raise SchemaError(f"partition column {column!r}: type {name} cannot be a partition column")


def partition_struct(
    partition_values: pa.Array[Any] | pa.ChunkedArray[Any],
    columns: Sequence[tuple[str, str, DeltaType]],
    *,
    binary_encoding: BinaryEncoding = "utf-8",
) -> pa.StructArray:
    """Typed partition columns from an ``add.partitionValues`` map column.

    Args:
        partition_values: ``map<string, string>`` (one map per file); keys are physical
            names under column mapping. A ``list<struct<key, value>>`` is accepted too.
        columns: ``(logical name, key in the map, Delta type)`` per partition column.
        binary_encoding: See :func:`parse_partition_values`.

    Returns:
        A struct array with one child per column, named by logical name, typed by
        :func:`~lakequery.protocol.schema.to_arrow_type`. A missing key reads as NULL.

    Raises:
        SchemaError: A value does not parse.
    """
    pv: Any = partition_values
    if isinstance(pv, pa.ChunkedArray):
        pv = pv.combine_chunks() if pv.num_chunks else pa.nulls(0, pa.map_(_STRING, _STRING))
    if pa.types.is_list(pv.type) or pa.types.is_large_list(pv.type):
        entries = pv.type.value_type
        if not pa.types.is_struct(entries) or entries.num_fields != 2:
            raise SchemaError(f"partitionValues must be a map, got {pv.type}")
        if pa.types.is_large_list(pv.type):
            pv = pc.cast(pv, pa.list_(pv.type.value_field))
        flat = pv.values
        pv = pa.MapArray.from_arrays(
            pv.offsets, flat.field(0), flat.field(1), mask=pc.is_null(pv) if pv.null_count else None
        )
    if not pa.types.is_map(pv.type):
        raise SchemaError(f"partitionValues must be a map, got {pv.type}")
    key_type = pv.type.key_type
    strings = [pc.map_lookup(pv, _key(key, key_type), "first") for _, key, _ in columns]
    return partition_struct_from_strings(
        strings, columns, length=len(pv), binary_encoding=binary_encoding
    )


def _bool(value: bool) -> pa.Scalar[Any]:
    return python_scalar(value, pa.bool_())


def _key(key: str, key_type: pa.DataType) -> pa.Scalar[Any]:
    # pa.scalar of a Python value imports pandas in a fresh process (0.15-0.2 s)
    return python_scalar(key, key_type) if key_type == _STRING else pa.scalar(key, key_type)


def partition_struct_from_strings(
    strings: Sequence[pa.Array[Any] | pa.ChunkedArray[Any]],
    columns: Sequence[tuple[str, str, DeltaType]],
    *,
    length: int,
    binary_encoding: BinaryEncoding = "utf-8",
    empty_is_null: bool = False,
) -> pa.StructArray:
    """Typed partition columns from the value of each column (one array per column, already
    looked up in ``partitionValues``; null where the key is missing). An array that already
    has the column's type (parsed upstream, e.g. cast by DuckDB) is taken as it is; string
    columns too when ``empty_is_null`` says ``''`` was already turned into NULL."""
    children = []
    fields = []
    for raw, (logical, _, t) in zip(strings, columns, strict=True):
        flat: Any = raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw
        target = to_arrow_type(t)
        if flat.type.equals(target) and (empty_is_null or not pa.types.is_string(target)):
            children.append(flat)
        else:
            children.append(
                parse_partition_values(flat, t, column=logical, binary_encoding=binary_encoding)
            )
        fields.append(pa.field(logical, target))
    result: Any
    if not children:
        result = pa.Array.from_buffers(pa.struct([]), length, [None], children=[])
    else:
        result = pa.StructArray.from_arrays(children, fields=fields)
    return cast("pa.StructArray", result)


__all__ = [
    "BinaryEncoding",
    "parse_partition_values",
    "partition_struct",
    "partition_struct_from_strings",
]
