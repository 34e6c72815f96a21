"""Invariants, CHECK constraints and generated columns during writes (§14)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from writekit import make_state, schema_json

from lakequery.errors import ConstraintViolationError, UnsupportedFeatureError
from lakequery.writer.constraints import spark_to_duckdb
from lakequery.writer.data_files import write_data_files

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us", "UTC"))])


def _invariant(sql: str) -> dict[str, str]:
    return {"delta.invariants": json.dumps({"expression": {"expression": sql}})}


def test_column_invariant(root: str) -> None:
    state = make_state(root, schema_json(SCHEMA, metadata={"id": _invariant("id > 0")}))
    assert len(write_data_files(pa.table({"id": [1, 2]}), state)) == 1
    with pytest.raises(ConstraintViolationError) as info:
        write_data_files(pa.table({"id": [1, -5, 3], "name": ["a", "bad", "c"]}), state)
    assert info.value.constraint == "invariant(id)"
    assert info.value.expression == "id > 0"
    assert "'id': -5" in info.value.detail and "'bad'" in info.value.detail
    # NULL does not satisfy an invariant.
    with pytest.raises(ConstraintViolationError):
        write_data_files(pa.table({"id": pa.array([None], pa.int64())}), state)


def test_check_constraints(root: str) -> None:
    config = {
        "delta.constraints.name_len": "length(`name`) < 4 OR name IS NULL",
        "delta.constraints.quoted": 'name <> "i\'s"',
    }
    state = make_state(root, SCHEMA, configuration=config)
    assert len(write_data_files(pa.table({"id": [1], "name": ["abc"]}), state)) == 1
    with pytest.raises(ConstraintViolationError) as info:
        write_data_files(pa.table({"id": [1, 2], "name": ["abc", "toolong"]}), state)
    assert info.value.constraint == "name_len"
    assert "toolong" in info.value.detail
    with pytest.raises(ConstraintViolationError, match="quoted"):
        write_data_files(pa.table({"id": [1], "name": ["i's"]}), state)


def test_extra_constraints(root: str) -> None:
    rule = ("predicate", "id >= 10", '"id" >= 10')
    state = make_state(root, SCHEMA, extra_constraints=(rule,))
    with pytest.raises(ConstraintViolationError, match="predicate"):
        write_data_files(pa.table({"id": [10, 9]}), state)


def test_generated_columns_computed_and_checked(root: str) -> None:
    schema = pa.schema([("ts", pa.timestamp("us", "UTC")), ("day", pa.date32()), ("y", pa.int32())])
    text = schema_json(
        schema,
        metadata={
            "day": {"delta.generationExpression": "CAST(ts AS DATE)"},
            "y": {"delta.generationExpression": "YEAR(ts)"},
        },
        not_null=["y"],
    )
    state = make_state(root, text, partition_by=["day"])
    ts = [dt.datetime(2024, 1, 1, 23, 30), dt.datetime(2025, 6, 2, 1, 0), None]
    adds = write_data_files(
        pa.table({"ts": pa.array(ts, pa.timestamp("us", "UTC"))}).slice(0, 2), state
    )
    assert sorted(a["partitionValues"]["day"] for a in adds) == ["2024-01-01", "2025-06-02"]
    for a in adds:
        file = pq.read_table(Path(root) / unquote(a["path"]))
        year = file.column("y").to_pylist()[0]
        assert str(year) == a["partitionValues"]["day"][:4]
    # Provided values must match the expression (null-safe).
    good = pa.table(
        {
            "ts": pa.array(ts[:1], pa.timestamp("us", "UTC")),
            "day": pa.array([dt.date(2024, 1, 1)]),
            "y": pa.array([2024], pa.int32()),
        }
    )
    assert len(write_data_files(good, state)) == 1
    bad = good.set_column(1, "day", pa.array([dt.date(2024, 1, 2)]))
    with pytest.raises(ConstraintViolationError) as info:
        write_data_files(bad, state)
    assert info.value.constraint == "generated(day)"
    assert info.value.expression == "CAST(ts AS DATE)"


def test_generated_null_safe(root: str) -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    state = make_state(
        root, schema_json(schema, metadata={"b": {"delta.generationExpression": "a + 1"}})
    )
    assert (
        len(
            write_data_files(
                pa.table(
                    {"a": pa.array([None, 1], pa.int64()), "b": pa.array([None, 2], pa.int64())}
                ),
                state,
            )
        )
        == 1
    )
    with pytest.raises(ConstraintViolationError):
        write_data_files(
            pa.table({"a": pa.array([None], pa.int64()), "b": pa.array([0], pa.int64())}), state
        )


def test_unevaluable_expression(root: str) -> None:
    state = make_state(
        root, SCHEMA, configuration={"delta.constraints.c": "no_such_function(id) > 0"}
    )
    with pytest.raises(UnsupportedFeatureError) as info:
        write_data_files(pa.table({"id": [1]}), state)
    assert info.value.feature == "checkConstraints"


def test_spark_sql_translation() -> None:
    assert spark_to_duckdb("`a``b` > 1") == '"a`b" > 1'
    assert spark_to_duckdb("x = \"q\" AND y = 'it\\'s'") == "x = 'q' AND y = 'it''s'"
    assert spark_to_duckdb("a <=> b") == "a  IS NOT DISTINCT FROM  b"
    assert spark_to_duckdb("'`not an identifier`'") == "'`not an identifier`'"


@pytest.mark.parametrize(
    ("expression", "row", "spark_value"),
    [
        ("concat(a, b)", {"a": "abc", "b": None}, None),
        ("CONCAT(a, '-', b)", {"a": "x", "b": "y"}, "x-y"),
        ("concat(a, concat(b, 'z'))", {"a": "x", "b": None}, None),
        ("substring(a, 0, 2)", {"a": "abc", "b": None}, "ab"),
        ("substr(a, 0)", {"a": "abc", "b": None}, "abc"),
        ("substring(a, -2, 1)", {"a": "abc", "b": None}, "b"),
        ("substring(concat(a, b), 0, 1)", {"a": "q", "b": "r"}, "q"),
        ("'concat(' || a", {"a": "x", "b": None}, "concat(x"),
        ("`concat(x` || a", {"concat(x": "p", "a": "q", "b": None}, "pq"),
    ],
)
def test_spark_string_functions_keep_spark_semantics(
    expression: str, row: dict[str, object], spark_value: object
) -> None:
    """Generation expressions and CHECK constraints are Spark SQL: DuckDB's ``concat``
    skips NULLs and its ``substring`` reads position 0 as before the first character, so
    a generated ``concat(a, b)`` was stored as 'abc' where Spark stores NULL (and the row
    Spark writes was refused). Quoted text is never rewritten."""
    import duckdb

    table = pa.table({k: pa.array([v], pa.string()) for k, v in row.items()})
    con = duckdb.connect()
    con.register("t", table)
    ((value,),) = con.sql(f"SELECT {spark_to_duckdb(expression)} FROM t").fetchall()
    assert value == spark_value


@pytest.mark.parametrize(
    ("constraint", "accepted", "refused"),
    [
        # Spark decodes backslash escapes in literals ('\t' is a tab, '\u00e9' an é): the
        # backslash was dropped, so the rule tested 't' and 'u00e9'
        ("name <> 'a\\tb'", "atb", "a\tb"),
        ("name <> '\\u00e9'", "u00e9", "é"),
        ("name <> '\\101'", "101", "A"),
        # '\' is LIKE's default escape in Spark: '%\\_%' means "holds an underscore"
        ("name NOT LIKE '%\\\\_%'", "a\\b", "a_b"),
        ("name NOT LIKE '%\\_%'", "a\\b", "a_b"),
        ("name NOT LIKE 'x#%' ESCAPE '#'", "xy", "x%"),
    ],
)
def test_spark_literals_and_like_patterns(
    root: str, constraint: str, accepted: str, refused: str
) -> None:
    state = make_state(root, SCHEMA, configuration={"delta.constraints.c": constraint})
    assert write_data_files(pa.table({"id": [1], "name": [accepted]}), state)
    with pytest.raises(ConstraintViolationError):
        write_data_files(pa.table({"id": [1], "name": [refused]}), state)


def test_map_lookups_by_string_key_are_kept(root: str) -> None:
    # the same in both dialects (only an array index differs)
    schema = pa.schema([("m", pa.map_(pa.string(), pa.int64()))])
    state = make_state(root, schema, configuration={"delta.constraints.c": "m['a'] > 0"})
    assert write_data_files(pa.table({"m": pa.array([[("a", 1)]], schema.field("m").type)}), state)
    with pytest.raises(ConstraintViolationError):
        write_data_files(pa.table({"m": pa.array([[("a", -7)]], schema.field("m").type)}), state)


def test_subscripts_are_refused(root: str) -> None:
    # Spark's arr[1] is the second element, DuckDB's the first: refused, not misread
    schema = pa.schema([("arr", pa.list_(pa.int64()))])
    state = make_state(root, schema, configuration={"delta.constraints.c": "arr[1] > 0"})
    with pytest.raises(UnsupportedFeatureError, match="subscript") as info:
        write_data_files(pa.table({"arr": [[-1, 5]]}), state)
    assert info.value.feature == "checkConstraints"


def test_generated_value_decodes_escapes(root: str) -> None:
    schema = pa.schema([("s", pa.string()), ("g", pa.string())])
    text = schema_json(
        schema, metadata={"g": {"delta.generationExpression": "concat(s, '\\t', 'end')"}}
    )
    state = make_state(root, text)
    [add] = write_data_files(pa.table({"s": ["lq"]}), state)
    stored = pq.read_table(Path(root) / unquote(add["path"])).column("g").to_pylist()
    assert stored == ["lq\tend"]
