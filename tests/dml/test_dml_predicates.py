"""Predicates and SET expressions are DuckDB SQL: whatever lakequery's own predicate
language does with them (file pruning, row filtering), DELETE and UPDATE must select
exactly the rows DuckDB's ``DELETE ... WHERE`` / ``UPDATE ... WHERE`` select, for many
column types and expression forms (including ones lakequery's parser reads differently
from DuckDB, e.g. ``/`` is a float division, ``NOT IN`` with a NULL never holds). The one
documented difference: a literal takes its column's type, as in ``scan(filter=)``
(``f > 0.1e0`` on a FLOAT column compares with the float 0.1), so the rows selected never
depend on which files pruning kept."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from dmlkit import Oracle, check_all_engines

import lakequery as lq


def _table() -> pa.Table:
    n = 24
    base = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "a": pa.array([None if i % 7 == 3 else i - 10 for i in range(n)], pa.int64()),
            "b": pa.array([None if i % 5 == 1 else (i * 3) % 11 - 5 for i in range(n)], pa.int32()),
            "s": pa.array(
                [None if i % 6 == 2 else ["a", "B", "ab", "ä", "z", ""][i % 6] for i in range(n)]
            ),
            "f": pa.array([None if i % 8 == 4 else i / 4 - 2 for i in range(n)], pa.float64()),
            "d": pa.array(
                [
                    None if i % 9 == 5 else dt.date(2024, 1, 1) + dt.timedelta(days=i)
                    for i in range(n)
                ]
            ),
            "ts": pa.array(
                [base + dt.timedelta(hours=7 * i) for i in range(n)], pa.timestamp("us", tz="UTC")
            ),
            "dec": pa.array(
                [None if i % 4 == 0 else __import__("decimal").Decimal(i) / 4 for i in range(n)],
                pa.decimal128(10, 2),
            ),
            "flag": pa.array([None if i % 10 == 0 else i % 3 == 0 for i in range(n)], pa.bool_()),
        }
    )


PREDICATES = [
    "a / 2 = 1",
    "a / 4 > 1",
    "a // 3 = -1",
    "a % 3 = 1",
    "a % 4 = -1",
    "-a > 3",
    "a * 1.5 > 4",
    "a = '3'",
    "'3' = a",
    "a = 3.0",
    "a = 3.5",
    "b = 2147483648",
    "b > -2147483649",
    "a + b > 3",
    "a - b < 0",
    "a BETWEEN -2 AND 4",
    "a NOT BETWEEN -2 AND 4",
    "a IN (1, NULL)",
    "a NOT IN (1, NULL)",
    "a NOT IN (1, 2)",
    "s IN ('a', NULL)",
    "s NOT IN ('a', 'B')",
    "s < 'b'",
    "s > 'a'",
    "s >= 'ä'",
    "s = ''",
    "s <> ''",
    "s LIKE 'a%'",
    "s ILIKE 'b'",
    "s || 'x' = 'ax'",
    "length(s) = 2",
    "a IS DISTINCT FROM 1",
    "a IS NOT DISTINCT FROM NULL",
    "f = 0",
    "f > 0.5",
    "f < -1.75",
    "f = 1 / 4",
    "d > '2024-01-10'",
    "d = DATE '2024-01-03'",
    "d BETWEEN '2024-01-05' AND '2024-01-08'",
    "d IS NULL",
    "ts > '2024-01-03 00:00:00+00'",
    "ts < TIMESTAMPTZ '2024-01-02 12:00:00+00'",
    "ts >= '2024-01-03'",
    "dec > 2.5",
    "dec = 1.25",
    "dec * 2 = 5",
    "flag",
    "NOT flag",
    "flag = true",
    "flag IS NOT TRUE",
    "flag IS NULL OR a > 5",
    "NOT (a > 0 AND s = 'a')",
    "NOT (a > 0 OR s IS NULL)",
    "(a > 0) = (b > 0)",
    "true",
    "false",
    "NULL",
    "1 = 1",
    "id = 3 OR 1 = 0",
    "CAST(a AS VARCHAR) = '-5'",
    "abs(a) < 3",
    "coalesce(a, b, 0) = 0",
    "a > b",
    "A > 0",
    '"a" > 0',
]


@pytest.fixture(scope="module")
def base_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    root = tmp_path_factory.mktemp("pred") / "t"
    t = _table()
    lq.write(str(root), t.slice(0, 8))
    lq.write(str(root), t.slice(8, 8), mode="append")
    lq.write(str(root), t.slice(16), mode="append")
    return str(root), t


@pytest.mark.parametrize("predicate", PREDICATES)
def test_delete_selects_duckdb_rows(
    tmp_path: Path, base_table: tuple[str, pa.Table], predicate: str
) -> None:
    src, t = base_table
    uri = str(tmp_path / "t")
    shutil.copytree(src, uri)
    o = Oracle(t, 2)
    try:
        o.delete(predicate)
    except Exception as exc:  # DuckDB refuses it: lakequery must refuse too
        with pytest.raises(lq.errors.LakeQueryError):
            lq.DeltaTable(uri).delete(predicate)
        pytest.skip(f"DuckDB refuses it: {exc}")
    m = lq.DeltaTable(uri).delete(predicate)
    check_all_engines(uri, o.table(), what=f"DELETE WHERE {predicate}")
    assert m.num_deleted_rows == t.num_rows - o.table().num_rows


@pytest.mark.parametrize("predicate", PREDICATES[::3])
def test_update_selects_duckdb_rows(
    tmp_path: Path, base_table: tuple[str, pa.Table], predicate: str
) -> None:
    src, t = base_table
    uri = str(tmp_path / "t")
    shutil.copytree(src, uri)
    o = Oracle(t, 2)
    sets = {"s": "'upd'", "f": "f * 2"}
    try:
        o.update(predicate, sets)
    except Exception as exc:
        pytest.skip(f"DuckDB refuses it: {exc}")
    lq.DeltaTable(uri).update(predicate, set=sets)
    check_all_engines(uri, o.table(), what=f"UPDATE WHERE {predicate}")


@pytest.mark.parametrize(
    "sets",
    [
        {"a": "a / 2"},
        {"b": "a"},
        {"f": "a"},
        {"dec": "dec * 3 + 0.005"},
        {"d": "d + 1"},
        {"d": "'2025-02-03'"},
        {"ts": "ts + INTERVAL 1 DAY"},
        {"s": "concat(s, id)"},
        {"flag": "NOT flag"},
        {"flag": "a > 0"},
        {"a": "b", "b": "a"},
        {"A": "1"},
    ],
)
def test_update_expressions_match_duckdb(
    tmp_path: Path, base_table: tuple[str, pa.Table], sets: dict[str, str]
) -> None:
    src, t = base_table
    uri = str(tmp_path / "t")
    shutil.copytree(src, uri)
    o = Oracle(t, 2)
    o.update("id % 2 = 0", {k.lower(): v for k, v in sets.items()})
    lq.DeltaTable(uri).update("id % 2 = 0", set=sets)
    check_all_engines(uri, o.table(), what=f"UPDATE SET {sets}")


ESCAPES = ["it's", "a\\b", "a\\'", "x", "%_", "a%b", 'q"q', "tab\there", "é"]


@pytest.mark.parametrize(
    "predicate",
    [
        "s = 'it''s'",
        "s = 'a\\b'",
        "s LIKE 'a\\%b'",
        "s LIKE 'a%b'",
        "s = 'q\"q'",
        '"we""ird" = \'x\'',
        "s = 'tab\there'",
        "s > 'x'",
        "s = 'é'",
        "s LIKE '%\\_' ESCAPE '\\'",
    ],
)
def test_string_literals_and_quoted_identifiers(tmp_path: Path, predicate: str) -> None:
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(len(ESCAPES)), pa.int64()), "s": ESCAPES, 'we"ird': ESCAPES})
    lq.write(uri, t)
    o = Oracle(t, 0)
    o.delete(predicate)
    lq.DeltaTable(uri).delete(predicate)
    check_all_engines(uri, o.table(), what=predicate)


@pytest.mark.parametrize(
    "predicate",
    [
        "p IN ('x', NULL)",
        "p NOT IN ('x', NULL)",
        "p = NULL",
        "p <> NULL",
        "NOT (p IN ('x'))",
        "p IS DISTINCT FROM 'x'",
        "p IS NOT DISTINCT FROM NULL",
    ],
)
def test_partition_predicates_with_null_literals(tmp_path: Path, predicate: str) -> None:
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "p": ["x", "y", None, "x"]})
    lq.write(uri, t, partition_by=["p"])
    o = Oracle(t, 0)
    o.delete(predicate)
    lq.DeltaTable(uri).delete(predicate)
    check_all_engines(uri, o.table(), what=predicate)


@pytest.mark.parametrize("predicate", ["n = 2", "n = 2.0", "a = true", "flag = 1"])
def test_implicit_casts_like_duckdb(tmp_path: Path, predicate: str) -> None:
    """Regression: predicates lakequery parses but cannot bind fall back to DuckDB."""
    uri = str(tmp_path / "t")
    t = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "n": ["1", "2", "3"],
            "a": pa.array([0, 1, 2], pa.int64()),
            "flag": [True, False, None],
        }
    )
    lq.write(uri, t)
    o = Oracle(t, 0)
    o.delete(predicate)
    lq.DeltaTable(uri).delete(predicate)
    check_all_engines(uri, o.table(), what=predicate)


@pytest.mark.parametrize(
    "predicate",
    [
        "n > 1",
        "n IN (1, 3)",
        "n NOT IN (1, 3)",
        "d >= DATE '2024-01-02'",
        "d BETWEEN '2024-01-01' AND '2024-01-02'",
        "b",
        "NOT b",
        "b IS NULL AND s IS NOT NULL",
        "s LIKE 'a%'",
        "s IS NULL OR n = 2",
        "n + 1 = 3",
        "coalesce(n, 0) = 0",
        "lower(s) = 'ab' AND d < DATE '2024-01-03'",
    ],
)
def test_partition_only_predicates_of_several_types(tmp_path: Path, predicate: str) -> None:
    """A predicate over partition columns alone removes whole files, picked by evaluating
    it over each file's partition values (``commands.file_actions.partition_match``; the
    last two, which lakequery's parser does not read, take the row path): the rows left
    must be DuckDB's, nulls included."""
    uri = str(tmp_path / "t")
    n = 12
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "n": pa.array([None if i % 5 == 4 else i % 4 for i in range(n)], pa.int64()),
            "d": pa.array([dt.date(2024, 1, 1 + i % 3) for i in range(n)]),
            "b": pa.array([None if i % 3 == 2 else i % 2 == 0 for i in range(n)]),
            "s": pa.array([None if i % 6 == 5 else ["ab", "AB", "b"][i % 3] for i in range(n)]),
        }
    )
    lq.write(uri, t, partition_by=["n", "d", "b", "s"])
    o = Oracle(t, 0)
    o.delete(predicate)
    m = lq.DeltaTable(uri).delete(predicate)
    assert m.num_deletion_vectors_added == 0  # whole files
    check_all_engines(uri, o.table(), what=predicate)


@pytest.mark.parametrize("predicate", ["f > 0.1e0", "f = 0.1e0", "f >= 0.1e0"])
def test_float_literals_select_the_same_rows_whatever_the_files(
    tmp_path: Path, predicate: str
) -> None:
    """DuckDB compared a FLOAT column with a DOUBLE literal as DOUBLE (0.1f > 0.1), where
    pruning typed the literal as FLOAT: the row 0.1f was deleted in a file kept for its
    other rows, and not when its file was pruned; ``f = 0.1e0`` deleted nothing though
    ``scan(filter=)`` selects the row."""
    counts = []
    for values in ([0.1], [0.1, 5.0]):
        uri = str(tmp_path / f"t{len(values)}")
        lq.write(uri, pa.table({"f": pa.array(values, pa.float32())}))
        selected = lq.DeltaTable(uri).snapshot().scan(filter=predicate).to_arrow()
        counts.append((lq.DeltaTable(uri).delete(predicate).num_deleted_rows, selected.num_rows))
    assert all(deleted == selected for deleted, selected in counts), counts
    assert counts[1][1] - counts[0][1] == (predicate != "f = 0.1e0")  # the 5.0 row
