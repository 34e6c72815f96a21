"""The four engines (Arrow table, Arrow stream, DuckDB, Polars) return the same rows as a
Python oracle, over partitioned tables with null partition values and schema evolution;
the planner skips files; DuckDB and Polars read Parquet natively with pushdown."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import hypothesis.strategies as st
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from tablekit import TableKit, dv_protocol, metadata_action, remove_action, with_dv

import lakequery as lq

D1 = dt.date(2024, 1, 1)
D2 = dt.date(2024, 1, 2)
OLD_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("x", pa.float64()),
        ("name", pa.string()),
        ("s", pa.string()),
        ("i", pa.int32()),
        ("d", pa.date32()),
    ]
)
NEW_SCHEMA = OLD_SCHEMA.append(pa.field("extra", pa.int64()))
PARTITIONS = ["s", "i", "d"]
COLUMNS = NEW_SCHEMA.names
NAMES = ["apple", "apricot", "banana", None, "cherry", "a_b", "100%", "grape fruit"]
# (s, i, d) of each file; files 0..3 predate the `extra` column
FILE_PARTS: list[tuple[str | None, int | None, dt.date | None]] = [
    ("p", 1, D1),
    ("p", 1, D1),
    ("p", 2, D2),
    ("q", None, D1),
    (None, 2, None),
    ("r s", 1, D2),
    ("q", 2, D1),
    (None, None, None),
]
ROWS_PER_FILE = 25


def _row(file_no: int, k: int) -> dict[str, Any]:
    rid = file_no * ROWS_PER_FILE + k
    s, i, d = FILE_PARTS[file_no]
    return {
        "id": rid,
        "x": None if rid % 11 == 0 else (rid % 7) * 0.5,
        "name": NAMES[rid % len(NAMES)],
        "s": s,
        "i": i,
        "d": d,
        "extra": None if file_no < 4 or rid % 5 == 0 else rid * 10,
    }


class Dataset:
    def __init__(self, uri: str, rows: list[dict[str, Any]], files: list[str]) -> None:
        self.uri = uri
        self.rows = rows  # every live row, with "_file" = decoded relative path
        self.files = files


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    root = tmp_path_factory.mktemp("engines") / "t"
    kit = TableKit(root)
    kit.create(OLD_SCHEMA, partition_by=PARTITIONS)
    rows: list[dict[str, Any]] = []
    files: list[str] = []

    def write(file_no: int, schema: pa.Schema) -> dict[str, Any]:
        batch = [_row(file_no, k) for k in range(ROWS_PER_FILE)]
        table = pa.Table.from_pylist(
            [{c: r[c] for c in schema.names} for r in batch], schema=schema
        )
        s, i, d = FILE_PARTS[file_no]
        add = kit.write_parquet(table, partition_values={"s": s, "i": i, "d": d})
        path = unquote(add["add"]["path"])
        files.append(path)
        rows.extend({**r, "_file": path} for r in batch)
        return add

    kit.commit([write(n, OLD_SCHEMA) for n in range(4)])  # v1
    kit.commit([metadata_action(NEW_SCHEMA, PARTITIONS)])  # v2: add column `extra`
    kit.commit([write(n, NEW_SCHEMA) for n in range(4, 8)])  # v3
    # v4: a removed file must not be read by any engine
    gone = kit.write_parquet(
        pa.Table.from_pylist([{"id": 999, "x": 1.0, "name": "zzz", "extra": 1}]),
        partition_values={"s": "p", "i": 1, "d": D1},
    )
    kit.commit([gone])
    kit.commit([remove_action(gone)])  # v5
    return Dataset(kit.uri, rows, files)


# ---------------------------------------------------------------------------------------------
# a small filter language: rendered to SQL, evaluated in Python with SQL's three-valued logic
# ---------------------------------------------------------------------------------------------

Node = tuple[Any, ...]


NEG = "negated"  # last element of an IN / BETWEEN / LIKE node rendered as NOT IN ...


def _lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return repr(v)


def render(n: Node) -> str:
    kind = n[0]
    if kind == "cmp":
        return f"{n[1]} {n[2]} {_lit(n[3])}"
    neg = "NOT " if n[-1] is NEG else ""
    if kind == "in":
        return f"{n[1]} {neg}IN ({', '.join(_lit(v) for v in n[2])})"
    if kind == "between":
        return f"{n[1]} {neg}BETWEEN {_lit(n[2])} AND {_lit(n[3])}"
    if kind == "like":
        return f"{n[1]} {neg}LIKE {_lit(n[2])}"
    if kind == "isnull":
        return f"{n[1]} IS {'NOT ' if n[2] else ''}NULL"
    if kind in ("and", "or"):
        return f"({render(n[1])} {kind.upper()} {render(n[2])})"
    if kind == "not":
        return f"NOT ({render(n[1])})"
    raise AssertionError(n)


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _like(value: str, pattern: str) -> bool:
    rx = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, value, flags=re.DOTALL) is not None


def evaluate(n: Node, row: dict[str, Any]) -> bool | None:
    kind = n[0]
    if kind in ("cmp", "in", "between", "like"):
        v = row[n[1]]
        if v is None:
            return None
        if kind == "cmp":
            result: bool | None = _OPS[n[2]](v, n[3])
        elif kind == "in":
            values = [x for x in n[2] if x is not None]
            result = True if v in values else (None if len(values) < len(n[2]) else False)
        elif kind == "between":
            result = n[2] <= v <= n[3]
        else:
            result = _like(v, n[2])
        if n[-1] is NEG and result is not None:
            return not result
        return result
    if kind == "isnull":
        return (row[n[1]] is not None) if n[2] else (row[n[1]] is None)
    if kind == "not":
        inner = evaluate(n[1], row)
        return None if inner is None else not inner
    a, b = evaluate(n[1], row), evaluate(n[2], row)
    if kind == "and":
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if a is True or b is True:  # or
        return True
    return None if a is None or b is None else False


DOMAINS: dict[str, st.SearchStrategy[Any]] = {
    "id": st.integers(-5, 210),
    "x": st.sampled_from([0.0, 0.5, 1.25, 1.5, 2.0, 3.0, 10.0]),
    "name": st.sampled_from([n for n in NAMES if n is not None] + ["aardvark", ""]),
    "s": st.sampled_from(["p", "q", "r s", "zz"]),
    "i": st.integers(0, 3),
    "d": st.sampled_from([D1, D2, dt.date(2023, 12, 31)]),
    "extra": st.integers(0, 2100),
}
LIKE_PATTERNS = ["a%", "%an%", "_pple", "%a", "b%a", "%", "a_b", "100%", "% %", "ch_rry"]


@st.composite
def atoms(draw: st.DrawFn) -> Node:
    col = draw(st.sampled_from(COLUMNS))
    dom = DOMAINS[col]
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "between", "isnull", "like"]))
    neg = NEG if draw(st.integers(0, 3)) == 0 else None
    if kind == "like" and col in ("name", "s"):
        return ("like", col, draw(st.sampled_from(LIKE_PATTERNS)), neg)
    if kind == "cmp" or kind == "like":
        return ("cmp", col, draw(st.sampled_from(sorted(_OPS))), draw(dom))
    if kind == "in":
        values = draw(st.lists(dom, min_size=1, max_size=3, unique=True))
        if draw(st.integers(0, 4)) == 0:
            values.append(None)
        return ("in", col, values, neg)
    if kind == "between":
        lo, hi = sorted([draw(dom), draw(dom)])
        return ("between", col, lo, hi, neg)
    return ("isnull", col, draw(st.booleans()))


filters = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        st.tuples(st.just("and"), inner, inner),
        st.tuples(st.just("or"), inner, inner),
        st.tuples(st.just("not"), inner),
    ),
    max_leaves=4,
)


# ---------------------------------------------------------------------------------------------
# reading through every engine
# ---------------------------------------------------------------------------------------------


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is not None, v if v is not None else 0) for v in row)


def as_tuples(table: pa.Table, columns: list[str]) -> list[tuple[Any, ...]]:
    assert table.column_names == columns
    cols = [table.column(c).to_pylist() for c in columns]
    return sorted(zip(*cols, strict=True), key=_key) if cols else []


def engine_results(scan: lq.Scan) -> dict[str, pa.Table]:
    reader = scan.to_arrow_reader()
    lf = scan.to_polars()
    assert isinstance(lf, pl.LazyFrame)
    return {
        "arrow": scan.to_arrow(),
        "arrow_reader": pa.Table.from_batches(list(reader), schema=reader.schema),
        "duckdb": scan.to_duckdb().to_arrow_table(),
        "polars": lf.collect().to_arrow(),
    }


def expected(ds: Dataset, flt: Node | None, columns: list[str]) -> list[tuple[Any, ...]]:
    keep = [r for r in ds.rows if flt is None or evaluate(flt, r) is True]
    return sorted((tuple(r[c] for c in columns) for r in keep), key=_key)


def check_engines(ds: Dataset, flt: Node | None, columns: list[str] | None) -> None:
    snap = lq.DeltaTable(ds.uri).snapshot()
    cols = columns or COLUMNS
    scan = snap.scan(columns=columns, filter=render(flt) if flt is not None else None)
    want = expected(ds, flt, cols)
    wrong = {
        engine: f"{len(rows)} rows, first {rows[:3]}"
        for engine, table in engine_results(scan).items()
        if (rows := as_tuples(table, cols)) != want
    }
    assert not wrong, (
        f"filter {render(flt) if flt else None}, columns {columns}: {wrong}; want {len(want)} rows, first {want[:3]}"
    )
    # pruning is sound: every file holding a matching row is planned
    planned = set(scan.plan().files.column("path").to_pylist())
    needed = {r["_file"] for r in ds.rows if flt is None or evaluate(flt, r) is True}
    assert needed <= planned


NAMED_FILTERS: dict[str, Node] = {
    "id-not-null": ("isnull", "id", True),
    "string-partition": ("cmp", "s", "=", "p"),
    "string-partition-with-space": ("cmp", "s", "=", "r s"),
    "string-partition-null": ("isnull", "s", False),
    "int-partition": ("cmp", "i", ">=", 2),
    "int-partition-not-null": ("isnull", "i", True),
    "date-partition": ("cmp", "d", "=", D2),
    "date-partition-null": ("isnull", "d", False),
    "and": ("and", ("cmp", "s", "=", "q"), ("cmp", "id", ">", 80)),
    "or": ("or", ("cmp", "i", "=", 1), ("cmp", "x", ">=", 2.5)),
    "not": ("not", ("cmp", "s", "=", "p")),
    "not-null-semantics": ("not", ("cmp", "name", "=", "apple")),
    "in": ("in", "name", ["apple", "cherry", "nope"], None),
    "in-partition": ("in", "i", [2, 3], None),
    "not-in": ("in", "name", ["apple", "cherry"], NEG),
    "not-in-partition": ("in", "s", ["p"], NEG),
    "in-with-null": ("in", "s", ["p", None], None),
    "not-of-in-with-null": ("not", ("in", "s", ["q", None], None)),
    "not-in-with-null": ("in", "i", [1, None], NEG),
    "between": ("between", "id", 30, 60, None),
    "not-between": ("between", "id", 30, 160, NEG),
    "between-date": ("between", "d", D1, D1, None),
    "like-prefix": ("like", "name", "a%", None),
    "like-underscore": ("like", "name", "a_b", None),
    "like-percent-literal": ("like", "name", "100%", None),
    "like-partition": ("like", "s", "r%", None),
    "not-like": ("like", "name", "%an%", NEG),
    "is-null-data": ("isnull", "x", False),
    "evolved-column": ("cmp", "extra", ">", 1000),
    "evolved-column-null": ("isnull", "extra", False),
    "mixed": (
        "or",
        ("and", ("isnull", "s", False), ("between", "x", 0.5, 1.5)),
        ("not", ("in", "d", [D1], None)),
    ),
}


@pytest.mark.parametrize("name", sorted(NAMED_FILTERS))
def test_engines_agree_on_named_filters(dataset: Dataset, name: str) -> None:
    check_engines(dataset, NAMED_FILTERS[name], None)


@pytest.mark.parametrize(
    "columns",
    [["id"], ["name", "id"], ["s", "extra"], ["d", "i", "s"], ["extra"], ["x", "d", "name"]],
)
def test_engines_agree_on_column_subsets(dataset: Dataset, columns: list[str]) -> None:
    check_engines(dataset, None, columns)
    check_engines(dataset, ("cmp", "id", "<", 120), columns)  # filter on an unselected column


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flt=st.one_of(st.none(), filters),
    columns=st.one_of(
        st.none(), st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=4, unique=True)
    ),
)
def test_engines_agree_with_oracle_property(
    dataset: Dataset, flt: Node | None, columns: list[str] | None
) -> None:
    check_engines(dataset, flt, columns)


def test_full_scan_content_and_schema(dataset: Dataset) -> None:
    snap = lq.DeltaTable(dataset.uri).snapshot()
    assert snap.version == 5
    assert snap.schema.names == COLUMNS
    table = snap.scan().to_arrow()
    assert table.schema.field("i").type == pa.int32()
    assert table.schema.field("d").type == pa.date32()
    assert table.num_rows == len(dataset.rows) == 8 * ROWS_PER_FILE
    assert 999 not in table.column("id").to_pylist()


def test_pyarrow_expression_filter(dataset: Dataset) -> None:
    import pyarrow.compute as pc

    snap = lq.DeltaTable(dataset.uri).snapshot()
    scan = snap.scan(columns=["id"], filter=(pc.field("s") == "q") & (pc.field("id") > 80))
    want = expected(dataset, NAMED_FILTERS["and"], ["id"])
    for engine, table in engine_results(scan).items():
        assert as_tuples(table, ["id"]) == want, engine


# ---------------------------------------------------------------------------------------------
# planning
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flt",
    [
        "s = 'p'",
        "i = 2",
        "d = DATE '2024-01-02'",
        "s IS NULL",
        "id >= 150",
        "id < 20",
        "id BETWEEN 60 AND 70",
        "s = 'p' OR id >= 190",
        "(i = 1 AND d = DATE '2024-01-01') OR id < 5",
        "s IN ('q', 'r s')",
    ],
)
def test_plan_skips_files(dataset: Dataset, flt: str) -> None:
    snap = lq.DeltaTable(dataset.uri).snapshot()
    plan = snap.scan(filter=flt).plan()
    assert plan.total_files == len(dataset.files) == 8
    assert 0 < plan.num_files < plan.total_files, flt
    assert plan.skipped_files == plan.total_files - plan.num_files


def test_plan_without_filter_keeps_every_file(dataset: Dataset) -> None:
    plan = lq.DeltaTable(dataset.uri).snapshot().scan().plan()
    assert plan.num_files == plan.total_files == 8
    assert sorted(plan.files.column("path").to_pylist()) == sorted(dataset.files)


def test_filter_matching_nothing_yields_empty_results(dataset: Dataset) -> None:
    snap = lq.DeltaTable(dataset.uri).snapshot()
    scan = snap.scan(columns=["id", "s"], filter="id > 100000")
    assert scan.plan().num_files == 0
    for engine, table in engine_results(scan).items():
        assert table.num_rows == 0, engine
        assert table.column_names == ["id", "s"], engine


# ---------------------------------------------------------------------------------------------
# how each engine reads
# ---------------------------------------------------------------------------------------------


def test_arrow_reader_streams_batches(dataset: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakequery.engines import arrow

    monkeypatch.setattr(arrow, "BATCH_ROWS", ROWS_PER_FILE)  # a batch per file read
    reader = lq.DeltaTable(dataset.uri).snapshot().scan(columns=["id", "s"]).to_arrow_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.names == ["id", "s"]
    batches = list(reader)
    assert len(batches) == len(dataset.files)
    assert all(b.num_rows <= ROWS_PER_FILE for b in batches)
    assert sum(b.num_rows for b in batches) == len(dataset.rows)


def test_arrow_reader_joins_small_files_into_one_batch(dataset: Dataset) -> None:
    """Files of several partitions go through one scanner, and their small batches are
    finished together: each keeps its own partition values."""
    scan = lq.DeltaTable(dataset.uri).snapshot().scan(columns=["id", "s", "i"])
    batches = list(scan.to_arrow_reader())
    assert len(batches) == 1
    got = sorted(zip(*(batches[0].column(c).to_pylist() for c in ("id", "s", "i")), strict=True))
    assert got == sorted((r["id"], r["s"], r["i"]) for r in dataset.rows)


def test_arrow_reader_batches_stay_within_batch_rows(
    dataset: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakequery.engines import arrow

    monkeypatch.setattr(arrow, "BATCH_ROWS", 2 * ROWS_PER_FILE + 1)  # two files, not three
    batches = list(lq.DeltaTable(dataset.uri).snapshot().scan().to_arrow_reader())
    assert [b.num_rows for b in batches] == [2 * ROWS_PER_FILE] * (len(dataset.files) // 2)


def test_to_pandas_reads_the_scan(dataset: Dataset) -> None:
    import pandas as pd

    scan = lq.DeltaTable(dataset.uri).snapshot().scan(columns=["id", "s", "x"], filter="id > 10")
    df = scan.to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["id", "s", "x"]
    assert sorted(df["id"]) == sorted(r["id"] for r in dataset.rows if r["id"] > 10)
    typed = scan.to_pandas(types_mapper=pd.ArrowDtype)  # keywords reach pyarrow
    assert all(isinstance(t, pd.ArrowDtype) for t in typed.dtypes)
    back = pa.Table.from_pandas(typed, preserve_index=False).sort_by("id")
    assert back.to_pylist() == scan.to_arrow().sort_by("id").to_pylist()


def test_duckdb_reads_parquet_natively(dataset: Dataset) -> None:
    import duckdb

    con = duckdb.connect()
    rel = (
        lq.DeltaTable(dataset.uri)
        .snapshot()
        .scan(columns=["id", "name"], filter="id > 10 AND s = 'p'")
        .to_duckdb(con)
    )
    assert "read_parquet" in rel.sql_query().lower()
    plan = rel.explain().upper()
    assert "READ_PARQUET" in plan or "PARQUET_SCAN" in plan
    assert "ARROW" not in plan
    # the relation lives on the given connection and composes with SQL
    [(n,)] = rel.aggregate("count(*)").fetchall()
    assert n == len([r for r in dataset.rows if r["id"] > 10 and r["s"] == "p"])


def test_polars_is_a_lazy_parquet_scan_with_pushdown(dataset: Dataset) -> None:
    lf = (
        lq.DeltaTable(dataset.uri)
        .snapshot()
        .scan(columns=["id", "name"], filter="id > 10 AND name = 'apple'")
        .to_polars()
    )
    assert isinstance(lf, pl.LazyFrame)
    plan = lf.explain()
    assert "Parquet SCAN" in plan
    scan_part = plan[plan.index("Parquet SCAN") :]
    selection = re.search(r"SELECTION: (.*)", scan_part)
    assert selection is not None, plan
    assert selection.group(1).strip() not in ("None", "")
    assert "id" in selection.group(1)
    got = sorted(lf.collect()["id"].to_list())
    assert got == sorted(r["id"] for r in dataset.rows if r["id"] > 10 and r["name"] == "apple")


# ---------------------------------------------------------------------------------------------
# lq.sql
# ---------------------------------------------------------------------------------------------


def test_sql_joins_two_tables(tmp_path: Path) -> None:
    customers = TableKit(tmp_path / "customers")
    customers.create(pa.schema([("cid", pa.int64()), ("cname", pa.string())]))
    customers.commit(
        [
            customers.write_parquet(
                pa.table({"cid": pa.array([1, 2, 3], pa.int64()), "cname": ["ann", "bob", "cy"]})
            )
        ]
    )
    orders = TableKit(tmp_path / "orders")
    schema = pa.schema(
        [("oid", pa.int64()), ("cid", pa.int64()), ("amount", pa.float64()), ("day", pa.date32())]
    )
    orders.create(schema, partition_by=["day"])
    order_rows = [(i, i % 3 + 1, float(i), D1 if i % 2 else D2) for i in range(1, 13)]
    for day in (D1, D2):
        part = [r for r in order_rows if r[3] == day]
        orders.commit(
            [
                orders.write_parquet(
                    pa.table(
                        {
                            "oid": pa.array([r[0] for r in part], pa.int64()),
                            "cid": pa.array([r[1] for r in part], pa.int64()),
                            "amount": [r[2] for r in part],
                        }
                    ),
                    partition_values={"day": day},
                )
            ]
        )
    rel = lq.sql(
        "SELECT c.cname, count(*) AS n, sum(o.amount) AS total "
        "FROM o JOIN c ON o.cid = c.cid WHERE o.day = DATE '2024-01-01' "
        "GROUP BY c.cname ORDER BY c.cname",
        o=orders.uri,
        c=lq.DeltaTable(customers.uri),
    )
    got = rel.fetchall()
    want: dict[str, list[float]] = {}
    names = {1: "ann", 2: "bob", 3: "cy"}
    for oid, cid, amount, day in order_rows:
        if day == D1:
            want.setdefault(names[cid], []).append(amount)
        assert oid > 0
    assert got == [(k, len(v), sum(v)) for k, v in sorted(want.items())]
    # a time-travelled snapshot and a filtered scan are accepted too
    old = lq.DeltaTable(orders.uri).snapshot(version=1)
    assert lq.sql("SELECT count(*) FROM o", o=old).fetchall() == [(6,)]
    small = lq.DeltaTable(orders.uri).snapshot().scan(filter="amount > 10")
    assert lq.sql("SELECT sum(amount) FROM o", o=small).fetchall() == [(23.0,)]


# ---------------------------------------------------------------------------------------------
# deletion vectors and many partitions
# ---------------------------------------------------------------------------------------------


def test_engines_apply_deletion_vectors(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    kit.create(schema, partition_by=["p"], protocol=dv_protocol())
    big_n = 300_000  # more than one Arrow batch and several row groups
    big = kit.write_parquet(
        pa.table({"id": pa.array(range(big_n), pa.int64())}),
        partition_values={"p": "big"},
        row_group_size=70_000,
    )
    small = kit.write_parquet(
        pa.table({"id": pa.array(range(big_n, big_n + 10), pa.int64())}),
        partition_values={"p": None},
    )
    plain = kit.write_parquet(
        pa.table({"id": pa.array(range(big_n + 10, big_n + 20), pa.int64())}),
        partition_values={"p": "plain"},
    )
    kit.commit([big, small, plain])
    big_deleted = set(range(0, big_n, 997)) | {69_999, 70_000, 131_071, 131_072, big_n - 1}
    small_deleted = {0, 5, 9}
    dv_big = kit.write_dv(big_deleted)
    dv_small = kit.write_dv(small_deleted)
    kit.commit(
        [remove_action(big), with_dv(big, dv_big), remove_action(small), with_dv(small, dv_small)]
    )
    expected_ids = sorted(
        [i for i in range(big_n) if i not in big_deleted]
        + [big_n + k for k in range(10) if k not in small_deleted]
        + list(range(big_n + 10, big_n + 20))
    )
    snap = lq.DeltaTable(kit.uri).snapshot()
    for flt in (None, "id >= 131000", "p IS NULL OR p = 'plain'"):
        scan = snap.scan(columns=["id", "p"], filter=flt)
        want = [
            i
            for i in expected_ids
            if flt is None
            or (flt.startswith("id") and i >= 131_000)
            or (flt.startswith("p") and i >= big_n)
        ]
        for engine, table in engine_results(scan).items():
            got = sorted(table.column("id").to_pylist())
            assert got == want, (engine, flt)
    # only the partition column: deleted rows still leave the count
    for engine, table in engine_results(snap.scan(columns=["p"])).items():
        assert table.num_rows == len(expected_ids), engine
    # no column at all: the rows alone, deleted ones dropped
    assert_rows_without_columns(snap.scan(columns=[]), len(expected_ids))
    assert_rows_without_columns(
        snap.scan(columns=[], filter="id >= 131000"), len([i for i in expected_ids if i >= 131_000])
    )


def assert_rows_without_columns(scan: Any, want: int) -> None:
    """``columns=[]`` returns ``want`` rows of no column through Arrow, pandas and Polars
    (as ``pyarrow.dataset`` and ``deltalake`` do), and a clear refusal from DuckDB, whose
    relations have at least one column."""
    table = scan.to_arrow()
    assert (table.num_rows, table.num_columns) == (want, 0)
    assert scan.to_arrow_reader().read_all().num_rows == want
    assert scan.to_pandas().shape == (want, 0)
    assert scan.to_polars().collect().shape == (want, 0)
    with pytest.raises(lq.SchemaError, match=r"columns=\[\].*count\(\*\)"):
        scan.to_duckdb()


@pytest.mark.parametrize("flt", [None, "id < 120", "s = 'p'", "id > 100000"])
def test_no_columns_gives_the_rows_alone(dataset: Dataset, flt: str | None) -> None:
    snap = lq.DeltaTable(dataset.uri).snapshot()
    ((want,),) = snap.scan(filter=flt).to_duckdb().aggregate("count(*)").fetchall()
    assert_rows_without_columns(snap.scan(columns=[], filter=flt), want)


def test_many_partition_groups(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("tag", pa.string())])
    kit.create(schema, partition_by=["k", "tag"])
    adds = []
    expected_rows = []
    for k in range(80):  # more groups than one union of constant scans
        tag = None if k % 9 == 0 else f"t{k % 4}"
        part_k = None if k % 13 == 0 else k
        ids_ = [k * 10 + j for j in range(3)]
        adds.append(
            kit.write_parquet(
                pa.table({"id": pa.array(ids_, pa.int64())}),
                partition_values={"k": part_k, "tag": tag},
            )
        )
        expected_rows += [(i, part_k, tag) for i in ids_]
    kit.commit(adds)
    snap = lq.DeltaTable(kit.uri).snapshot()
    cases: dict[str | None, Callable[[tuple[Any, ...]], bool]] = {
        None: lambda r: True,
        "tag = 't1'": lambda r: r[2] == "t1",
        "k IS NULL OR tag IS NULL": lambda r: r[1] is None or r[2] is None,
        "id + 1 > 400 AND k > 40": lambda r: r[0] + 1 > 400 and r[1] is not None and r[1] > 40,
    }
    for flt, pred in cases.items():
        scan = snap.scan(filter=flt)
        want = sorted((r for r in expected_rows if pred(r)), key=_key)
        for engine, table in engine_results(scan).items():
            assert as_tuples(table, ["id", "k", "tag"]) == want, (engine, flt)


PARTITION_STRINGS = [
    "a:b",
    "US/East",
    "100%",
    "a{b",
    "a}b",
    "x=y",
    "é",
    "a'b",
    "[x]",
    "a*b",
    "q?",
    "c d",
]


def test_special_characters_in_partition_values(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(pa.schema([("id", pa.int64()), ("p", pa.string())]), partition_by=["p"])
    adds = [
        kit.write_parquet(pa.table({"id": pa.array([n], pa.int64())}), partition_values={"p": v})
        for n, v in enumerate(PARTITION_STRINGS)
    ]
    kit.commit(adds)
    snap = lq.DeltaTable(kit.uri).snapshot()
    want = sorted(enumerate(PARTITION_STRINGS))
    for engine, table in engine_results(snap.scan()).items():
        got = sorted(zip(table["id"].to_pylist(), table["p"].to_pylist(), strict=True))
        assert got == want, engine
    for n, v in enumerate(PARTITION_STRINGS):
        scan = snap.scan(columns=["id"], filter="p = " + _lit(v))
        assert scan.plan().num_files == 1, v
        for engine, table in engine_results(scan).items():
            assert table["id"].to_pylist() == [n], (engine, v)


@pytest.mark.parametrize("name", ["data [1].parquet", "x*.parquet", "what?.parquet"])
def test_file_names_with_glob_characters_are_literal(tmp_path: Path, name: str) -> None:
    """``add.path`` names one file; engines must not expand glob characters in it."""
    import pyarrow.parquet as pq

    kit = TableKit(tmp_path / "t")
    kit.create(pa.schema([("id", pa.int64())]))
    add = kit.write_parquet(pa.table({"id": pa.array([1], pa.int64())}), name=name)
    kit.commit([add])
    # decoys a glob would match, not part of the table
    for decoy in ("data 1.parquet", "xyz.parquet", "whatX.parquet"):
        pq.write_table(pa.table({"id": pa.array([666], pa.int64())}), kit.root / decoy)
    scan = lq.DeltaTable(kit.uri).snapshot().scan()
    got = {engine: table["id"].to_pylist() for engine, table in engine_results(scan).items()}
    assert got == {engine: [1] for engine in got}


def test_polars_reads_a_hive_table_without_its_partition_columns(tmp_path: Path) -> None:
    """Regression: a scan of a Hive-laid-out table that reads no or only some partition
    columns must still give Polars every directory key in its Hive schema."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["p", "q", "p"], "i": [1, 1, 2]})
    lq.write(uri, t, partition_by=["s", "i"])
    scan = lq.DeltaTable(uri).snapshot().scan(columns=["id"], filter="id != 2")
    assert sorted(scan.to_polars().collect()["id"].to_list()) == [1, 3]
    assert sorted(scan.to_arrow()["id"].to_pylist()) == [1, 3]
    # some partition columns but not all: the directories still name every one
    some = lq.DeltaTable(uri).snapshot().scan(columns=["s", "id"], filter="id != 2")
    assert some.to_polars().collect().sort("id").rows() == [("p", 1), ("p", 3)]
    assert sorted((r["s"], r["id"]) for r in some.to_arrow().to_pylist()) == [("p", 1), ("p", 3)]


