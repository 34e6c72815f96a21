"""Partition values on the write side: strings (§9.1), directories (§9.2), ``add.path`` (§9.3).

Rows are grouped by their partition values first (vectorised: dictionary encoding, one
sort, zero-copy slices), so serialization only ever sees the distinct values.

Example:
    >>> import pyarrow as pa
    >>> from lakequery.protocol.schema import PrimitiveType
    >>> serialize_partition_values(pa.array([1e20, 0.0, None]), PrimitiveType("double"), "x")
    ['1.0E20', '0.0', None]
    >>> directory = partition_directory([("p", "US/East")])
    >>> directory, uri_encode_path(directory + "/part-0.parquet")
    ('p=US%2FEast', 'p=US%252FEast/part-0.parquet')
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import int64_array, python_scalar
from lakequery.errors import SchemaError
from lakequery.protocol.partitions import ESCAPED_BINARY_RE, HIVE_NULL
from lakequery.protocol.schema import DecimalType, DeltaType, PrimitiveType
from lakequery.row_grouping import group_rows

# Hive's list starts at 0x01; a NUL cannot be in a file name, so it is escaped as well
_HIVE_CHARS = [*range(0x00, 0x20), *map(ord, "\"#%'*/:=?\\{[]^"), 0x7F]
_HIVE_TABLE = {c: f"%{c:02X}" for c in _HIVE_CHARS}
_URI_CHARS = [*range(0x00, 0x20), *map(ord, ' %"#<>?[\\]^`{|}'), 0x7F]
_URI_TABLE = {c: f"%{c:02X}" for c in _URI_CHARS}

PartitionKey = tuple[str | None, ...]


# --- §9.1 values --------------------------------------------------------------------------


def java_float_string(value: float, *, single: bool = False) -> str:
    """Java's ``Double.toString`` (or ``Float.toString`` when ``single``) of a number.

    Shortest round-tripping digits; plain notation for ``1e-3 <= |x| < 1e7``, otherwise
    ``d.dddE<n>``; always at least one fractional digit.

    Example:
        >>> [java_float_string(x) for x in (1e20, 0.5, -0.0, 1e-5, 123.0, float("-inf"))]
        ['1.0E20', '0.5', '-0.0', '1.0E-5', '123.0', '-Infinity']
        >>> java_float_string(0.1, single=True)
        '0.1'
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    number: Any = np.float32(value) if single else np.float64(value)
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return str(np.format_float_positional(number, unique=True, trim="0"))
    text = np.format_float_scientific(number, unique=True, trim="0", exp_digits=1)
    mantissa, exponent = text.split("e")
    return f"{mantissa}E{int(exponent)}"


def _strings_or_null(arr: Any) -> Any:
    """Empty strings become null: Delta cannot tell them apart in partition values."""
    # scalars from buffers: pa.scalar of a Python value makes pyarrow import pandas
    empty = pc.equal(pc.binary_length(arr), python_scalar(0, pa.int32()))
    return pc.if_else(empty, pa.nulls(1, arr.type)[0], arr)


_ESCAPES_ONLY = re.compile(ESCAPED_BINARY_RE)


def binary_partition_string(value: bytes) -> str:
    r"""The ``partitionValues`` string of one binary value: its UTF-8 text, as Spark's
    binary-to-string cast gives, when the bytes are UTF-8 without a NUL; otherwise one
    ``\u00XX`` escape per byte, as delta-rs writes. Readers decode both forms
    (:mod:`lakequery.protocol.partitions`), so no byte is lost: Spark's own cast would
    put U+FFFD in place of bytes that are not UTF-8. Text that itself consists of such
    escapes is escaped too, else it would read back as the bytes it spells.

    Example:
        >>> binary_partition_string(b"caf\xc3\xa9"), binary_partition_string(b"\xff\x00")
        ('café', '\\u00FF\\u0000')
    """
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text or _ESCAPES_ONLY.match(text):
        return "".join(f"\\u{b:04X}" for b in value)
    return text


