"""A hand-written tokenizer and precedence-climbing parser for SQL boolean expressions.

The accepted language is the DuckDB/ANSI flavour of a ``WHERE`` clause restricted to what
lakequery can push down everywhere; see :func:`parse_predicate`. :func:`format_predicate`
prints a tree back as text that :func:`parse_predicate` reads again.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa

from lakequery.errors import PredicateError
from lakequery.protocol.arrow_types import timestamp_type
from lakequery.protocol.predicate_ast import (
    And,
    Arith,
    Between,
    Column,
    Compare,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
)
from lakequery.protocol.predicate_types import parse_iso_timestamp

_RESERVED = frozenset({"AND", "OR", "NOT", "IN", "BETWEEN", "LIKE", "IS", "NULL", "TRUE", "FALSE"})
_TYPED_LITERALS = frozenset({"DATE", "TIMESTAMP", "TIMESTAMPTZ"})
_COMPARISONS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">"}
_COMPARISONS[">="] = ">="
_TWO_CHAR_OPS = ("==", "!=", "<>", "<=", ">=")
_ONE_CHAR_OPS = "=<>+-*/(),."


@dataclass(frozen=True)
class _Token:
    kind: str  # IDENT, QIDENT, STRING, NUMBER, OP, EOF
    text: str  # identifier / string contents, number text or operator
    pos: int

    def keyword(self) -> str | None:
        return self.text.upper() if self.kind == "IDENT" else None

    def describe(self) -> str:
        if self.kind == "EOF":
            return "end of input"
        if self.kind == "STRING":
            return f"string '{self.text}'"
        return repr(self.text)


def _is_ident_start(ch: str) -> bool:
    return ch == "_" or ch.isalpha()


def _is_ident_part(ch: str) -> bool:
    return ch == "_" or ch == "$" or ch.isalnum()


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text

    def error(self, reason: str, pos: int) -> PredicateError:
        return PredicateError(self.text, f"{reason} at position {pos}")

    def tokens(self) -> list[_Token]:
        text, out, i, n = self.text, [], 0, len(self.text)
        while i < n:
            ch = text[i]
            if ch.isspace():
                i += 1
            elif ch in "'\"`":
                body, end = self._quoted(i, ch)
                out.append(_Token("STRING" if ch == "'" else "QIDENT", body, i))
                i = end
            elif ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
                end = self._number_end(i)
                out.append(_Token("NUMBER", text[i:end], i))
                i = end
            elif _is_ident_start(ch):
                end = i + 1
                while end < n and _is_ident_part(text[end]):
                    end += 1
                out.append(_Token("IDENT", text[i:end], i))
                i = end
            elif text[i : i + 2] in _TWO_CHAR_OPS:
                out.append(_Token("OP", text[i : i + 2], i))
                i += 2
            elif ch in _ONE_CHAR_OPS:
                out.append(_Token("OP", ch, i))
                i += 1
            else:
                raise self.error(f"unexpected character {ch!r}", i)
        out.append(_Token("EOF", "", n))
        return out

    def _quoted(self, start: int, quote: str) -> tuple[str, int]:
        text, i, parts = self.text, start + 1, []
        while True:
            j = text.find(quote, i)
            if j < 0:
                what = "string literal" if quote == "'" else "quoted identifier"
                raise self.error(f"unterminated {what}", start)
            parts.append(text[i:j])
            if text[j + 1 : j + 2] == quote:  # doubled quote = escaped quote
                parts.append(quote)
                i = j + 2
                continue
            body = "".join(parts)
            if quote != "'" and not body:
                raise self.error("empty quoted identifier", start)
            return body, j + 1

    def _number_end(self, start: int) -> int:
        text, n, i = self.text, len(self.text), start
        while i < n and text[i].isdigit():
            i += 1
        if i < n and text[i] == "." and not (i + 1 < n and _is_ident_start(text[i + 1])):
            i += 1
            while i < n and text[i].isdigit():
                i += 1
        if i < n and text[i] in "eE":
            j = i + 1
            if j < n and text[j] in "+-":
                j += 1
            if j < n and text[j].isdigit():
                while j < n and text[j].isdigit():
                    j += 1
                i = j
        if i < n and _is_ident_part(text[i]):
            raise self.error(f"malformed number {text[start : i + 1]!r}", start)
        return i


def _number(text: str) -> Literal:
    if "e" in text or "E" in text:
        return Literal(float(text))
    if "." in text:
        return Literal(Decimal(text))
    return Literal(int(text))


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _Lexer(text).tokens()
        self.i = 0

    # -- token helpers ---------------------------------------------------------------------
    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def peek(self, offset: int = 1) -> _Token:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        tok = self.tokens[self.i]
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def error(self, reason: str, tok: _Token | None = None) -> PredicateError:
        tok = tok or self.tok
        return PredicateError(self.text, f"{reason} at position {tok.pos}")

    def at_keyword(self, *words: str) -> bool:
        return self.tok.keyword() in words

    def expect_keyword(self, word: str) -> _Token:
        if not self.at_keyword(word):
            raise self.error(f"expected {word} but found {self.tok.describe()}")
        return self.advance()

    def expect_op(self, op: str) -> _Token:
        if not (self.tok.kind == "OP" and self.tok.text == op):
            raise self.error(f"expected {op!r} but found {self.tok.describe()}")
        return self.advance()

    def at_op(self, *ops: str) -> bool:
        return self.tok.kind == "OP" and self.tok.text in ops

    # -- grammar ---------------------------------------------------------------------------
    def parse(self) -> Expr:
        if self.tok.kind == "EOF":
            raise self.error("empty predicate")
        expr = self.or_expr()
        if self.tok.kind != "EOF":
            raise self.error(f"unexpected {self.tok.describe()}")
        return expr

    def or_expr(self) -> Expr:
        items = [self.and_expr()]
        while self.at_keyword("OR"):
            self.advance()
            items.append(self.and_expr())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_expr(self) -> Expr:
        items = [self.not_expr()]
        while self.at_keyword("AND"):
            self.advance()
            items.append(self.not_expr())
        return items[0] if len(items) == 1 else And(tuple(items))

    def not_expr(self) -> Expr:
        if self.at_keyword("NOT"):
            self.advance()
            return Not(self.not_expr())
        return self.predicate()

    def predicate(self) -> Expr:
        left = self.additive()
        tok = self.tok
        if tok.kind == "OP" and tok.text in _COMPARISONS:
            self.advance()
            expr: Expr = Compare(_COMPARISONS[tok.text], left, self.additive())
        elif self.at_keyword("IS"):
            self.advance()
            negated = self.at_keyword("NOT")
            if negated:
                self.advance()
            self.expect_keyword("NULL")
            expr = IsNull(left, negated)
        elif self.at_keyword("NOT") and self.peek().keyword() in ("IN", "BETWEEN", "LIKE"):
            self.advance()
            expr = self.postfix(left, negated=True)
        elif self.at_keyword("IN", "BETWEEN", "LIKE"):
            expr = self.postfix(left, negated=False)
        else:
            return left
        nxt = self.tok
        if (nxt.kind == "OP" and nxt.text in _COMPARISONS) or nxt.keyword() in (
            "IS",
            "IN",
            "BETWEEN",
            "LIKE",
        ):
            raise self.error(
                f"unexpected {nxt.describe()} after a comparison (use parentheses)", nxt
            )
        return expr

    def postfix(self, left: Expr, *, negated: bool) -> Expr:
        word = self.advance().keyword()
        if word == "IN":
            self.expect_op("(")
            if self.at_op(")"):
                raise self.error("IN needs at least one value")
            values = [self.additive()]
            while self.at_op(","):
                self.advance()
                values.append(self.additive())
            self.expect_op(")")
            return In(left, tuple(values), negated)
        if word == "BETWEEN":
            low = self.additive()
            self.expect_keyword("AND")
            return Between(left, low, self.additive(), negated)
        tok = self.tok  # LIKE
        if tok.kind != "STRING":
            raise self.error(f"LIKE needs a string literal pattern, found {tok.describe()}")
        self.advance()
        return Like(left, tok.text, negated)

    def additive(self) -> Expr:
        expr = self.multiplicative()
        while self.at_op("+", "-"):
            op = self.advance().text
            expr = Arith(op, expr, self.multiplicative())
        return expr

    def multiplicative(self) -> Expr:
        expr = self.unary()
        while self.at_op("*", "/"):
            op = self.advance().text
            expr = Arith(op, expr, self.unary())
        return expr

    def unary(self) -> Expr:
        if self.at_op("+"):
            self.advance()
            return self.unary()
        if self.at_op("-"):
            self.advance()
            operand = self.unary()
            if isinstance(operand, Literal) and operand.type is None:
                value = operand.value
                if isinstance(value, Decimal):  # exact: ``-value`` rounds to 28 digits
                    return Literal(value.copy_negate())
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return Literal(-value)
            return Arith("-", Literal(0), operand)
        return self.primary()

    def primary(self) -> Expr:
        tok = self.tok
        if tok.kind == "NUMBER":
            self.advance()
            return _number(tok.text)
        if tok.kind == "STRING":
            self.advance()
            return Literal(tok.text)
        if self.at_op("("):
            self.advance()
            expr = self.or_expr()
            self.expect_op(")")
            return expr
        word = tok.keyword()
        if word in ("TRUE", "FALSE"):
            self.advance()
            return Literal(word == "TRUE", pa.bool_())
        if word == "NULL":
            self.advance()
            return Literal(None)
        if word in _TYPED_LITERALS and self.peek().kind == "STRING":
            self.advance()
            return self.typed_literal(word, self.advance())
        if tok.kind in ("IDENT", "QIDENT"):
            if word in _RESERVED:
                raise self.error(f"unexpected keyword {word}")
            return self.column()
        raise self.error(f"expected a value or column but found {tok.describe()}")

    def typed_literal(self, word: str, tok: _Token) -> Literal:
        try:
            if word == "DATE":
                return Literal(dt.date.fromisoformat(tok.text.strip()), pa.date32())
            value = parse_iso_timestamp(tok.text)
        except ValueError:
            raise self.error(f"invalid {word} literal '{tok.text}'", tok) from None
        if word == "TIMESTAMPTZ" and value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        tz = "UTC" if value.tzinfo is not None else None
        return Literal(value, timestamp_type("us", tz))

    def column(self) -> Column:
        if self.peek().kind == "OP" and self.peek().text == "(":
            raise self.error(f"function calls are not supported ({self.tok.text!r})")
        parts = [self.advance().text]
        while self.at_op("."):
            self.advance()
            tok = self.tok
            if tok.kind not in ("IDENT", "QIDENT"):
                raise self.error(f"expected a field name after '.' but found {tok.describe()}")
            parts.append(self.advance().text)
        return Column(tuple(parts))


def parse_predicate(text: str) -> Expr:
    """Parse a SQL boolean expression into a predicate tree.

    The language is a DuckDB/ANSI ``WHERE`` clause:

    * columns: bare (``a``), ``"double quoted"`` or ``backticked`` names (a doubled
      quote escapes it), dotted for struct fields (``s.x``, ``"s"."x y"``);
    * literals: ``'strings'`` (``''`` escapes a quote), integers, decimals (``1.5``),
      floats (``1e3``), ``TRUE``, ``FALSE``, ``NULL``, ``DATE '2026-11-01'``,
      ``TIMESTAMP '2026-11-01 10:00:00[.ffffff][+00:00]'`` (with an offset it is a UTC
      instant, without it a wall-clock time), ``TIMESTAMPTZ '...'`` (UTC if no offset);
    * operators by increasing precedence: ``OR``; ``AND``; ``NOT``; comparisons
      ``= == != <> < <= > >=``, ``IS [NOT] NULL``, ``[NOT] IN (...)``,
      ``[NOT] BETWEEN x AND y``, ``[NOT] LIKE 'pattern'``; ``+ -``; ``* /``; unary ``-``;
      parentheses group. Keywords are case-insensitive.

    Untyped literals get their type from the column they meet in :func:`bind`.

    Args:
        text: The expression.

    Returns:
        The predicate tree.

    Raises:
        PredicateError: The text is not a valid expression; the reason names the
            0-based character position of the problem.

    Example:
        >>> from lakequery.protocol.predicates import parse_predicate
        >>> e = parse_predicate("a > 3 AND day = '2026-11-01' OR s IS NULL")
        >>> type(e).__name__, type(e.items[0]).__name__
        ('Or', 'And')
    """
    if not isinstance(text, str):
        raise PredicateError(text, "a predicate must be a string")
    return _Parser(text).parse()


# -- printing ------------------------------------------------------------------------------


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _format_literal(lit: Literal) -> str:
    v = lit.value
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise PredicateError(lit, "a non-finite float has no text form")
        return repr(v) if ("e" in repr(v) or "E" in repr(v)) else f"{v!r}e0"
    if isinstance(v, Decimal):
        if not v.is_finite():
            raise PredicateError(lit, "a non-finite decimal has no text form")
        text = format(v, "f")
        return text if "." in text else text + ".0"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            return f"TIMESTAMP '{v.astimezone(dt.timezone.utc).isoformat(sep=' ')}'"
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    raise PredicateError(lit, f"literal of Python type {type(v).__name__} has no text form")


def format_predicate(expr: Expr) -> str:
    """Print a predicate as text that :func:`parse_predicate` reads back.

    Every compound expression is parenthesised; identifiers are double-quoted.
    Types of literals are not printed (they are re-inferred by :func:`bind`).

    Args:
        expr: The predicate.

    Returns:
        The text.

    Raises:
        PredicateError: A literal has no text form (NaN, infinities, bytes).

    Example:
        >>> from lakequery.protocol.predicates import format_predicate, parse_predicate
        >>> format_predicate(parse_predicate("a>1 and not b like 'x%'"))
        '(("a" > 1) AND (NOT ("b" LIKE \\'x%\\')))'
    """
    f = format_predicate
    if isinstance(expr, Column):
        return ".".join(_quote_ident(p) for p in expr.path)
    if isinstance(expr, Literal):
        return _format_literal(expr)
    if isinstance(expr, Compare | Arith):
        return f"({f(expr.left)} {expr.op} {f(expr.right)})"
    if isinstance(expr, And | Or):
        word = " AND " if isinstance(expr, And) else " OR "
        return "(" + word.join(f(i) for i in expr.items) + ")"
    if isinstance(expr, Not):
        return f"(NOT {f(expr.item)})"
    neg = " NOT" if expr.negated else ""
    if isinstance(expr, IsNull):
        return f"({f(expr.operand)} IS{neg} NULL)"
    if isinstance(expr, In):
        if not expr.values:
            raise PredicateError(expr, "an empty IN list has no text form")
        return f"({f(expr.operand)}{neg} IN ({', '.join(f(v) for v in expr.values)}))"
    if isinstance(expr, Between):
        return f"({f(expr.operand)}{neg} BETWEEN {f(expr.low)} AND {f(expr.high)})"
    pattern = expr.pattern.replace("'", "''")
    return f"({f(expr.operand)}{neg} LIKE '{pattern}')"