def test_arrow_reader_masks_dv_files_of_several_partitions(tmp_path: Path) -> None:
    """Files with DVs in several partitions share one scanner: each batch keeps its own
    file's deleted rows out and its own partition values."""
    uri = str(tmp_path / "t")
    rows = pa.table({"id": range(300), "p": [i % 7 for i in range(300)]})
    lq.write(uri, rows, partition_by=["p"], configuration={"delta.enableDeletionVectors": "true"})
    lq.write(uri, rows, partition_by=["p"], mode="append")
    dt = lq.DeltaTable(uri)
    assert dt.delete("id % 5 = 0 AND p < 4").num_deletion_vectors_added == 8
    got = dt.snapshot().scan().to_arrow()
    want = sorted((i, i % 7) for i in range(300) if not (i % 5 == 0 and i % 7 < 4)) * 2
    pairs = zip(got.column("id").to_pylist(), got.column("p").to_pylist(), strict=True)
    assert sorted(pairs) == sorted(want)


@pytest.mark.parametrize("flt", ["id + 10 > 5", "id * id > 5", "id - 10 < -5"])
def test_integer_filter_arithmetic_near_int64_limits(tmp_path: Path, flt: str) -> None:
    """DuckDB and Polars compute a filter's integer arithmetic exactly, never a wrapped
    int64: Polars' own Parquet pushdown skipped the whole file by the wrapped bounds of
    its statistics (0 rows of 3 for ``id + 10 > 5``). The Arrow engine computes in int64
    and refuses an overflow as a PredicateError, never returning wrapped results."""
    big, small = 2**63 - 2, -(2**63) + 2
    ids = [1, 2, big, small, None]
    lq.write(str(tmp_path), pa.table({"id": pa.array(ids, pa.int64())}))
    scan = lq.DeltaTable(tmp_path).snapshot().scan(filter=flt)
    keep = {
        "id + 10 > 5": lambda i: i + 10 > 5,
        "id * id > 5": lambda i: i * i > 5,
        "id - 10 < -5": lambda i: i - 10 < -5,
    }[flt]
    expected = sorted(i for i in ids if i is not None and keep(i))
    assert sorted(r[0] for r in scan.to_duckdb().fetchall()) == expected
    assert sorted(scan.to_polars().collect()["id"].to_list()) == expected
    with pytest.raises(lq.PredicateError, match="integer overflow"):
        scan.to_arrow()


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_struct_fields_added_later_read_as_null_in_older_files(
    tmp_path: Path, mode: str
) -> None:
    """Under column mapping, a struct field added by a schema merge (also in a list or a
    map value) is absent from older files: every engine reads it as NULL, and DML, which
    reads through DuckDB, works on the table."""
    uri = str(tmp_path / "t")
    old = pa.struct([("a", pa.int64())])
    new = pa.struct([("a", pa.int64()), ("c", pa.float64())])
    first = pa.table(
        {
            "id": [1, 2],
            "s": pa.array([{"a": 1}, None], old),
            "l": pa.array([[{"a": 1}], None], pa.list_(old)),
            "m": pa.array([[("k", {"a": 1})], None], pa.map_(pa.string(), old)),
        }
    )
    lq.write(uri, first, configuration={"delta.columnMapping.mode": mode})
    second = pa.table(
        {
            "id": [3],
            "s": pa.array([{"a": 3, "c": 1.5}], new),
            "l": pa.array([[{"a": 3, "c": 1.5}]], pa.list_(new)),
            "m": pa.array([[("k", {"a": 3, "c": 1.5})]], pa.map_(pa.string(), new)),
        }
    )
    lq.write(uri, second, mode="append", schema_mode="merge")
    dt_ = lq.DeltaTable(uri)
    scan = dt_.snapshot().scan()
    want = sorted(scan.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert want[0]["s"] == {"a": 1, "c": None} and want[0]["l"] == [{"a": 1, "c": None}]
    assert want[0]["m"] == [("k", {"a": 1, "c": None})]
    rel = scan.to_duckdb()
    got = [dict(zip(rel.columns, r, strict=True)) for r in rel.order("id").fetchall()]
    assert [r["s"] for r in got] == [r["s"] for r in want]
    assert [r["l"] for r in got] == [r["l"] for r in want]
    assert [dict(r["m"] or {}) for r in got] == [dict(r["m"] or []) for r in want]
    assert dt_.update("id = 1", set={"id": "10"}).num_updated_rows == 1
    assert dt_.delete("id = 2").num_deleted_rows == 1
    after = dt_.snapshot().scan(columns=["id", "s"]).to_arrow().to_pylist()
    assert sorted(after, key=lambda r: r["id"]) == [
        {"id": 3, "s": {"a": 3, "c": 1.5}},
        {"id": 10, "s": {"a": 1, "c": None}},
    ]


@pytest.mark.parametrize("flt", ["x = 'NaN'", "x >= 'NaN'", "x + 1 > 10", "s.y = 'NaN'"])
def test_nan_rows_of_files_whose_footers_leave_nan_out(tmp_path: Path, flt: str) -> None:
    """Parquet footer min/max leave NaN out (delta-rs and pyarrow write them so); no
    engine may skip a row group by them for a filter NaN satisfies."""
    import deltalake

    uri = str(tmp_path / "t")
    data = pa.table(
        {
            "x": [1.0, float("nan")],
            "s": pa.array([{"y": 1.0}, {"y": float("nan")}], pa.struct([("y", pa.float32())])),
        }
    )
    deltalake.write_deltalake(uri, data)
    scan = lq.DeltaTable(uri).snapshot().scan(filter=flt)
    assert scan.to_arrow().num_rows == 1
    assert len(scan.to_duckdb().fetchall()) == 1
    assert scan.to_polars().collect().height == 1


def test_arrow_pushdown_keeps_the_conjuncts_without_floating_point(tmp_path: Path) -> None:
    from lakequery.engines.arrow import _Reader

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1, 2], "x": [1.0, float("nan")], "s": ["a", "b"]}))
    snap = lq.DeltaTable(uri).snapshot()
    reader = _Reader(snap.scan(filter="id > 1 AND x = 'NaN' AND s = 'b'"))
    assert reader.pushdown is not None
    assert str(reader.pushdown) == '((id > 1) and (s == "b"))'  # not the float column x
    assert _Reader(snap.scan(filter="x > 0")).pushdown is None
    assert snap.scan(filter="id > 1 AND x = 'NaN' AND s = 'b'").to_arrow().num_rows == 1