#: The values a date or timestamp partition value can spell (years 0001-9999, the
#: four-digit years of §9.1's formats; readers parse no other): days and microseconds
#: since the epoch.
_DAYS = (-719_162, 2_932_896)
_MICROS = (-62_135_596_800_000_000, 253_402_300_799_999_999)


def _check_range(values: Any, name: str, column: str) -> None:
    """Refuses a date or timestamp outside the years 0001-9999 (a directory and a log
    entry that no reader, lakequery included, could parse back)."""
    unit = pa.int32() if name == "date" else pa.int64()
    if name != "date":
        values = pc.cast(values, pa.timestamp("us", values.type.tz))
    counts = pc.cast(values, unit)
    lo, hi = _DAYS if name == "date" else _MICROS
    low = pc.less(counts, python_scalar(lo, unit))
    high = pc.greater(counts, python_scalar(hi, unit))
    bad = pc.or_(low, high)
    if pc.any(bad).as_py():
        shown = pc.filter(counts, bad)[0]
        what = "days" if name == "date" else "microseconds"
        raise SchemaError(
            f"partition column {column!r}: {shown} {what} from 1970-01-01 is outside the "
            "years 0001-9999 that a partition value can hold"
        )


def _serialize(values: Any, t: DeltaType, column: str) -> Any:
    name = t.name if isinstance(t, PrimitiveType) else ""
    if name in ("date", "timestamp", "timestamp_ntz") and values.null_count < len(values):
        _check_range(values, name, column)
    if name in ("float", "double"):
        single = name == "float"
        texts = [
            None if v is None else java_float_string(v, single=single) for v in values.to_pylist()
        ]
        return pa.array(texts, pa.string())
    if name == "timestamp":
        return pc.strftime(pc.cast(values, pa.timestamp("us", "UTC")), format="%Y-%m-%dT%H:%M:%SZ")
    if name == "timestamp_ntz":
        text = pc.strftime(pc.cast(values, pa.timestamp("us")), format="%Y-%m-%d %H:%M:%S")
        return pc.replace_substring_regex(text, r"\.000000$", "")
    if name == "binary":
        texts = [None if v is None else binary_partition_string(v) for v in values.to_pylist()]
        return _strings_or_null(pa.array(texts, pa.string()))
    if name == "string":
        return _strings_or_null(pc.cast(values, pa.string()))
    if isinstance(t, DecimalType):  # plain notation at the full scale (Arrow's cast: 0E-18)
        texts = [None if v is None else format(v, "f") for v in values.to_pylist()]
        return pa.array(texts, pa.string())
    if name in (
        "byte",
        "short",
        "integer",
        "long",
        "boolean",
        "date",
    ):
        return pc.cast(values, pa.string())
    raise ValueError(f"cannot partition by a column of type {name or t!r}")


def serialize_partition_values(
    values: pa.Array[Any], t: DeltaType, column: str
) -> list[str | None]:
    """The ``partitionValues`` strings of some (distinct) values of a partition column.

    Args:
        values: The values, of the column's logical Arrow type.
        t: The column's Delta type (a primitive type).
        column: The column's name, for errors.

    Returns:
        One string per value; None for null and for empty strings/binaries.

    Raises:
        ValueError: The type cannot be a partition column.
        SchemaError: A date or timestamp lies outside the years 0001-9999.

    Example:
        >>> import datetime as dt
        >>> from lakequery.protocol.schema import PrimitiveType
        >>> ts = pa.array([dt.datetime(2024, 6, 15, 19, 30, 45)], pa.timestamp("us", "UTC"))
        >>> serialize_partition_values(ts, PrimitiveType("timestamp"), "ts")
        ['2024-06-15T19:30:45.000000Z']
    """
    out: list[str | None] = _serialize(values, t, column).to_pylist()
    return out


# --- §9.2 / §9.3 paths ---------------------------------------------------------------------


