"""Unit tests of the predicate tokenizer/parser and the text printer."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from lakequery.errors import PredicateError
from lakequery.protocol.predicates import (
    And,
    Arith,
    Between,
    Column,
    Compare,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    format_predicate,
    parse_predicate,
    referenced_columns,
)

A, B, C = Column(("a",)), Column(("b",)), Column(("c",))
UTC = dt.timezone.utc


def lit(value: object) -> Literal:
    return Literal(value)


def test_example_from_the_design_guide() -> None:
    expr = parse_predicate("a > 3 AND day = '2026-11-01' OR s IS NULL")
    assert expr == Or(
        (
            And(
                (
                    Compare(">", A, lit(3)),
                    Compare("=", Column(("day",)), lit("2026-11-01")),
                )
            ),
            IsNull(Column(("s",))),
        )
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # AND binds tighter than OR
        (
            "a = 1 OR b = 2 AND c = 3",
            Or((Compare("=", A, lit(1)), And((Compare("=", B, lit(2)), Compare("=", C, lit(3)))))),
        ),
        (
            "a = 1 AND b = 2 OR c = 3",
            Or((And((Compare("=", A, lit(1)), Compare("=", B, lit(2)))), Compare("=", C, lit(3)))),
        ),
        # NOT binds tighter than AND, looser than comparisons
        ("NOT a = 1 AND b = 2", And((Not(Compare("=", A, lit(1))), Compare("=", B, lit(2))))),
        ("NOT NOT a", Not(Not(A))),
        (
            "(a = 1 OR b = 2) AND c = 3",
            And((Or((Compare("=", A, lit(1)), Compare("=", B, lit(2)))), Compare("=", C, lit(3)))),
        ),
        # chains flatten
        ("a AND b AND c", And((A, B, C))),
        ("a OR b OR c", Or((A, B, C))),
        # arithmetic precedence and associativity
        ("a + b * c > 1", Compare(">", Arith("+", A, Arith("*", B, C)), lit(1))),
        ("a - b - c = 0", Compare("=", Arith("-", Arith("-", A, B), C), lit(0))),
        ("(a + b) / c < 2", Compare("<", Arith("/", Arith("+", A, B), C), lit(2))),
        ("-a < -2", Compare("<", Arith("-", lit(0), A), lit(-2))),
        ("a > - -2.5", Compare(">", A, lit(Decimal("2.5")))),
        # every comparison spelling
        ("a == 1", Compare("=", A, lit(1))),
        ("a <> 1", Compare("!=", A, lit(1))),
        ("a != 1", Compare("!=", A, lit(1))),
        ("a<=1", Compare("<=", A, lit(1))),
        ("a>=1", Compare(">=", A, lit(1))),
        ("1 < a", Compare("<", lit(1), A)),
        # postfix predicates
        ("a IS NOT NULL", IsNull(A, negated=True)),
        ("a in (1, 2, NULL)", In(A, (lit(1), lit(2), lit(None)))),
        ("a NOT IN (1)", In(A, (lit(1),), negated=True)),
        ("a BETWEEN 1 AND 2 AND b", And((Between(A, lit(1), lit(2)), B))),
        ("a NOT BETWEEN b + 1 AND 5", Between(A, Arith("+", B, lit(1)), lit(5), negated=True)),
        ("a LIKE 'x%'", Like(A, "x%")),
        ("a NOT LIKE '_y'", Like(A, "_y", negated=True)),
        ("NOT a LIKE 'z'", Not(Like(A, "z"))),
    ],
)
def test_precedence_and_forms(text: str, expected: object) -> None:
    assert parse_predicate(text) == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a = 42", 42),
        ("a = 1.5", Decimal("1.5")),
        ("a = .5", Decimal("0.5")),
        ("a = 1e3", 1000.0),
        ("a = 2.5E-1", 0.25),
        ("a = 'it''s'", "it's"),
        ("a = ''", ""),
        ("a = 'ünï ☃'", "ünï ☃"),
        ("a = NULL", None),
    ],
)
def test_untyped_literals(text: str, value: object) -> None:
    expr = parse_predicate(text)
    assert isinstance(expr, Compare)
    assert expr.right == Literal(value)
    assert type(expr.right.value) is type(value)


def test_typed_literals() -> None:
    expr = parse_predicate(
        "d = DATE '2026-11-01' AND t = TIMESTAMP '2026-11-01 10:00:00' AND "
        "u = timestamp '2026-11-01T10:00:00.5+02:00' AND z = TIMESTAMPTZ '2026-11-01 10:00' "
        "AND b = true AND c = FALSE"
    )
    assert isinstance(expr, And)
    values = [item.right for item in expr.items if isinstance(item, Compare)]
    assert values == [
        Literal(dt.date(2026, 11, 1), pa.date32()),
        Literal(dt.datetime(2026, 11, 1, 10), pa.timestamp("us")),
        Literal(dt.datetime(2026, 11, 1, 8, 0, 0, 500000, tzinfo=UTC), pa.timestamp("us", "UTC")),
        Literal(dt.datetime(2026, 11, 1, 10, tzinfo=UTC), pa.timestamp("us", "UTC")),
        Literal(True, pa.bool_()),
        Literal(False, pa.bool_()),
    ]


def test_keywords_are_case_insensitive_and_date_can_be_a_column() -> None:
    assert parse_predicate("a is not null aNd b NoT iN (1) Or NOT c") == Or(
        (And((IsNull(A, True), In(B, (lit(1),), True))), Not(C))
    )
    assert parse_predicate("date = DATE '2026-01-01'") == Compare(
        "=", Column(("date",)), Literal(dt.date(2026, 1, 1), pa.date32())
    )
    assert parse_predicate("timestamp IS NULL") == IsNull(Column(("timestamp",)))


def test_quoted_and_nested_identifiers() -> None:
    expr = parse_predicate('"my col" = 1 AND `back``tick` = 2 AND "a""b".c = 3 AND s.x.y = 4')
    assert isinstance(expr, And)
    paths = [item.left.path for item in expr.items if isinstance(item, Compare)]
    assert paths == [("my col",), ("back`tick",), ('a"b', "c"), ("s", "x", "y")]
    # quoting makes a keyword usable as a column name
    assert parse_predicate('"AND" = 1') == Compare("=", Column(("AND",)), lit(1))
    assert referenced_columns(expr) == {("my col",), ("back`tick",), ('a"b', "c"), ("s", "x", "y")}


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("", 0, "empty predicate"),
        ("a >", 3, "expected a value or column"),
        ("a > 1 b", 6, "unexpected 'b'"),
        ("a = 'abc", 4, "unterminated string"),
        ('"abc = 1', 0, "unterminated quoted identifier"),
        ("a = 1 AND (b = 2", 16, "expected ')'"),
        ("a ! 1", 2, "unexpected character '!'"),
        ("a = 1 = 2", 6, "use parentheses"),
        ("a LIKE b", 7, "LIKE needs a string literal"),
        ("a IN ()", 6, "IN needs at least one value"),
        ("a BETWEEN 1 OR 2", 12, "expected AND"),
        ("lower(a) = 'x'", 0, "function calls are not supported"),
        ("a = DATE '2026-13-01'", 9, "invalid DATE literal"),
        ("a = 12abc", 4, "malformed number"),
        ("a IS 1", 5, "expected NULL"),
        ("AND = 1", 0, "unexpected keyword AND"),
        ("s. = 1", 3, "expected a field name"),
        ("a = 1)", 5, "unexpected ')'"),
        ('"" = 1', 0, "empty quoted identifier"),
    ],
)
def test_errors_name_reason_and_position(text: str, position: int, fragment: str) -> None:
    with pytest.raises(PredicateError) as info:
        parse_predicate(text)
    assert fragment in info.value.reason
    assert f"at position {position}" in info.value.reason
    assert info.value.predicate == text


def test_non_string_input_is_rejected() -> None:
    with pytest.raises(PredicateError, match="must be a string"):
        parse_predicate(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "a > 3 AND day = '2026-11-01' OR s IS NULL",
        "NOT (a = 1 OR b <> 2) AND c",
        "a + 2 * b / -c >= 1e-3",
        "a IN (1, 2.5, NULL) AND b NOT BETWEEN 1 AND 2",
        "x LIKE 'it''s%' AND y NOT LIKE '_'",
        '"we""ird".`na me` = TIMESTAMP \'2026-01-01 00:00:00+00:00\'',
        "d = DATE '2026-01-01' AND t < TIMESTAMP '2026-01-01 12:30:00.25'",
    ],
)
def test_format_round_trips(text: str) -> None:
    expr = parse_predicate(text)
    assert parse_predicate(format_predicate(expr)) == expr


def test_format_rejects_values_without_text_form() -> None:
    with pytest.raises(PredicateError, match="non-finite"):
        format_predicate(Compare("=", A, Literal(float("nan"))))
    with pytest.raises(PredicateError, match="bytes"):
        format_predicate(Compare("=", A, Literal(b"\x00")))


def test_nodes_validate_their_shape() -> None:
    with pytest.raises(PredicateError):
        Compare("~", A, B)
    with pytest.raises(PredicateError):
        Arith("%", A, B)
    with pytest.raises(PredicateError):
        And(())
    with pytest.raises(PredicateError):
        Column(())
    # nodes are immutable and hashable, lists become tuples
    node = Or([A, B])  # type: ignore[arg-type]
    assert node.items == (A, B)
    assert hash(node) == hash(Or((A, B)))
    with pytest.raises(AttributeError):
        node.items = ()  # type: ignore[misc]