@pytest.mark.parametrize(
    ("flt", "ids"),
    [("s.a IN (1, NULL)", [1]), ("s.a NOT IN (1, NULL)", []), ("s.a IN (NULL)", [])],
)
def test_in_lists_holding_null_over_a_struct_field(
    tmp_path: Path, flt: str, ids: list[int]
) -> None:
    """SQL semantics in every engine; DuckDB 2.0 failed internally on the NULL pushed into
    its Parquet scan of a struct with a list beside it, and invalidated the process's
    engine database for every later read."""
    uri = str(tmp_path / "t")
    rows_ = [{"a": 1, "l": [1]}, {"a": 2, "l": [2]}]
    lq.write(uri, pa.table({"id": [1, 2], "s": pa.array(rows_)}))
    scan = lq.DeltaTable(uri).snapshot().scan(filter=flt, columns=["id"])
    assert sorted(scan.to_arrow()["id"].to_pylist()) == ids
    assert sorted(r[0] for r in scan.to_duckdb().fetchall()) == ids
    assert sorted(scan.to_polars().collect()["id"].to_list()) == ids
    assert lq.sql("SELECT count(*) FROM t", t=uri).fetchall() == [(2,)]  # still usable


def test_a_corrupt_data_file_is_not_reported_missing(tmp_path: Path) -> None:
    """A vacuumed file is an ObjectNotFoundError; a file that exists but does not parse
    is DuckDB's own error, not a missing file (a FileNotFoundError would send the user
    looking for a VACUUM)."""
    import duckdb

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": list(range(100)), "s": pa.array([{"x": i} for i in range(100)])}))
    (data,) = list(Path(uri).glob("*.parquet"))
    snap = lq.DeltaTable(uri).snapshot()
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(duckdb.Error) as info:
        snap.scan().to_duckdb().fetchall()
    assert not isinstance(info.value, FileNotFoundError)
    data.unlink()
    with pytest.raises(lq.ObjectNotFoundError):
        lq.DeltaTable(uri).snapshot().scan().to_duckdb().fetchall()


