"""Helpers of the DML tests: an oracle kept in DuckDB, reads through every engine, random
tables, predicates, assignments and merge clauses (hypothesis strategies).

The oracle is a plain DuckDB table ``t`` on which the same DELETE / UPDATE / MERGE INTO
statements run; its state is kept per table version so that time travel can be checked.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from tablekit import read_engines

import lakequery as lq

# --------------------------------------------------------------------------------------------
# comparing rows
# --------------------------------------------------------------------------------------------


def _norm_value(v: Any) -> Any:
    if isinstance(v, float):
        if math.isnan(v):
            return "<NaN>"
        return round(v, 9)
    return v


def rows_of(table: pa.Table, columns: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """A multiset of rows (sorted tuples) of ``table`` restricted to ``columns``."""
    columns = list(columns) if columns is not None else sorted(table.column_names)
    table = table.select(columns)
    out = [tuple(_norm_value(r[c]) for c in columns) for r in table.to_pylist()]
    return sorted(out, key=repr)


def deltalake_table(uri: str, version: int | None = None) -> pa.Table:
    """What ``deltalake`` reads; QueryBuilder (which honours deletion vectors) when the
    table has reader features or column mapping."""
    import deltalake

    dt = deltalake.DeltaTable(uri, version=version)
    proto = dt.protocol()
    mapping = dt.metadata().configuration.get("delta.columnMapping.mode", "none") != "none"
    if proto.min_reader_version >= 2 or mapping:
        query = deltalake.QueryBuilder().register("t", dt)
        return pa.table(query.execute("SELECT * FROM t"))
    return dt.to_pyarrow_table()


def assert_same_rows(
    actual: pa.Table, expected: pa.Table, columns: Sequence[str] | None = None, what: str = ""
) -> None:
    columns = list(columns) if columns is not None else sorted(expected.column_names)
    a, e = rows_of(actual, columns), rows_of(expected, columns)
    if a != e:
        missing = _diff(e, a)
        extra = _diff(a, e)
        raise AssertionError(
            f"{what}: {len(a)} rows vs {len(e)} expected\n"
            f"  missing (expected, not read): {missing[:10]}\n"
            f"  extra (read, not expected): {extra[:10]}"
        )


def _diff(x: list[Any], y: list[Any]) -> list[Any]:
    from collections import Counter

    c = Counter(map(repr, x)) - Counter(map(repr, y))
    return list(c.elements())


def check_all_engines(
    uri: str, expected: pa.Table, version: int | None = None, what: str = "", **kw: Any
) -> None:
    for name, t in read_engines(uri, version, **kw).items():
        assert_same_rows(t, expected, what=f"{what} [{name} @ v{version}]")


# --------------------------------------------------------------------------------------------
# the oracle
# --------------------------------------------------------------------------------------------


@dataclass
class Oracle:
    """The expected table in DuckDB (table ``t``), with its state at each version."""

    initial: pa.Table
    version: int
    con: duckdb.DuckDBPyConnection = field(default_factory=duckdb.connect)
    states: dict[int, pa.Table] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.register("__init", self.initial)
        self.con.execute("CREATE TABLE t AS SELECT * FROM __init")
        self.con.unregister("__init")
        self.states[self.version] = self.table()

    def table(self) -> pa.Table:
        return self.con.sql("SELECT * FROM t").to_arrow_table()

    def run(self, sql: str, source: pa.Table | None = None) -> None:
        if source is not None:
            self.con.register("src", source)
        try:
            self.con.execute(sql)
        finally:
            if source is not None:
                self.con.unregister("src")

    def delete(self, predicate: str | None) -> None:
        self.run("DELETE FROM t" + (f" WHERE {predicate}" if predicate else ""))

    def update(self, predicate: str | None, assignments: Mapping[str, str]) -> None:
        sets = ", ".join(f'"{c}" = {e}' for c, e in assignments.items())
        self.run(f"UPDATE t SET {sets}" + (f" WHERE {predicate}" if predicate else ""))

    def merge(self, source: pa.Table, on: str, clauses: Sequence[Clause]) -> None:
        target_cols = self.con.table("t").columns
        parts = []
        unconditional: set[str] = set()
        for c in clauses:
            if c.kind in unconditional:
                continue  # unreachable (DuckDB refuses it; lakequery never picks it)
            if c.predicate is None:
                unconditional.add(c.kind)
            parts.append(c.duckdb_sql(target_cols, source.column_names))
        sql = f"MERGE INTO t AS t USING src AS s ON ({on}) " + " ".join(parts)
        self.run(sql, source)

    def committed(self, version: int) -> None:
        self.version = version
        self.states[version] = self.table()


# --------------------------------------------------------------------------------------------
# merge clauses
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    """One WHEN clause: kind in matched/not_matched/not_matched_by_source, action in
    update/delete/insert, assignments None for ``*``."""

    kind: str
    action: str
    predicate: str | None
    assignments: tuple[tuple[str, str], ...] | None

    def apply(self, builder: Any) -> Any:
        a = dict(self.assignments) if self.assignments is not None else None
        p = self.predicate
        if self.kind == "matched":
            if self.action == "delete":
                return builder.when_matched_delete(predicate=p)
            if a is None:
                return builder.when_matched_update_all(predicate=p)
            return builder.when_matched_update(set=a, predicate=p)
        if self.kind == "not_matched":
            if a is None:
                return builder.when_not_matched_insert_all(predicate=p)
            return builder.when_not_matched_insert(values=a, predicate=p)
        if self.action == "delete":
            return builder.when_not_matched_by_source_delete(predicate=p)
        return builder.when_not_matched_by_source_update(set=a, predicate=p)

    def duckdb_sql(self, target_cols: Sequence[str], source_cols: Sequence[str]) -> str:
        head = {
            "matched": "WHEN MATCHED",
            "not_matched": "WHEN NOT MATCHED",
            "not_matched_by_source": "WHEN NOT MATCHED BY SOURCE",
        }[self.kind]
        if self.predicate is not None:
            head += f" AND ({self.predicate})"
        if self.action == "delete":
            return f"{head} THEN DELETE"
        if self.assignments is None:
            lowered = {c.lower(): c for c in source_cols}
            pairs = [(c, f's."{lowered[c.lower()]}"') for c in target_cols if c.lower() in lowered]
        else:
            pairs = list(self.assignments)
        if self.action == "update":
            if not pairs:  # UPDATE SET * with no common column: a no-op update
                pairs = [(target_cols[0], f't."{target_cols[0]}"')]
            sets = ", ".join(f'"{c}" = {e}' for c, e in pairs)
            return f"{head} THEN UPDATE SET {sets}"
        cols = ", ".join(f'"{c}"' for c, _ in pairs)
        vals = ", ".join(e for _, e in pairs)
        return f"{head} THEN INSERT ({cols}) VALUES ({vals})"


# --------------------------------------------------------------------------------------------
# random tables
# --------------------------------------------------------------------------------------------

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("a", pa.int64()),
        ("b", pa.int32()),
        ("s", pa.string()),
        ("f", pa.float64()),
    ]
)
PART_SCHEMA = SCHEMA.append(pa.field("p", pa.string()))
STRINGS = ["a", "b", "bc", "m", "x", "zz", ""]
PARTS = ["x", "y", "z"]


@st.composite
def row_batches(draw: Any, partitioned: bool, max_batches: int = 4) -> list[pa.Table]:
    """Several batches (one append each) with unique ids."""
    n_batches = draw(st.integers(1, max_batches))
    next_id = 0
    batches = []
    for _ in range(n_batches):
        n = draw(st.integers(1, 25))
        ids = list(range(next_id, next_id + n))
        next_id += n + draw(st.integers(0, 3))
        a = draw(st.lists(st.one_of(st.none(), st.integers(-10, 10)), min_size=n, max_size=n))
        b = draw(st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=n, max_size=n))
        s = draw(st.lists(st.one_of(st.none(), st.sampled_from(STRINGS)), min_size=n, max_size=n))
        f = draw(
            st.lists(
                st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 0.25, 2.5, 10.0])),
                min_size=n,
                max_size=n,
            )
        )
        cols: dict[str, Any] = {"id": ids, "a": a, "b": b, "s": s, "f": f}
        schema = SCHEMA
        if partitioned:
            cols["p"] = draw(
                st.lists(st.one_of(st.none(), st.sampled_from(PARTS)), min_size=n, max_size=n)
            )
            schema = PART_SCHEMA
        batches.append(pa.table(cols, schema=schema))
    return batches


def create_table(
    uri: str,
    batches: Sequence[pa.Table],
    *,
    partitioned: bool,
    configuration: Mapping[str, str] | None = None,
) -> int:
    """Writes the batches (first creates, then appends); returns the last version."""
    version = -1
    for i, b in enumerate(batches):
        r = lq.write(
            uri,
            b,
            mode="error" if i == 0 else "append",
            partition_by=["p"] if partitioned and i == 0 else None,
            configuration=dict(configuration or {}) if i == 0 else None,
        )
        version = r.version
    return version


# --------------------------------------------------------------------------------------------
# random predicates and expressions
# --------------------------------------------------------------------------------------------


def _atoms(partitioned: bool, prefix: str = "") -> st.SearchStrategy[str]:
    q = prefix
    ints = st.integers(-8, 8)
    atoms = [
        st.builds(
            lambda op, k: f"{q}a {op} {k}", st.sampled_from(["<", "<=", "=", "<>", ">", ">="]), ints
        ),
        st.builds(
            lambda op, k: f"{q}b {op} {k}", st.sampled_from(["<", "=", ">="]), st.integers(-5, 5)
        ),
        st.builds(
            lambda op, k: f"{q}id {op} {k}", st.sampled_from(["<", ">", "="]), st.integers(0, 80)
        ),
        st.builds(
            lambda op, v: f"{q}s {op} '{v}'",
            st.sampled_from(["=", "<", ">="]),
            st.sampled_from(STRINGS),
        ),
        st.builds(
            lambda op, v: f"{q}f {op} {v}",
            st.sampled_from(["<", ">="]),
            st.sampled_from([0.0, 1.0, 2.5]),
        ),
        st.builds(
            lambda c, n: f"{q}{c} IS {n}NULL",
            st.sampled_from(["a", "b", "s", "f"]),
            st.sampled_from(["", "NOT "]),
        ),
        st.builds(
            lambda ks: f"{q}a IN ({', '.join(map(str, ks))})",
            st.lists(ints, min_size=1, max_size=4),
        ),
        st.builds(lambda m, r: f"{q}a % {m} = {r}", st.sampled_from([2, 3]), st.integers(0, 2)),
        st.builds(lambda k: f"{q}a + {q}b > {k}", ints),
        st.builds(lambda k: f"{q}id % 4 = {k}", st.integers(0, 3)),
        st.builds(lambda v: f"{q}s LIKE '{v}%'", st.sampled_from(["b", "z", ""])),
    ]
    if partitioned:
        atoms += [
            st.builds(
                lambda op, v: f"{q}p {op} '{v}'",
                st.sampled_from(["=", "<>", "<"]),
                st.sampled_from(PARTS),
            ),
            st.builds(lambda n: f"{q}p IS {n}NULL", st.sampled_from(["", "NOT "])),
            st.builds(
                lambda vs: f"{q}p IN ({', '.join(repr(v) for v in vs)})",
                st.lists(st.sampled_from(PARTS), min_size=1, max_size=2),
            ),
        ]
    return st.one_of(atoms)


def predicates(partitioned: bool, prefix: str = "") -> st.SearchStrategy[str]:
    """Random SQL predicates: comparisons, IS NULL, IN, arithmetic, AND/OR/NOT."""
    return st.recursive(
        _atoms(partitioned, prefix),
        lambda inner: st.one_of(
            st.builds(lambda x, y: f"({x}) AND ({y})", inner, inner),
            st.builds(lambda x, y: f"({x}) OR ({y})", inner, inner),
            st.builds(lambda x: f"NOT ({x})", inner),
        ),
        max_leaves=4,
    )


def partition_predicates() -> st.SearchStrategy[str]:
    """Predicates on the partition column only."""
    atom = st.one_of(
        st.builds(
            lambda op, v: f"p {op} '{v}'",
            st.sampled_from(["=", "<>", ">="]),
            st.sampled_from(PARTS),
        ),
        st.builds(lambda n: f"p IS {n}NULL", st.sampled_from(["", "NOT "])),
        st.builds(
            lambda vs: f"p IN ({', '.join(repr(v) for v in vs)})",
            st.lists(st.sampled_from(PARTS), min_size=1, max_size=2),
        ),
    )
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            st.builds(lambda x, y: f"({x}) OR ({y})", inner, inner),
            st.builds(lambda x: f"NOT ({x})", inner),
        ),
        max_leaves=3,
    )


def assignments(partitioned: bool, prefix: str = "") -> st.SearchStrategy[dict[str, str]]:
    q = prefix
    choices: dict[str, list[str]] = {
        "a": [f"{q}a + 1", f"{q}a * 2", "NULL", f"coalesce({q}a, 0) - 3", f"{q}b"],
        "b": [f"{q}b - 1", "NULL", "7", f"CASE WHEN {q}a > 0 THEN 1 ELSE 0 END"],
        "s": [f"{q}s || 'u'", "'new'", "NULL", f"upper({q}s)"],
        "f": [f"{q}f * 2", f"{q}f + 0.5", "NULL"],
    }
    if partitioned:
        choices["p"] = ["'y'", "NULL", f"CASE WHEN {q}a > 0 THEN 'x' ELSE 'z' END"]
    keys = list(choices)
    return st.lists(st.sampled_from(keys), min_size=1, max_size=3, unique=True).flatmap(
        lambda cols: st.fixed_dictionaries({c: st.sampled_from(choices[c]) for c in cols})
    )


# --------------------------------------------------------------------------------------------
# merge sources and clauses
# --------------------------------------------------------------------------------------------


@st.composite
def merge_sources(draw: Any, existing_ids: Sequence[int], partitioned: bool) -> pa.Table:
    """A source with unique ids, some of the target's and some new; columns id, a, s and
    sometimes p, b or f."""
    old = (
        draw(st.lists(st.sampled_from(list(existing_ids)), max_size=12, unique=True))
        if existing_ids
        else []
    )
    taken = set(existing_ids)
    fresh = [i for i in range(1000, 1060) if i not in taken]
    new = draw(st.lists(st.sampled_from(fresh), max_size=8, unique=True)) if fresh else []
    ids = old + new
    n = len(ids)
    cols: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "a": pa.array(
            draw(st.lists(st.one_of(st.none(), st.integers(-10, 10)), min_size=n, max_size=n)),
            pa.int64(),
        ),
        "s": pa.array(
            draw(st.lists(st.one_of(st.none(), st.sampled_from(STRINGS)), min_size=n, max_size=n)),
            pa.string(),
        ),
    }
    if draw(st.booleans()):
        cols["f"] = pa.array(
            draw(
                st.lists(st.one_of(st.none(), st.sampled_from([0.5, 3.0])), min_size=n, max_size=n)
            ),
            pa.float64(),
        )
    if partitioned and draw(st.booleans()):
        cols["p"] = pa.array(
            draw(st.lists(st.one_of(st.none(), st.sampled_from(PARTS)), min_size=n, max_size=n)),
            pa.string(),
        )
    return pa.table(cols)


def _source_pred() -> st.SearchStrategy[str]:
    return st.sampled_from(
        ["s.a > 0", "s.a IS NULL", "s.s = 'b'", "s.id % 2 = 0", "s.s IS NOT NULL AND s.a < 3"]
    )


def _target_pred() -> st.SearchStrategy[str]:
    return st.sampled_from(["t.a > 0", "t.a IS NULL", "t.s = 'b'", "t.id % 3 = 0", "NOT (t.b < 0)"])


def _both_pred() -> st.SearchStrategy[str]:
    return st.sampled_from(
        ["s.a > t.a", "t.a IS NULL OR s.a IS NULL", "s.s <> t.s", "t.id % 2 = 1"]
    )


@st.composite
def merge_clauses(draw: Any, source_cols: Sequence[str], partitioned: bool) -> list[Clause]:
    sc = [c for c in source_cols if c != "id"]
    opt = lambda s: st.one_of(st.none(), s)  # noqa: E731
    matched_sets = {
        "a": ["s.a", "t.a + coalesce(s.a, 0)", "NULL"],
        "s": ["s.s", "t.s || coalesce(s.s, '?')"],
        "b": ["t.b + 1", "NULL"],
    }
    if partitioned:
        matched_sets["p"] = ["'z'", "t.p"]
    nmbs_sets = {"a": ["t.a - 1", "0"], "s": ["'gone'", "NULL"], "b": ["NULL"]}
    insert_vals = {
        "id": ["s.id"],
        "a": ["s.a", "s.a * 10"],
        "s": ["s.s", "'ins'"],
        "b": ["3", "NULL"],
    }
    if partitioned:
        insert_vals["p"] = ["'x'", "NULL"] + (["s.p"] if "p" in sc else [])

    def sets(choices: dict[str, list[str]], required: Sequence[str] = ()) -> Any:
        keys = sorted(choices)
        return (
            st.lists(st.sampled_from(keys), min_size=1, max_size=3, unique=True)
            .flatmap(
                lambda cols: st.fixed_dictionaries(
                    {c: st.sampled_from(choices[c]) for c in sorted(set(cols) | set(required))}
                )
            )
            .map(lambda d: tuple(sorted(d.items())))
        )

    clause = st.one_of(
        st.builds(
            lambda p, a: Clause("matched", "update", p, a),
            opt(st.one_of(_source_pred(), _target_pred(), _both_pred())),
            sets(matched_sets),
        ),
        st.builds(lambda p: Clause("matched", "update", p, None), opt(_source_pred())),
        st.builds(
            lambda p: Clause("matched", "delete", p, None),
            opt(st.one_of(_source_pred(), _target_pred())),
        ),
        st.builds(
            lambda p, a: Clause("not_matched", "insert", p, a),
            opt(_source_pred()),
            sets(insert_vals, required=["id"]),
        ),
        st.builds(lambda p: Clause("not_matched", "insert", p, None), opt(_source_pred())),
        st.builds(
            lambda p, a: Clause("not_matched_by_source", "update", p, a),
            opt(_target_pred()),
            sets(nmbs_sets),
        ),
        st.builds(
            lambda p: Clause("not_matched_by_source", "delete", p, None), opt(_target_pred())
        ),
    )
    return draw(st.lists(clause, min_size=1, max_size=4))


def run_merge(dt: lq.DeltaTable, source: pa.Table, clauses: Sequence[Clause], **kw: Any) -> Any:
    b = dt.merge(source, on="t.id = s.id", source_alias="s", target_alias="t", **kw)
    for c in clauses:
        b = c.apply(b)
    return b.execute()


# --------------------------------------------------------------------------------------------
# the log
# --------------------------------------------------------------------------------------------


def commit_actions(root: str | Path, version: int) -> list[dict[str, Any]]:
    path = Path(root) / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cdc_rows(root: str | Path, version: int) -> pa.Table | None:
    """The rows of the commit's ``cdc`` files (partition values added back)."""
    tables = []
    for a in commit_actions(root, version):
        if "cdc" not in a:
            continue
        cdc = a["cdc"]
        from urllib.parse import unquote

        t = pq.read_table(Path(root) / unquote(cdc["path"]))
        for k, v in (cdc.get("partitionValues") or {}).items():
            if k not in t.column_names:
                t = t.append_column(k, pa.array([v] * t.num_rows, pa.string()))
        tables.append(t)
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default")


