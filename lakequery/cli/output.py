"""Printing results: rich tables for people, JSON for programs.

Decision: on a terminal rich chooses colours and width; elsewhere (pipes, files, tests)
the output is plain text with no control characters, 200 columns wide so tables are not
folded. JSON goes to stdout as one document (``stream`` prints one line per row).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from rich.console import Console


def console() -> Console:
    """A console on stdout: styled on a terminal, plain elsewhere, where lines are as long
    as tables are wide. Text is never read as rich markup or emoji codes (a value
    ``[red]x`` or ``:cat:`` prints as itself)."""
    from rich.console import Console

    tty = sys.stdout.isatty()
    return Console(
        file=sys.stdout,
        width=None if tty else _PIPED_WIDTH,
        soft_wrap=not tty,
        markup=False,
        emoji=False,
        highlight=False,
    )


#: The line width of output that is not a terminal: tables keep their natural width.
_PIPED_WIDTH = 1_000_000

#: Below this width a column's values would be folded into slivers: on a terminal too
#: narrow for every column at it, rows are printed one field per line instead.
_MIN_COLUMN_WIDTH = 8


def plain(value: Any) -> Any:
    """``value`` as JSON-compatible data (dataclasses, times, decimals, bytes)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):  # exact: integers as numbers, fractions as text
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE[str(value)]  # JSON has no NaN or infinities: their names
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(plain(value), ensure_ascii=False, allow_nan=False) + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same number
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(plain(value), ensure_ascii=False)
    return str(plain(value))


def print_mapping(title: str, values: Mapping[str, Any]) -> None:
    """Two columns, one row per key."""
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in values.items():
        table.add_row(key, _cell(value))
    console().print(table)


def print_rows(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None
) -> None:
    """A table with a header."""
    from rich.table import Table

    out = console()
    if len(columns) * (_MIN_COLUMN_WIDTH + 3) > out.width:
        _print_records(out, columns, rows, title)
        return
    table = Table(title=title, title_justify="left")
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(v) for v in row))
    out.print(table)


def _print_records(
    out: Console, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None
) -> None:
    """Rows too wide for the terminal: each as a two-column table of name and value."""
    from rich.table import Table

    if title:
        out.print(title)
    for n, row in enumerate(rows, start=1):
        table = Table(title=f"row {n}", title_justify="left", show_header=False)
        table.add_column("column", style="bold")
        table.add_column("value", overflow="fold")
        for name, value in zip(columns, row, strict=True):
            table.add_row(name, _cell(value))
        out.print(table)


def _python_values(column: pa.ChunkedArray[Any]) -> list[Any]:
    """A column's values as Python objects; a column holding a value Python's types
    cannot (a date after year 9999, DuckDB's infinite dates), at any depth, with its
    dates and times as Arrow's text of them."""
    import pyarrow as pa

    try:
        return column.to_pylist()
    except (OverflowError, ValueError):
        if pa.types.is_date(column.type) or pa.types.is_timestamp(column.type):
            return _duckdb_text(column)
        as_text: Any = column.cast(_times_as_text(column.type))
        text: list[Any] = as_text.to_pylist()
        return text


def _duckdb_text(column: pa.ChunkedArray[Any]) -> list[Any]:
    """Dates and times as DuckDB prints them, in UTC: years past 9999 (``40000-01-01``)
    and DuckDB's ``infinity`` / ``-infinity``, where Arrow's text of them is ``<value out
    of range: N>``."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.register("shown", pa.table({"v": column}))
        return [v for (v,) in con.sql("SELECT CAST(v AS VARCHAR) FROM shown").fetchall()]
    finally:
        con.close()


def _times_as_text(t: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    from lakequery.protocol.arrow_types import with_children

    if pa.types.is_temporal(t):
        return pa.string()
    return with_children(t, lambda f: f.with_type(_times_as_text(f.type)))


def _shown_values(column: pa.ChunkedArray[Any]) -> list[Any]:
    """A column's values for the table view: ``float`` (32-bit) values in their own
    shortest text (as Python floats, 0.1 would show as 0.10000000149011612)."""
    import pyarrow as pa

    if pa.types.is_float32(column.type):
        shown: list[Any] = column.cast(pa.string()).to_pylist()
        return shown
    return _python_values(column)


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` with repeats renamed ``name_1``, ``name_2``... (as DuckDB names the
    columns of a table made from such a query): JSON objects keep one value per key."""
    given, used, out = set(names), set[str](), []
    for name in names:
        new, i = name, 0
        while new in used or (i > 0 and new in given):
            i += 1
            new = f"{name}_{i}"
        used.add(new)
        out.append(new)
    return out


def arrow_records(data: pa.Table) -> list[dict[str, Any]]:
    """An Arrow table's rows as JSON objects (repeated column names made unique)."""
    names = unique_names(data.column_names)
    columns = [_python_values(c) for c in data.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def print_arrow(data: pa.Table, *, title: str | None = None) -> None:
    """An Arrow table's rows."""
    columns = data.column_names
    values = [_shown_values(c) for c in data.columns]
    print_rows(columns, zip(*values, strict=True), title=title)
    if data.num_rows == 0:
        console().print("(no rows)")


def print_line(text: str) -> None:
    console().print(text, highlight=False)


def emit_result(opts_json: bool, title: str, result: Any) -> None:
    """A command's result object (a dataclass): JSON or a key/value table."""
    data = plain(result)
    if opts_json:
        print_json(data)
    else:
        print_mapping(title, data if isinstance(data, Mapping) else {"result": data})


def emit_arrow(opts_json: bool, data: pa.Table, *, title: str | None = None) -> None:
    """Rows: a JSON list of objects, or a table."""
    if opts_json:
        print_json(arrow_records(data))
    else:
        print_arrow(data, title=title)