def test_a_table_without_columns_reads_empty(tmp_path: Path) -> None:
    # another writer's table of no columns (lakequery refuses to write one): Polars raised
    # an IndexError choosing a column to carry the frame's height
    log = tmp_path / "_delta_log"
    log.mkdir()
    meta = {
        "id": "x",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": '{"type":"struct","fields":[]}',
        "partitionColumns": [],
        "configuration": {},
        "createdTime": 1,
    }
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": meta}]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    scan = lq.DeltaTable(str(tmp_path)).snapshot().scan()
    assert scan.to_arrow().shape == (0, 0)
    assert scan.to_polars().collect().shape == (0, 0)


def test_filter_on_a_void_struct_field(tmp_path: Path) -> None:
    """A void field is in no file: the Arrow engine keeps its conjunct out of the dataset
    scan (which would not find it) and evaluates it over the read rows, as the others do."""
    uri = str(tmp_path / "t")
    s = pa.struct([("a", pa.int64()), ("z", pa.null())])
    rows = pa.table({"id": [1, 2, 3], "s": pa.array([{"a": 1, "z": None}, None, {"a": 5}], s)})
    lq.write(uri, rows)
    snap = lq.DeltaTable(uri).snapshot()
    for flt, want in [("s.z IS NULL", [1, 2, 3]), ("s.z IS NULL AND s.a > 2", [3])]:
        for engine, table in engine_results(snap.scan(filter=flt)).items():
            assert sorted(table["id"].to_pylist()) == want, (engine, flt)