def check_commit(root: str | Path, version: int, operation: str | None = None) -> None:
    """Structural rules for one DML commit (digest §4): commitInfo with the operation and
    its metrics; at most one add and one remove per path, never the same (path, DV) in
    both; every add has stats.numRecords and a DV no larger than the file; removes carry
    the extended file metadata; cdc actions point under ``_change_data/``; and the log
    replays to exactly one live add per path."""
    from urllib.parse import unquote

    actions = commit_actions(root, version)
    infos = [a["commitInfo"] for a in actions if "commitInfo" in a]
    assert len(infos) == 1, "one commitInfo per commit"
    info = infos[0]
    if operation is not None:
        assert info["operation"] == operation, info
    assert "operationMetrics" in info and "operationParameters" in info
    assert all(isinstance(v, str) for v in info["operationMetrics"].values())

    def dv_id(dv: Mapping[str, Any] | None) -> str | None:
        if not dv:
            return None
        return f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"

    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    add_keys = [(unquote(a["path"]), dv_id(a.get("deletionVector"))) for a in adds]
    rem_keys = [(unquote(r["path"]), dv_id(r.get("deletionVector"))) for r in removes]
    assert len({p for p, _ in add_keys}) == len(add_keys), "two adds for one path"
    assert len({p for p, _ in rem_keys}) == len(rem_keys), "two removes for one path"
    assert not set(add_keys) & set(rem_keys), "add and remove with the same (path, dvId)"
    for a in adds:
        assert a["dataChange"] is True
        stats = json.loads(a["stats"])
        assert stats.get("numRecords") is not None
        dv = a.get("deletionVector")
        if dv:
            assert 0 < int(dv["cardinality"]) < int(stats["numRecords"]), (dv, stats)
    for r in removes:
        assert r["dataChange"] is True
        assert "size" in r and "partitionValues" in r and r.get("extendedFileMetadata") is True, r
    for a in actions:
        if "cdc" in a:
            assert a["cdc"]["path"].startswith("_change_data/")
    # replay: one live add per path
    live: dict[str, Any] = {}
    log = Path(root) / "_delta_log"
    for v in range(0, version + 1):
        f = log / f"{v:020d}.json"
        if not f.exists():
            continue
        for a in commit_actions(root, v):
            if "add" in a:
                live[unquote(a["add"]["path"])] = a["add"]
            elif "remove" in a:
                live.pop(unquote(a["remove"]["path"]), None)
    for path in live:
        assert (Path(root) / path).exists(), f"live file {path} missing"
