"""Spark SQL functions whose DuckDB namesakes differ, respelled for DuckDB.

Generation expressions and CHECK constraints are Spark SQL (digest §14): a writer must
store the value Spark would compute, and accept the rows Spark accepts. DuckDB shares most
function names, but two common string functions disagree:

* ``concat(a, b, ...)`` is NULL in Spark when any argument is NULL; DuckDB's skips NULLs
  (``concat('abc', NULL)`` is ``'abc'`` there). It becomes ``CASE WHEN a IS NULL OR ...
  THEN NULL ELSE concat(a, b, ...) END``.
* ``substring(s, pos[, len])`` (and ``substr``) reads a position of 0 as 1 in Spark; DuckDB
  starts before the first character (``substring('abc', 0, 2)`` is ``'a'`` there, ``'ab'``
  in Spark). The position becomes ``CASE WHEN pos = 0 THEN 1 ELSE pos END``.

Calls are found outside quoted strings and identifiers, with nested calls respelled too.
Functions DuckDB lacks still fail to bind, and writes refuse them as an unsupported
feature.

Example:
    >>> spark_function_calls("concat(a, ', ', substr(b, 0, 2))")
    "(CASE WHEN (a) IS NULL OR (', ') IS NULL OR (substr(b, CASE WHEN (0) = 0 THEN 1 ELSE (0) END, 2)) IS NULL THEN NULL ELSE concat(a, ', ', substr(b, CASE WHEN (0) = 0 THEN 1 ELSE (0) END, 2)) END)"
"""

from __future__ import annotations

import re

_CALL = re.compile(r"(?<![\w.\"])(concat|substring|substr)\s*\(", re.IGNORECASE)
_QUOTES = "'\""


def _skip_quoted(sql: str, i: int) -> int:
    """The index after the quoted string or identifier starting at ``i`` (a doubled quote
    inside stays inside: the caller's SQL spells quotes the standard way)."""
    quote = sql[i]
    i += 1
    while i < len(sql):
        if sql[i] == quote:
            if i + 1 < len(sql) and sql[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return i


def _arguments(sql: str, start: int) -> tuple[list[str], int] | None:
    """The top-level arguments of the call whose ``(`` is just before ``start``, and the
    index after its ``)``; None when the parentheses do not close."""
    args: list[str] = []
    depth, i, begin = 0, start, start
    while i < len(sql):
        c = sql[i]
        if c in _QUOTES:
            i = _skip_quoted(sql, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                args.append(sql[begin:i].strip())
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append(sql[begin:i].strip())
            begin = i + 1
        i += 1
    return None


def spark_function_calls(sql: str) -> str:
    """``sql`` (quotes already in DuckDB's spelling) with ``concat`` and ``substring`` /
    ``substr`` calls given Spark's semantics (see the module docstring)."""
    out: list[str] = []
    i = 0
    while i < len(sql):
        c = sql[i]
        if c in _QUOTES:
            j = _skip_quoted(sql, i)
            out.append(sql[i:j])
            i = j
            continue
        m = _CALL.match(sql, i)
        if m is None:
            out.append(c)
            i += 1
            continue
        parsed = _arguments(sql, m.end())
        if parsed is None:
            out.append(sql[i:])
            break
        args, end = [spark_function_calls(a) for a in parsed[0]], parsed[1]
        name = m.group(1)
        call = f"{name}({', '.join(args)})"
        if name.lower() == "concat" and args != [""]:
            nulls = " OR ".join(f"({a}) IS NULL" for a in args)
            call = f"(CASE WHEN {nulls} THEN NULL ELSE {call} END)"
        elif name.lower() != "concat" and len(args) >= 2:
            args[1] = f"CASE WHEN ({args[1]}) = 0 THEN 1 ELSE ({args[1]}) END"
            call = f"{name}({', '.join(args)})"
        out.append(call)
        i = end
    return "".join(out)


__all__ = ["spark_function_calls"]