@pytest.mark.parametrize("name", ["*", "^v.*$", "^id$"])
def test_names_polars_would_read_as_patterns(tmp_path: Path, name: str) -> None:
    """Polars reads ``*`` and ``^...$`` as patterns; columns and struct fields so named
    are read, projected and filtered as themselves in every engine."""
    uri = str(tmp_path / "t")
    s = pa.struct([(name, pa.int64()), ("k", pa.int64())])
    rows = pa.table(
        {
            name: [100, 200, 300],
            "id": [1, 2, 3],
            "v": [10, 20, 30],
            "s": pa.array([{name: i, "k": -i} for i in (1, 2, 3)], s),
        }
    )
    lq.write(uri, rows)
    snap = lq.DeltaTable(uri).snapshot()
    cases = [
        (None, None, [1, 2, 3]),
        ([name], None, [1, 2, 3]),
        ([name, "id"], f"`{name}` > 100", [2, 3]),
        (None, f"s.`{name}` >= 2", [2, 3]),
    ]
    for columns, flt, want in cases:
        scan = snap.scan(columns=columns, filter=flt)
        for engine, table in engine_results(scan).items():
            assert table.column_names == (columns if columns is not None else rows.column_names)
            assert table.num_rows == len(want), (engine, columns, flt)
            if name in table.column_names:
                got = sorted(table[name].to_pylist())
                assert got == [100 * i for i in want], (engine, columns, flt)
    # no columns: one column read (the first, named like a pattern) and dropped
    assert snap.scan(columns=[]).to_polars().collect().shape == (3, 0)


