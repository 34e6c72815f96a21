"""How DuckDB SQL spells primitive Arrow types, identifiers and strings: shared by the
predicate renderer (:mod:`lakequery.protocol.predicate_sql`) and the engines'
:mod:`lakequery.engines.sql_types`, and free of the predicate language. Also which JSON
numbers DuckDB's ``from_json`` reads exactly (:func:`json_decimal_exact`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.types as pat

from lakequery.errors import PredicateError
from lakequery.protocol.arrow_types import category, decimal_params, timestamp_params

_INT_NAMES = {
    (8, True): "TINYINT",
    (16, True): "SMALLINT",
    (32, True): "INTEGER",
    (64, True): "BIGINT",
    (8, False): "UTINYINT",
    (16, False): "USMALLINT",
    (32, False): "UINTEGER",
    (64, False): "UBIGINT",
}
_TIMESTAMP_NAMES = {
    "s": "TIMESTAMP_S",
    "ms": "TIMESTAMP_MS",
    "us": "TIMESTAMP",
    "ns": "TIMESTAMP_NS",
}


def duckdb_type(t: pa.DataType) -> str:
    """The DuckDB SQL type name of an Arrow type.

    Args:
        t: A primitive Arrow type.

    Returns:
        E.g. ``BIGINT``, ``DECIMAL(10,2)``, ``VARCHAR``, ``TIMESTAMPTZ``.

    Raises:
        PredicateError: The type has no DuckDB literal form here (nested, time, ...).
    """
    cat = category(t)
    if cat == "int":
        return _INT_NAMES[(t.bit_width, pat.is_signed_integer(t))]
    if cat == "float":
        return "DOUBLE" if pat.is_float64(t) else "FLOAT"
    if cat == "decimal":
        precision, scale = decimal_params(t)
        if precision > 38:
            raise PredicateError(str(t), "DuckDB decimals have at most 38 digits")
        return f"DECIMAL({precision},{scale})"
    if cat == "timestamp_tz":
        return "TIMESTAMPTZ"
    if cat == "timestamp":
        return _TIMESTAMP_NAMES[timestamp_params(t)[0]]
    named = {"bool": "BOOLEAN", "string": "VARCHAR", "binary": "BLOB", "date": "DATE"}
    if cat in named:
        return named[cat]
    raise PredicateError(str(t), f"type {t} is not supported in predicates")


def quote_identifier(name: str) -> str:
    """Double-quote a SQL identifier (doubling embedded quotes)."""
    return '"' + name.replace('"', '""') + '"'


def quote_string(value: str) -> str:
    """A SQL string literal; NUL characters are spliced in with ``chr(0)``."""
    parts = ["'" + part.replace("'", "''") + "'" for part in value.split("\x00")]
    return parts[0] if len(parts) == 1 else "(" + " || chr(0) || ".join(parts) + ")"


def string_list(values: Sequence[str]) -> str:
    """A DuckDB ``VARCHAR[]`` expression of ``values`` (file lists of ``read_parquet``,
    ``read_ndjson_objects`` and the like).

    From :data:`SPLIT_LIST_MIN` values on, the values are one string literal split at
    newlines, not a list of literals: DuckDB parses, copies and binds one constant instead
    of one per value (a ``read_parquet`` of 10,000 files bound ~0.15 s faster, and every
    query over it binds it again), and the quoting runs once over the joined text. Fewer
    values, and values holding a newline or a NUL, are spelled as a list of one literal
    each (a call of ``string_split`` binds ~20-40 µs slower than a list of one literal).

    Example:
        >>> string_list(["/t/a.json", "/t/it's.json"])
        "['/t/a.json', '/t/it''s.json']"
    """
    joined = "\n".join(values)
    if len(values) < SPLIT_LIST_MIN or joined.count("\n") != len(values) - 1 or "\x00" in joined:
        return "[" + ", ".join(quote_string(v) for v in values) + "]"
    return "string_split('" + joined.replace("'", "''") + "', chr(10))"


#: From how many values :func:`string_list` spells one split literal (measured break-even
#: of binding ``read_parquet`` over either form: 8 files on DuckDB 1.5 and 2.0).
SPLIT_LIST_MIN = 8


#: Significant digits a double keeps through a round trip from decimal text.
DOUBLE_DIGITS = 15


@functools.cache
def json_decimals_exact() -> bool:
    """Whether DuckDB's ``from_json`` reads a JSON number into a ``DECIMAL`` exactly
    (DuckDB 2; DuckDB 1.x goes through a double)."""
    import duckdb

    return int(duckdb.__version__.split(".", 1)[0]) >= 2


def json_decimal_exact(precision: int) -> bool:
    """Whether a JSON decimal bound of ``precision`` digits reads exactly: always up to
    :data:`DOUBLE_DIGITS`, beyond only where :func:`json_decimals_exact`."""
    return precision <= DOUBLE_DIGITS or json_decimals_exact()


#: The scheme and slashes DuckDB may respell in the file names it reports (``filename``,
#: ``parquet_schema``'s ``file_name``: ``x://a`` comes back as ``x:///a`` from some fsspec
#: filesystems): :func:`file_key` leaves them out.
FILE_SCHEME = r"^[A-Za-z][A-Za-z0-9+.-]*:/+"


def file_key(location: str) -> str:
    """A DuckDB path as a key that matches the file names DuckDB reports for it."""
    return re.sub(FILE_SCHEME, "", location)


def glob_literal(path: str) -> str:
    """A path DuckDB's file globbing matches literally (``*``, ``?`` and ``[`` escaped as
    one-character classes); the ``filename`` column still reports the plain path."""
    return path.translate(_GLOB_ESCAPES)


def glob_list_sql(paths: Sequence[str]) -> str:
    """A DuckDB ``VARCHAR[]`` expression of the paths (:func:`string_list`), each escaped
    as by :func:`glob_literal`: every file list DuckDB reads (data files, commits,
    checkpoints), since DuckDB globs each entry (through fsspec on object stores, where
    ``x?/t/...`` also matched a sibling table's ``xy/t/...``).

    Example:
        >>> glob_list_sql(["/t/a.parquet", "/t/it's[1].parquet"])
        "['/t/a.parquet', '/t/it''s[[]1].parquet']"
    """
    joined = "".join(paths)
    if "*" in joined or "?" in joined or "[" in joined:  # rare: escaped path by path
        return string_list([glob_literal(p) for p in paths])
    return string_list(paths)


_GLOB_ESCAPES = str.maketrans({"*": "[*]", "?": "[?]", "[": "[[]"})
