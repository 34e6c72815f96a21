"""Column invariants, CHECK constraints and generated columns, enforced per batch (§14).

The expressions are Spark SQL; they are evaluated by DuckDB over each Arrow batch after
a light translation (backtick identifiers, double-quoted string literals, ``<=>``).
Every batch costs one aggregate query; an offending row is fetched only on failure.
Generated columns missing from the input are computed with their expression.

Example:
    >>> import pyarrow as pa
    >>> from lakequery.protocol.schema import parse_schema
    >>> schema = parse_schema('{"type":"struct","fields":['
    ...   '{"name":"a","type":"long","nullable":true,"metadata":{}},'
    ...   '{"name":"b","type":"long","nullable":true,'
    ...   '"metadata":{"delta.generationExpression":"a * 2"}}]}')
    >>> checker = ConstraintChecker(schema, {"delta.constraints.positive": "a > 0"})
    >>> batch = pa.record_batch({"a": [1, 2], "b": pa.nulls(2, pa.int64())})
    >>> checker.apply(batch, missing=["b"]).column("b").to_pylist()
    [2, 4]
    >>> try:
    ...     checker.apply(pa.record_batch({"a": [1, -1], "b": [2, -2]}))
    ... except ConstraintViolationError as exc:
    ...     print(exc.constraint, "|", exc.detail)
    positive | offending row: {'a': -1, 'b': -2}
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.errors import ConstraintViolationError, SchemaMismatchError, UnsupportedFeatureError
from lakequery.protocol.schema import StructType, iter_fields, to_arrow_type
from lakequery.writer.spark_functions import spark_function_calls

INVARIANTS_KEY = "delta.invariants"
GENERATION_KEY = "delta.generationExpression"
CHECK_PREFIX = "delta.constraints."
_VIEW = "__lq_rows"
_GEN = "generatedColumns"
_DETAIL_CHARS = 500

_TOKENS = re.compile(
    r"""(?P<single>'(?:[^'\\]|\\.|'')*')"""
    r"""|(?P<double>"(?:[^"\\]|\\.|"")*")"""
    r"""|(?P<tick>`(?:[^`]|``)*`)"""
    r"""|(?P<nse><=>)""",
    re.DOTALL,
)


