"""Per-file statistics gathered from the in-memory data while it is written (digest §10).

Each batch handed to :meth:`StatsCollector.update` costs one ``min_max`` (and for floats one
NaN test) per statistics column; the running bounds are merged in Python per batch, never
per row, and the files are never read back.

Example:
    >>> import json, pyarrow as pa
    >>> from lakequery.protocol.schema import parse_schema
    >>> schema = parse_schema('{"type":"struct","fields":[{"name":"s","type":"string",'
    ...     '"nullable":true,"metadata":{}}]}')
    >>> collector = StatsCollector(stats_columns(schema))
    >>> collector.update(pa.table({"s": ["b", None, "a"]}))
    >>> json.loads(collector.to_json())
    {'numRecords': 3, 'minValues': {'s': 'a'}, 'maxValues': {'s': 'b'}, 'nullCount': {'s': 1}}
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.protocol.column_mapping import physical_name_map
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.schema import (
    DecimalType,
    DeltaType,
    PrimitiveType,
    StructType,
    is_void,
    leaf_paths,
)

_KINDS = {
    **dict.fromkeys(["byte", "short", "integer", "long"], "int"),
    **dict.fromkeys(["float", "double"], "float"),
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "string": "string",
}
_EPOCH = dt.datetime(1970, 1, 1)
_MAX_CHAR = "\U0010ffff"


@dataclass(frozen=True)
class StatsColumn:
    """One leaf column that gets statistics.

    Attributes:
        path: Logical path (struct field names from the top-level column down).
        physical: Physical path (keys of the stats JSON).
        kind: ``int``, ``float``, ``decimal``, ``date``, ``timestamp``, ``timestamp_ntz``,
            ``string`` (min/max and nullCount) or ``count`` (nullCount only).
    """

    path: tuple[str, ...]
    physical: tuple[str, ...]
    kind: str


def _kind(t: DeltaType) -> str:
    if isinstance(t, DecimalType):
        return "decimal"
    if isinstance(t, PrimitiveType):
        return _KINDS.get(t.name, "count")
    return "count"


def stats_columns(
    schema: StructType,
    partition_columns: Collection[str] = (),
    mode: str = "none",
    *,
    num_indexed_cols: int = 32,
    explicit: Sequence[tuple[str, ...]] | None = None,
) -> list[StatsColumn]:
    """The leaf columns that get statistics, in depth-first schema order.

    Args:
        schema: The table schema.
        partition_columns: Partition columns (never get statistics).
        mode: Column mapping mode (for the physical paths).
        num_indexed_cols: ``delta.dataSkippingNumIndexedCols`` (-1: all leaves).
        explicit: ``delta.dataSkippingStatsColumns`` paths; when given, exactly the leaves
            at or under these paths (matched case-insensitively) are used.

    Example:
        >>> from lakequery.protocol.schema import parse_schema
        >>> s = parse_schema('{"type":"struct","fields":['
        ...   '{"name":"a","type":"long","nullable":true,"metadata":{}},'
        ...   '{"name":"b","type":"boolean","nullable":true,"metadata":{}}]}')
        >>> [(c.path, c.kind) for c in stats_columns(s, num_indexed_cols=5)]
        [(('a',), 'int'), (('b',), 'count')]
        >>> [c.path for c in stats_columns(s, explicit=[("B",)])]
        [('b',)]
    """
    names = physical_name_map(schema, mode)
    leaves = [
        (path, t)
        for path, t in leaf_paths(schema)
        if path[0] not in partition_columns and not is_void(t)
    ]
    if explicit is not None:
        wanted = [tuple(p.lower() for p in e) for e in explicit]
        leaves = [
            (path, t)
            for path, t in leaves
            if any(tuple(p.lower() for p in path[: len(w)]) == w for w in wanted)
        ]
    elif num_indexed_cols >= 0:
        leaves = leaves[:num_indexed_cols]
    return [StatsColumn(path, names[path], _kind(t)) for path, t in leaves]


def configured_stats_columns(
    schema: StructType,
    partition_columns: Collection[str],
    mode: str,
    properties: TableProperties,
) -> list[StatsColumn]:
    """:func:`stats_columns` as a table's ``delta.dataSkippingNumIndexedCols`` and
    ``delta.dataSkippingStatsColumns`` choose them."""
    return stats_columns(
        schema,
        partition_columns,
        mode,
        num_indexed_cols=properties.num_indexed_cols,
        explicit=properties.stats_columns,
    )


# --- string truncation ------------------------------------------------------------------------


def _units(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def _is_high(units: bytes, i: int) -> bool:
    return 0xD800 <= int.from_bytes(units[2 * i : 2 * i + 2], "little") <= 0xDBFF


def _prefix(units: bytes, n: int) -> str:
    return units[: 2 * n].decode("utf-16-le", "surrogatepass")


def truncate_min(text: str, length: int = 32) -> str:
    """A lower bound of at most ``length`` UTF-16 code units (one more to keep a pair).

    Example:
        >>> truncate_min("abcdef", 3), truncate_min("ab\U0001f600c", 3)
        ('abc', 'ab😀')
    """
    units = _units(text)
    if len(units) // 2 <= length:
        return text
    n = length + 1 if _is_high(units, length - 1) else length
    return _prefix(units, n)


def truncate_max(text: str, length: int = 32) -> str | None:
    """An upper bound of ``text`` (in UTF-8 byte order) truncated near ``length`` units.

    A prefix followed by a tie-breaker (U+007F when the next character sorts below it,
    else U+10FFFF); runs of U+10FFFF are kept whole. None when no bound of at most
    ``2 * length`` units exists.

    Example:
        >>> truncate_max("abcdef", 3), truncate_max("abcé", 3) == "abc\U0010ffff"
        ('abc\\x7f', True)
        >>> truncate_max("a" + "\U0010ffff" * 4, 1) is None
        True
    """
    units = _units(text)
    total = len(units) // 2
    if total <= length:
        return text
    n = length + 1 if _is_high(units, length - 1) else length
    while n <= 2 * length:
        if n >= total:
            return text
        width = 2 if _is_high(units, n) else 1
        nxt = units[2 * n : 2 * (n + width)].decode("utf-16-le", "surrogatepass")
        if nxt == _MAX_CHAR:
            n += 2
            continue
        return _prefix(units, n) + ("\x7f" if ord(nxt[0]) < 0x7F else _MAX_CHAR)
    return None


# --- collection --------------------------------------------------------------------------------


class _Number(str):
    """A JSON number written verbatim (exact decimals)."""


def _leaf(data: pa.Table | pa.RecordBatch, path: Sequence[str]) -> Any:
    col: Any = data.column(path[0])
    for name in path[1:]:
        col = pc.struct_field(col, name)  # parent nulls propagate to the child
    return col


def _timestamp_text(micros: int, zone: str) -> str | None:
    try:
        value = _EPOCH + dt.timedelta(microseconds=micros - micros % 1000)
    except OverflowError:
        return None
    return value.isoformat(timespec="milliseconds") + zone


class _Acc:
    __slots__ = ("hi", "lo", "nan", "nulls")

    def __init__(self) -> None:
        self.lo: Any = None
        self.hi: Any = None
        self.nulls: int | None = 0  # None: unknown (footer without a null count)
        self.nan = False  # also set when the bounds are unknown: no min/max then


class StatsCollector:
    """Accumulates ``numRecords``, ``minValues``, ``maxValues`` and ``nullCount`` of one file.

    Args:
        columns: The statistics columns (see :func:`stats_columns`).
        string_prefix_length: ``delta.dataSkippingStringPrefixLength``.

    Example:
        >>> import pyarrow as pa
        >>> from lakequery.protocol.schema import parse_schema
        >>> s = parse_schema('{"type":"struct","fields":[{"name":"x","type":"double",'
        ...     '"nullable":true,"metadata":{}}]}')
        >>> c = StatsCollector(stats_columns(s))
        >>> c.update(pa.table({"x": [1.5, -2.0]})); c.update(pa.table({"x": [9.0]}))
        >>> c.to_json()
        '{"numRecords":3,"minValues":{"x":-2.0},"maxValues":{"x":9.0},"nullCount":{"x":0}}'
    """

    def __init__(self, columns: Sequence[StatsColumn], string_prefix_length: int = 32) -> None:
        self.columns = list(columns)
        self.prefix_length = max(1, string_prefix_length)
        self.num_records = 0
        self._acc = [_Acc() for _ in self.columns]

    def update(self, data: pa.Table | pa.RecordBatch) -> None:
        """Adds the rows of ``data`` (logical column names, table types)."""
        self.num_records += data.num_rows
        for col, acc in zip(self.columns, self._acc, strict=True):
            arr = _leaf(data, col.path)
            nulls = arr.null_count
            if acc.nulls is not None:
                acc.nulls += nulls
            if col.kind == "count" or nulls == len(arr) or acc.nan:
                continue
            if col.kind == "float" and pc.any(pc.is_nan(arr)).as_py():
                acc.nan = True
                continue
            if col.kind in ("timestamp", "timestamp_ntz", "date"):
                arr = pc.cast(arr, pa.int64() if col.kind != "date" else pa.int32())
            mm = pc.min_max(arr)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            acc.lo = lo if acc.lo is None or lo < acc.lo else acc.lo
            acc.hi = hi if acc.hi is None or hi > acc.hi else acc.hi

    def add_bounds(self, index: int, lo: Any, hi: Any, null_count: int | None) -> None:
        """Adds what is known of column ``index`` without reading its rows (Parquet footer
        statistics, ``lq.convert_to_delta``); rows are added to :attr:`num_records` by
        the caller.

        Args:
            index: position in the collector's columns.
            lo, hi: bounds in the form :meth:`update` accumulates (ints for integers,
                days for dates, microseconds for timestamps, ``Decimal``, ``str``); both
                None when the rows are all null; ``...`` (Ellipsis) when unknown, which
                leaves the column without min/max in this file.
            null_count: nulls in these rows; None when unknown (no nullCount then).
        """
        acc = self._acc[index]
        if null_count is None or acc.nulls is None:
            acc.nulls = None
        else:
            acc.nulls += null_count
        if lo is ... or hi is ...:
            acc.nan = True
        elif lo is not None and hi is not None and not acc.nan:
            acc.lo = lo if acc.lo is None or lo < acc.lo else acc.lo
            acc.hi = hi if acc.hi is None or hi > acc.hi else acc.hi

    def _json_value(self, kind: str, value: Any, upper: bool) -> Any:
        if kind == "float":
            if value in (float("inf"), float("-inf")):
                return "Infinity" if value > 0 else "-Infinity"
            return float(value)
        if kind == "decimal":
            return _Number(format(Decimal(value), "f"))
        if kind == "date":
            try:  # outside Python's years 1-9999 (as for timestamps): no bound
                return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
            except OverflowError:
                return None
        if kind in ("timestamp", "timestamp_ntz"):
            return _timestamp_text(value, "Z" if kind == "timestamp" else "")
        if kind == "string":
            if upper:
                return truncate_max(value, self.prefix_length)
            return truncate_min(value, self.prefix_length)
        return value

    def stats(self) -> dict[str, Any]:
        """The statistics as a JSON-ready dict (decimals as verbatim numbers)."""
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, Any] = {}
        for col, acc in zip(self.columns, self._acc, strict=True):
            if acc.nulls is not None:
                _put(nulls, col.physical, acc.nulls)
            if acc.lo is None or acc.nan:
                continue
            lo = self._json_value(col.kind, acc.lo, upper=False)
            hi = self._json_value(col.kind, acc.hi, upper=True)
            if lo is not None:
                _put(mins, col.physical, lo)
            if hi is not None:
                _put(maxs, col.physical, hi)
        return {
            "numRecords": self.num_records,
            "minValues": mins,
            "maxValues": maxs,
            "nullCount": nulls,
        }

    def to_json(self) -> str:
        """The compact ``add.stats`` JSON string."""
        stats = self.stats()
        if any(c.kind == "decimal" for c in self.columns):
            return _dump(stats)  # decimals are written as verbatim numbers
        # the same text as _dump in one call (one json.dumps per value cost ~0.1 ms a file)
        return json.dumps(stats, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _put(target: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def _dump(value: Any) -> str:
    if isinstance(value, Mapping):
        items = (f"{_dump(str(k))}:{_dump(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, _Number):
        return str.__str__(value)
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


__all__ = ["StatsCollector", "StatsColumn", "stats_columns", "truncate_max", "truncate_min"]
