"""SQL for per-file statistics values used by data skipping (digest §10).

Each statistic of a column becomes one DuckDB SQL expression over a table with one row
per data file. Bounds are brought into a *comparison domain* per column type, where the
stats JSON text, the typed ``stats_parsed`` value and a predicate literal compare
directly:

=====================  ===================================  =============================
column type            domain                               notes
=====================  ===================================  =============================
integers               ``BIGINT`` / ``UBIGINT``
float, double          ``FLOAT`` / ``DOUBLE``               NaN bounds become NULL
decimal(p, s)          ``DECIMAL(p, s)``                    parsed exactly by ``from_json``
                                                            (DuckDB 2; see below)
string                 ``VARCHAR`` (UTF-8 byte order)       bounds may be truncated
date                   ``DATE``
timestamp (any zone)   ``HUGEINT`` microseconds since the   max + 999 µs (ms truncation);
                       epoch (UTC instant / wall clock)     any ISO offset is honoured
=====================  ===================================  =============================

A NULL value means "unknown"; every pruning condition treats it as "may match".

Type widening (digest §14) keeps older files' statistics in the old type: integers,
decimals and dates read exactly in the wider domain; float statistics of a column widened
to double are read both ways and the looser bound is kept.

DuckDB 1.x reads every JSON number with a fraction or beyond 64 bits as a double before
casting it, so a decimal bound of more than 15 significant digits comes out rounded
(``12345678901234567890.123456789012345678`` as ``12345678901234567525.49...``) and a file
holding the exact value would be skipped. There, such bounds in JSON statistics are
unknown (typed ``stats_parsed`` values stay exact): no file is skipped on them.

DuckDB 2 reads the digits exactly, but a writer may have rounded them before: delta-rs
writes decimal statistics as doubles (``1234567890123456.78`` as ``1234567890123456.8``,
above the true minimum). So JSON bounds of more than 15 digits are widened by a
relative 1e-15 (more than a double's rounding), never cutting a matching file; an exact
writer's bounds lose pruning only for values within that margin. Bounds of scale 0 it
writes as 64-bit integers, saturated: 10**20 as ``9223372036854775807``. A decimal
column's JSON bound of scale 0 that is exactly 2**63 - 1 or -2**63 is therefore unknown.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

from lakequery import arrow_kernels as pc
from lakequery.protocol.arrow_types import category
from lakequery.protocol.predicate_ast import Literal
from lakequery.protocol.predicate_sql import sql_literal
from lakequery.protocol.sql_spelling import (
    DOUBLE_DIGITS,
    duckdb_type,
    json_decimal_exact,
    quote_identifier,
    quote_string,
)

BOUNDED = frozenset({"int", "float", "decimal", "string", "date", "timestamp", "timestamp_tz"})
"""Type categories for which Delta writers collect min/max statistics."""

# A zone suffix right after a time of day: Z, +HH, +HHMM or +HH:MM.
_ZONE_RE = r"[0-9]:[0-9]{2}(:[0-9]{2}(\.[0-9]*)?)?\s*(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.timezone.utc)
_MICRO = dt.timedelta(microseconds=1)


def _json_type(t: pa.DataType) -> str:
    cat = category(t)
    if cat == "int":
        return "UBIGINT" if pat.is_unsigned_integer(t) else "BIGINT"
    if cat == "decimal":
        return duckdb_type(t)
    return "VARCHAR"


def _widened_decimal(bound: str, t: pa.DataType, side: str) -> str:
    """A decimal JSON bound of more than :data:`DOUBLE_DIGITS` digits moved outwards by
    a relative 1e-15, at least one unit of its scale (see the module docstring); a bound
    the type cannot hold after widening is unknown."""
    precision, scale = int(getattr(t, "precision", 0)), int(getattr(t, "scale", 0))
    if precision <= DOUBLE_DIGITS:
        return bound
    wide = f"DECIMAL(38, {scale})"
    units = f"(ceil(abs(CAST({bound} AS DOUBLE)) * 1e-15 * {10**scale}) + 1)"  # of the scale
    slack = f"CAST({units} / {10**scale} AS {wide})"  # an integer of units: rounds back exact
    moved = f"CAST({bound} AS {wide}) {'-' if side == 'minValues' else '+'} {slack}"
    out = f"TRY(CAST({moved} AS {duckdb_type(t)}))"  # TRY: the addition may overflow too
    if scale == 0:  # a saturated 64-bit bound (delta-rs): unknown
        out = f"(CASE WHEN {bound} IN ({2**63 - 1}, {-(2**63)}) THEN NULL ELSE {out} END)"
    return out


def _text_to_domain(text: str, t: pa.DataType, side: str = "") -> str:
    """SQL converting stats text (from JSON or a string-typed struct) to the domain.

    ``side`` is ``minValues`` or ``maxValues`` for bounds. A double column may have been
    widened from float (type widening): its older files carry float statistics such as
    ``3.4`` whose float value (3.4000000953674316 as a double) differs from the double
    ``3.4``; the bound is then the looser of the two readings.
    """
    cat = category(t)
    if cat == "float":
        as_type = _no_nan(f"TRY_CAST({text} AS {duckdb_type(t)})")
        if not pat.is_float64(t) or side not in ("minValues", "maxValues"):
            return as_type
        as_float = f"CAST(TRY_CAST({text} AS FLOAT) AS DOUBLE)"
        as_float = f"CASE WHEN isfinite({as_float}) THEN {as_float} END"
        pick = "least" if side == "minValues" else "greatest"
        return f"{pick}({as_type}, {as_float})"
    if cat == "date":
        return f"TRY_CAST({text} AS DATE)"
    if cat == "timestamp_tz":
        upper = f"upper(trim({text}))"
        return (
            f"CASE WHEN regexp_matches({upper}, '{_ZONE_RE}') "
            f"THEN CAST(epoch_us(TRY_CAST({upper} AS TIMESTAMPTZ)) AS HUGEINT) "
            f"ELSE CAST(epoch_us(TRY_CAST({text} AS TIMESTAMP)) AS HUGEINT) END"
        )
    if cat == "timestamp":
        return f"CAST(epoch_us(TRY_CAST({text} AS TIMESTAMP)) AS HUGEINT)"
    return f"TRY_CAST({text} AS {_json_type(t)})"


def _typed_to_domain(value: str, source: pa.DataType, t: pa.DataType) -> str:
    """SQL converting a typed ``stats_parsed`` value to the domain of column type ``t``."""
    if category(source) == "string" and category(t) != "string":
        return _text_to_domain(value, t)
    cat = category(t)
    if cat in ("timestamp", "timestamp_tz"):
        if pat.is_timestamp(source):
            return f"CAST(epoch_us({value}) AS HUGEINT)"
        return "NULL"
    if cat == "float":
        return _no_nan(f"TRY_CAST({value} AS {duckdb_type(t)})")
    if cat == "int":
        return f"TRY_CAST({value} AS {_json_type(t)})"
    return f"TRY_CAST({value} AS {duckdb_type(t)})"


def _no_nan(value: str) -> str:
    return f"CASE WHEN isnan({value}) THEN NULL ELSE {value} END"


def domain_literal(lit: Literal) -> str:
    """A coerced, non-null literal as SQL in the comparison domain of its type."""
    value = lit.value
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            micros = (value - _EPOCH_UTC) // _MICRO
        else:
            micros = (value - _EPOCH) // _MICRO
        return f"CAST({micros} AS HUGEINT)"
    return sql_literal(lit)


def struct_child(array: pa.ChunkedArray[Any], names: Sequence[str]) -> pa.ChunkedArray[Any] | None:
    """The nested child ``names`` of a struct column (NULL where a parent is NULL)."""
    for name in names:
        t = array.type
        if not pat.is_struct(t) or t.get_field_index(name) < 0:
            return None
        array = pc.struct_field(array, [t.get_field_index(name)])
    return array


@dataclass
class StatsSources:
    """Where the statistics of the files live and which values a query reads.

    Attributes:
        files: The files table.
        use_json: ``files`` has a ``stats`` JSON column.
        json_structure: The ``from_json`` structure of the JSON values read so far.
        flat: Arrow columns to hand to DuckDB besides ``stats`` (``stats_parsed`` leaves
            and partition values), keyed by their SQL column name.
    """

    files: pa.Table
    use_json: bool = field(init=False)
    json_structure: dict[str, object] = field(default_factory=dict)
    flat: dict[str, pa.ChunkedArray[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.use_json = "stats" in self.files.column_names

    def _parsed(self, names: Sequence[str], alias: str) -> tuple[str, pa.DataType] | None:
        if "stats_parsed" not in self.files.column_names:
            return None
        child = struct_child(self.files.column("stats_parsed"), names)
        if child is None:
            return None
        self.flat[alias] = child
        return quote_identifier(alias), child.type

    def _json(self, names: Sequence[str], json_type: str) -> str | None:
        if not self.use_json:
            return None
        node = self.json_structure
        for name in names[:-1]:
            child = node.setdefault(name, {})
            if not isinstance(child, dict):
                return None
            node = child
        node[names[-1]] = json_type
        return "__j" + "".join(f"[{quote_string(n)}]" for n in names)

    def value(self, names: Sequence[str], t: pa.DataType, alias: str) -> str | None:
        """SQL of one statistic (``names`` like ``("minValues", "a")``) in t's domain.

        Args:
            names: Key path inside the statistics.
            t: The type whose domain the value is converted to (``int64`` for counts).
            alias: A unique SQL name for the value's ``stats_parsed`` column.

        Returns:
            The SQL, or ``None`` when no source can hold the statistic.
        """
        json_type = _json_type(t)
        rounded = category(t) == "decimal" and not json_decimal_exact(
            int(getattr(t, "precision", 0))
        )
        raw = self._json(names, json_type) if not rounded else None
        from_json = None
        if rounded and self.use_json:
            from_json = f"CAST(NULL AS {json_type})"  # unknown (see the module docstring)
        elif raw is not None:
            from_json = _text_to_domain(raw, t, names[0]) if json_type == "VARCHAR" else raw
        if from_json and category(t) == "decimal" and names[0] in ("minValues", "maxValues"):
            from_json = _widened_decimal(from_json, t, names[0])
        parsed = self._parsed(names, alias)
        from_parsed = _typed_to_domain(parsed[0], parsed[1], t) if parsed else None
        if from_json and from_parsed:
            return f'(CASE WHEN "stats" IS NOT NULL THEN {from_json} ELSE {from_parsed} END)'
        return from_json or from_parsed

    def json_projection(self) -> str | None:
        """The SQL computing ``__j`` (the parsed JSON statistics), if any is read."""
        if not self.use_json or not self.json_structure:
            return None
        structure = quote_string(json.dumps(self.json_structure))
        return f'TRY(from_json("stats", {structure}))'