def hive_escape(text: str) -> str:
    """Hive/Spark escaping of a partition column name or value in a directory name.

    Example:
        >>> hive_escape("a{b:c}%")
        'a%7Bb%3Ac}%25'
    """
    return text.translate(_HIVE_TABLE)


def directory_value(value: str | None, t: DeltaType) -> str | None:
    """The value shown in a directory name: timestamps in Spark's (UTC) session form.

    Example:
        >>> from lakequery.protocol.schema import PrimitiveType
        >>> directory_value("2024-06-15T19:30:45.000000Z", PrimitiveType("timestamp"))
        '2024-06-15 19:30:45'
    """
    if value is None or not (isinstance(t, PrimitiveType) and t.name == "timestamp"):
        return value
    text = value.removesuffix("Z").replace("T", " ", 1)
    return text.removesuffix(".000000")


def partition_directory(values: Sequence[tuple[str, str | None]]) -> str:
    """The Hive-style relative directory ``name=value/...`` of partition values.

    Args:
        values: ``(column name, directory value)`` pairs in partition column order.

    Example:
        >>> partition_directory([("a", None), ("b b", "x=y")])
        'a=__HIVE_DEFAULT_PARTITION__/b b=x%3Dy'
    """
    parts = [
        f"{hive_escape(name)}={HIVE_NULL if value is None or value == '' else hive_escape(value)}"
        for name, value in values
    ]
    return "/".join(parts)


def uri_encode_path(path: str) -> str:
    """The second, URI-level encoding that turns a relative storage path into ``add.path``.

    Example:
        >>> uri_encode_path("p=100%2525/p=hello world/p=a}b")
        'p=100%252525/p=hello%20world/p=a%7Db'
    """
    return path.translate(_URI_TABLE)


# --- grouping -------------------------------------------------------------------------------


def _group_column(arr: Any) -> Any:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
        arr = _strings_or_null(arr)
    return arr


def split_by_partition(
    batch: pa.RecordBatch, columns: Sequence[str], types: Sequence[DeltaType]
) -> Iterator[tuple[PartitionKey, pa.RecordBatch]]:
    """Splits a batch into one sub-batch per combination of partition values.

    Rows are grouped by :func:`lakequery.row_grouping.group_rows`; only the distinct
    values are serialized.

    Args:
        batch: Data with the (logical) partition columns.
        columns: Partition column names.
        types: Their Delta types.

    Yields:
        ``(serialized values, rows)`` per group, values in ``columns`` order.

    Example:
        >>> from lakequery.protocol.schema import PrimitiveType
        >>> b = pa.record_batch({"p": ["x", "y", "x", ""], "v": [1, 2, 3, 4]})
        >>> [(k, g.column("v").to_pylist())
        ...  for k, g in split_by_partition(b, ["p"], [PrimitiveType("string")])]
        [(('x',), [1, 3]), (('y',), [2]), ((None,), [4])]
    """
    if not columns:
        yield (), batch
        return
    if batch.num_rows == 0:
        return
    groups = group_rows([_group_column(batch.column(name)) for name in columns])
    # only the distinct values are serialized
    strings = [
        serialize_partition_values(d, t, c)
        for d, t, c in zip(groups.dictionaries, types, columns, strict=True)
    ]

    def values(g: int) -> PartitionKey:
        return tuple(s[groups.code(c, g)] for c, s in enumerate(strings))

    if groups.num_groups == 1:
        yield values(0), batch
        return
    taken = pc.take(batch, int64_array(groups.order))
    for g in range(groups.num_groups):
        lo, hi = int(groups.starts[g]), int(groups.starts[g + 1])
        yield values(g), taken.slice(lo, hi - lo)


__all__ = [
    "HIVE_NULL",
    "PartitionKey",
    "directory_value",
    "hive_escape",
    "java_float_string",
    "partition_directory",
    "serialize_partition_values",
    "split_by_partition",
    "uri_encode_path",
]