def test_files_that_keep_arrow_dictionaries(tmp_path: Path) -> None:
    """deltalake keeps a dictionary-encoded string column's Arrow type in the file's
    footer; Polars reads it as the table's string type, as the other engines do."""
    import deltalake

    uri = str(tmp_path / "t")
    cat = pa.array(["a", "b", "a"]).dictionary_encode()
    deltalake.write_deltalake(uri, pa.table({"id": [1, 2, 3], "cat": cat}))
    scan = lq.DeltaTable(uri).snapshot().scan()
    for engine, table in engine_results(scan).items():
        got = sorted(zip(table["id"].to_pylist(), table["cat"].to_pylist(), strict=True))
        assert got == [(1, "a"), (2, "b"), (3, "a")], engine


@pytest.mark.parametrize("value", [10**20, -(10**20), 2**63 - 1])
def test_delta_rs_saturated_decimal_bounds_skip_nothing(tmp_path: Path, value: int) -> None:
    """delta-rs writes decimal(38, 0) bounds as 64-bit integers, saturated (10**20 as
    2**63 - 1): such a bound is unknown, and the file holding the value is read."""
    import decimal

    import deltalake

    uri = str(tmp_path / "t")
    d = pa.array([decimal.Decimal(value), decimal.Decimal(5)], pa.decimal128(38, 0))
    deltalake.write_deltalake(uri, pa.table({"id": [1, 2], "d": d}))
    stats = json.loads(lq.DeltaTable(uri).snapshot().files()["stats"][0].as_py())
    assert abs(int(stats["maxValues" if value > 0 else "minValues"]["d"])) in (2**63 - 1, 2**63)
    scan = lq.DeltaTable(uri).snapshot().scan(filter=f"d = {value}")
    assert scan.plan().num_files == 1
    for engine, table in engine_results(scan).items():
        assert table["id"].to_pylist() == [1], engine