#: Spark's backslash escapes in string literals (``\\%`` and ``\\_`` stay as written, for
#: LIKE); any other escaped character is itself.
_SPARK_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_SPARK_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[0-3][0-7]{2}|.)", re.DOTALL)
_LIKE_BEFORE = re.compile(r"(?i)\b(?:like|ilike)\s*$")
#: Quoted text, or a subscript (group 1 set when its key is a string: a map lookup, the
#: same in both dialects; a number may index an array, from 0 in Spark and 1 in DuckDB).
_SUBSCRIPT = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|\[\s*(')?""")


def _spark_unescape(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        if len(code) == 3:
            return chr(int(code, 8))
        if code in "%_":
            return "\\" + code
        return _SPARK_ESCAPES.get(code, code)

    return _SPARK_ESCAPE.sub(one, body)


def spark_to_duckdb(sql: str, *, feature: str = "checkConstraints") -> str:
    """Translates the Spark SQL spellings DuckDB does not share.

    Backtick-quoted identifiers become double-quoted ones; string literals (single- or
    double-quoted, Spark's backslash escapes decoded: ``\\t``, ``\\u00e9``, octal ``\\101``)
    become standard single-quoted ones; a LIKE pattern gets Spark's default escape
    character (``ESCAPE '\\'``); ``<=>`` becomes ``IS NOT DISTINCT FROM``; and ``concat`` /
    ``substring`` calls get Spark's semantics (:mod:`lakequery.writer.spark_functions`).

    Raises:
        UnsupportedFeatureError: (for ``feature``) an ``x[i]`` subscript that is not a
            string key: Spark's arrays count from 0 and DuckDB's lists from 1, and the
            text does not say whether ``x`` is an array or a map.

    Example:
        >>> spark_to_duckdb('`my col` <=> "it\\'s"')
        '"my col"  IS NOT DISTINCT FROM  \\'it\\'\\'s\\''
        >>> spark_to_duckdb("code NOT LIKE '%\\\\_%'")
        "code NOT LIKE '%\\\\_%' ESCAPE '\\\\'"
    """

    def repl(m: re.Match[str]) -> str:
        kind, text = m.lastgroup, m.group(0)
        if kind == "tick":
            return '"' + text[1:-1].replace("``", "`").replace('"', '""') + '"'
        if kind == "nse":
            return " IS NOT DISTINCT FROM "
        body = text[1:-1]
        body = body.replace("''", "'") if kind == "single" else body.replace('""', '"')
        literal = "'" + _spark_unescape(body).replace("'", "''") + "'"
        pattern = _LIKE_BEFORE.search(m.string, 0, m.start()) is not None
        if pattern and not m.string[m.end() :].lstrip().upper().startswith("ESCAPE"):
            literal += " ESCAPE '\\'"
        return literal

    translated = _TOKENS.sub(repl, sql)
    if any(m.group(1) is None for m in _SUBSCRIPT.finditer(translated) if m.group(0)[0] == "["):
        raise UnsupportedFeatureError(
            feature,
            operation="write",
            detail=f"a subscript in {sql!r:.120} (Spark arrays count from 0, DuckDB's from 1)",
        )
    return spark_function_calls(translated)


@dataclass(frozen=True)
class Constraint:
    """One rule every written row must satisfy.

    Attributes:
        name: Constraint name (CHECK), ``invariant(<column>)`` or ``generated(<column>)``.
        expression: The SQL as stored in the table.
        feature: The table feature it belongs to (for errors when DuckDB cannot run it).
    """

    name: str
    expression: str
    feature: str


def _quote(path: tuple[str, ...]) -> str:
    return ".".join('"' + p.replace('"', '""') + '"' for p in path)


def table_constraints(
    schema: StructType, configuration: Mapping[str, str]
) -> tuple[list[Constraint], dict[str, str]]:
    """The invariants and CHECK constraints of a table, and its generated columns.

    Returns:
        ``(constraints, generated)``: constraints as :class:`Constraint` objects and
        generated columns as top-level column name -> generation expression.

    Example:
        >>> from lakequery.protocol.schema import parse_schema
        >>> s = parse_schema('{"type":"struct","fields":[{"name":"a","type":"long",'
        ...   '"nullable":true,"metadata":{"delta.invariants":'
        ...   '"{\\\\"expression\\\\":{\\\\"expression\\\\":\\\\"a > 0\\\\"}}"}}]}')
        >>> table_constraints(s, {})[0]
        [Constraint(name='invariant(a)', expression='a > 0', feature='invariants')]
    """
    out: list[Constraint] = []
    for path, f in iter_fields(schema):
        raw = f.metadata.get(INVARIANTS_KEY)
        if raw is None:
            continue
        try:
            doc = json.loads(raw) if isinstance(raw, str) else raw
            expr = doc["expression"]["expression"]
        except (ValueError, KeyError, TypeError) as exc:
            raise UnsupportedFeatureError(
                "invariants", operation="write", detail=f"malformed invariant {raw!r:.80}"
            ) from exc
        out.append(Constraint(f"invariant({'.'.join(path)})", str(expr), "invariants"))
    for key in sorted(configuration):
        if key.lower().startswith(CHECK_PREFIX):
            name = key[len(CHECK_PREFIX) :]
            out.append(Constraint(name, configuration[key], "checkConstraints"))
    generated = {
        f.name: str(f.metadata[GENERATION_KEY])
        for f in schema.fields
        if GENERATION_KEY in f.metadata
    }
    return out, generated


class ConstraintChecker:
    """Enforces a table's constraints on batches with the table's logical column names.

    Args:
        schema: The table schema.
        configuration: Table properties (for ``delta.constraints.*``).
        extra: Further ``(name, expression, DuckDB SQL)`` rules (the predicate of an
            overwrite: as given, and as lakequery's predicate language renders it); the
            SQL runs as it is, where the table's own constraints are Spark SQL translated
            by :func:`spark_to_duckdb`.
    """

    def __init__(
        self,
        schema: StructType,
        configuration: Mapping[str, str],
        extra: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        self.schema = schema
        self.constraints, self.generated = table_constraints(schema, configuration)
        self.rules = [
            (c, spark_to_duckdb(c.expression, feature=c.feature)) for c in self.constraints
        ]
        self.rules += [
            (Constraint(name, text, "checkConstraints"), sql) for name, text, sql in extra
        ]
        self._con: duckdb.DuckDBPyConnection | None = None

    @property
    def active(self) -> bool:
        """Whether there is anything to check or compute."""
        return bool(self.rules or self.generated)

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            from lakequery.duckdb_databases import engine_cursor

            # rows in order: results line up with the batch's rows
            self._con = engine_cursor(utc=True)
        return self._con

    def close(self) -> None:
        """Closes the DuckDB cursor (reopened on demand)."""
        if self._con is not None:
            self._con.close()
            self._con = None

    def _query(self, data: pa.Table, sql: str, feature: str, name: str) -> pa.Table:
        try:
            rel = self._connection().from_arrow(data)
            result: pa.Table = rel.query(_VIEW, sql).to_arrow_table()
        except duckdb.Error as exc:
            raise UnsupportedFeatureError(
                feature, operation="write", detail=f"cannot evaluate {name!r}: {exc}"
            ) from exc
        return result

    def apply(self, batch: pa.RecordBatch, missing: Collection[str] = ()) -> pa.RecordBatch:
        """Computes the generated columns in ``missing``, then checks every rule.

        Args:
            batch: Rows with every table column (missing generated ones may hold nulls).
            missing: Generated columns absent from the caller's data (computed here).

        Returns:
            The batch with computed generated columns.

        Raises:
            ConstraintViolationError: A row breaks a rule (names it, shows one such row).
            UnsupportedFeatureError: DuckDB cannot evaluate an expression.
        """
        if not self.active or batch.num_rows == 0:
            return batch
        data = pa.Table.from_batches([batch])
        for name in self.generated:
            if name in missing:
                data = self._compute(data, name)
        rules = list(self.rules)
        for name, expr in self.generated.items():
            if name not in missing:
                sql = f"{_quote((name,))} IS NOT DISTINCT FROM ({spark_to_duckdb(expr, feature=_GEN)})"
                rules.append((Constraint(f"generated({name})", expr, _GEN), sql))
        if rules:
            self._check(data, rules)
        return data.combine_chunks().to_batches()[0]

    def _compute(self, data: pa.Table, name: str) -> pa.Table:
        expr = self.generated[name]
        sql = f"SELECT ({spark_to_duckdb(expr, feature=_GEN)}) AS v FROM {_VIEW}"
        values = self._query(data, sql, _GEN, f"generated({name})").column(0)
        target = to_arrow_type(self.schema[name].type)
        try:
            values = pc.cast(values, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(
                name, str(target), str(values.type), f"generation expression {expr!r}"
            ) from exc
        idx = data.schema.get_field_index(name)
        return data.set_column(idx, data.schema.field(idx), values)

    def _check(self, data: pa.Table, rules: list[tuple[Constraint, str]]) -> None:
        tests = [f"COALESCE(CAST(({sql}) AS BOOLEAN), FALSE)" for _, sql in rules]
        select = ", ".join(f"COALESCE(bool_and({t}), TRUE) AS c{i}" for i, t in enumerate(tests))
        try:
            rel = self._connection().from_arrow(data)
            passed = list(rel.query(_VIEW, f"SELECT {select} FROM {_VIEW}").fetchall()[0])
        except duckdb.Error:
            passed = [None] * len(rules)  # find the rule DuckDB cannot run, one by one
        for (rule, _), test, ok in zip(rules, tests, passed, strict=True):
            if ok:
                continue
            sql = f"SELECT * FROM {_VIEW} WHERE NOT {test} LIMIT 1"
            bad = self._query(data, sql, rule.feature, rule.name)
            if not bad.num_rows:
                continue
            detail = f"offending row: {bad.to_pylist()[0]!r}"
            if len(detail) > _DETAIL_CHARS:
                detail = detail[: _DETAIL_CHARS - 3] + "..."
            raise ConstraintViolationError(rule.name, rule.expression, detail)


__all__ = [
    "CHECK_PREFIX",
    "GENERATION_KEY",
    "INVARIANTS_KEY",
    "Constraint",
    "ConstraintChecker",
    "spark_to_duckdb",
    "table_constraints",
]