def test_sql_on_a_connection_of_the_caller(tmp_path: Path) -> None:
    """``lq.sql(con=...)``: temporary views of that connection (tables with deletion
    vectors and many partitions read objects only it sees), names equal but for case
    refused, and a read-only database works."""
    import duckdb

    uri = str(tmp_path / "t")
    rows = pa.table({"id": list(range(6)), "p": [f"v {i}" for i in range(6)]})
    lq.write(uri, rows, partition_by="p", configuration={"delta.enableDeletionVectors": "true"})
    lq.write(uri, rows, mode="append")
    lq.DeltaTable(uri).delete("id = 1")
    con = duckdb.connect()
    assert lq.sql("SELECT count(*) FROM t", con=con, t=uri).fetchall() == [(10,)]
    assert con.sql("SELECT count(*) FROM t").fetchall() == [(10,)]  # still there
    with pytest.raises(ValueError, match="one in SQL"):
        lq.sql("SELECT 1", con=con, t=uri, T=uri)
    con.execute("CREATE TABLE orders AS SELECT 42 AS x")  # the caller's own: not hidden
    with pytest.raises(ValueError, match="would hide it"):
        lq.sql("SELECT 1", con=con, Orders=uri)
    assert con.sql("SELECT * FROM orders").fetchall() == [(42,)]
    db = str(tmp_path / "ro.duckdb")
    duckdb.connect(db).close()
    read_only = duckdb.connect(db, read_only=True)
    assert lq.sql("SELECT count(*) FROM t", con=read_only, t=uri).fetchall() == [(10,)]


def test_repeated_relations_on_a_caller_s_connection_register_nothing_new(
    tmp_path: Path,
) -> None:
    """The tables a relation reads beside its files (deleted positions, partition
    values) are named by their contents: a loop of queries on the caller's connection
    replaces them instead of piling up copies."""
    import duckdb

    uri = str(tmp_path / "t")
    rows = pa.table({"id": list(range(200)), "v": [i % 10 for i in range(200)]})
    lq.write(uri, rows, configuration={"delta.enableDeletionVectors": "true"})
    lq.DeltaTable(uri).delete("id % 2 = 0")
    con = duckdb.connect()
    snap = lq.DeltaTable(uri).snapshot()

    def registered() -> int:
        sql = "SELECT count(*) FROM duckdb_views() WHERE view_name LIKE '_lq_%'"
        ((n,),) = con.sql(sql).fetchall()
        return int(n)

    counts = []
    for _ in range(5):
        rel = snap.scan(filter="v < 5").to_duckdb(con)
        assert rel.aggregate("count(*)").fetchall() == [(40,)]
        counts.append(registered())
    assert counts[0] >= 1 and len(set(counts)) == 1
    lq.DeltaTable(uri).delete("id = 1")  # other deleted positions: their own name
    rel = lq.DeltaTable(uri).snapshot().scan(filter="v < 5").to_duckdb(con)
    assert rel.aggregate("count(*)").fetchall() == [(39,)]
    assert rel.aggregate("count(*)").fetchall() == [(39,)]
    assert snap.scan(filter="v < 5").to_duckdb(con).aggregate("count(*)").fetchall() == [(40,)]


def test_registered_names_tell_contents_apart() -> None:
    """The name of a table registered beside a relation is a digest of its contents:
    different contents never share one (one would replace the other under a relation)."""
    import duckdb
    import numpy as np

    from lakequery.engines.duckdb import _Builder

    builder = object.__new__(_Builder)
    builder.con = duckdb.connect()
    pairs = [
        (pa.table({"k": pa.array([0], pa.int64())}), pa.table({"k": pa.array([None], pa.int64())})),
        ({"k": np.array([1], np.int64)}, {"k": np.array([1, 0], np.int32)}),
        (pa.table({"s": ["ab", "c"]}), pa.table({"s": ["a", "bc"]})),
        (pa.table({"k": [1, 2, 3]}).slice(0, 2), pa.table({"k": [1, 2, 3]}).slice(1, 2)),
    ]
    for a, b in pairs:
        assert builder._register("x", a) != builder._register("x", b)
    assert builder._register("x", {"k": np.arange(3)}) == builder._register(
        "x", {"k": np.arange(3)}
    )
