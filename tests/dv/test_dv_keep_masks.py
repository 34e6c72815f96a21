"""DuckDB reads files with deletion vectors by position (``lakequery.engines.keep_masks``):
every row must meet its own mask bit. The files here have row groups of sizes that are not
multiples of DuckDB's vector size, so a scan out of order, a skipped row group or a filter
pushed below the positional join would pair rows with other rows' bits; each row stores
its own physical position (``pos``) and a string derived from it, so such a pairing shows
as a deleted position read back, a kept one missing, or a row whose columns disagree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakequery as lq
from lakequery.engines import keep_masks

# (rows, row group size) of each file; file 5 gets no DV
FILES = [(20_011, 1_999), (7_777, 3_001), (30_000, 2_048), (5, 5), (12_345, 10_000), (4_100, 777)]


def deleted(f: int, pos: np.ndarray) -> np.ndarray:
    """The rows the fixture deletes (see its two DELETEs)."""
    if f == 5:
        return np.zeros(pos.size, dtype=bool)
    scattered = (pos * 7919 + f * 104729) % 13 == 0
    out: np.ndarray = scattered | ((pos >= 2000) & (pos <= 2100))
    return out


#: files the fixture's DELETEs give a DV
WITH_DV = sum(bool(deleted(f, np.arange(rows)).any()) for f, (rows, _) in enumerate(FILES))


def expected() -> set[tuple[int, int]]:
    out = set()
    for f, (rows, _) in enumerate(FILES):
        pos = np.arange(rows)
        out |= {(f, int(p)) for p in pos[~deleted(f, pos)]}
    return out


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("keep") / "t"
    root.mkdir()
    for f, (rows, group) in enumerate(FILES):
        pos = np.arange(rows, dtype=np.int64)
        data = pa.table(
            {
                "f": pa.array(np.full(rows, f, dtype=np.int32)),
                "pos": pa.array(pos),
                "s": pa.array([f"{f}:{p}" for p in range(rows)]),
            }
        )
        pq.write_table(data, root / f"part-{f:03d}.parquet", row_group_size=group)
    lq.convert_to_delta(str(root), configuration={"delta.enableDeletionVectors": "true"})
    dt = lq.DeltaTable(str(root))
    dt.delete("f <> 5 AND (pos * 7919 + f * 104729) % 13 = 0")
    dt.delete("f <> 5 AND pos BETWEEN 2000 AND 2100")  # a run across row groups
    files = dt.snapshot().files()
    with_dv = files.column("deletion_vector").is_valid().to_pylist()
    assert with_dv.count(True) == WITH_DV >= 4
    return str(root)


def connection(threads: int, ordered: bool) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(config={"threads": threads, "preserve_insertion_order": ordered})


def test_files_with_dvs_are_read_by_position(table: str) -> None:
    sql = lq.DeltaTable(table).snapshot().scan().to_duckdb().sql_query()
    assert sql.count("POSITIONAL JOIN") == WITH_DV
    assert "ANTI JOIN" not in sql


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("threads", [1, 2, 7])
def test_every_row_meets_its_own_mask_bit(table: str, threads: int, ordered: bool) -> None:
    con = connection(threads, ordered)
    rel = lq.DeltaTable(table).snapshot().scan().to_duckdb(con)
    want = expected()
    rows = rel.query("t", "SELECT f, pos, s FROM t").fetchall()
    assert len(rows) == len(want)
    assert {(f, p) for f, p, _ in rows} == want
    assert all(s == f"{f}:{p}" for f, p, s in rows)  # columns of one row stay together
    # projections: no column of the file, one column, the count alone
    counts = dict(rel.query("t", "SELECT f, count(*) FROM t GROUP BY f").fetchall())
    assert counts == {f: sum(1 for g, _ in want if g == f) for f in range(len(FILES))}
    assert rel.query("t", "SELECT count(*) FROM t").fetchall() == [(len(want),)]
    assert sorted(p for (p,) in rel.project("pos").fetchall()) == sorted(p for _, p in want)
    # filters, Top-N and join filters added over the relation must stay above the join
    got = rel.filter("pos % 5 = 1 AND s LIKE '%1'").project("f, pos").fetchall()
    assert set(got) == {(f, p) for f, p in want if p % 5 == 1 and p % 10 == 1}
    top = rel.query("t", "SELECT pos FROM t ORDER BY pos DESC LIMIT 20").fetchall()
    assert [p for (p,) in top] == sorted((p for _, p in want), reverse=True)[:20]
    probe = [0, 13, 2000, 2101, 4099, 20010]
    joined = rel.query(
        "t",
        "SELECT t.f, t.pos FROM t JOIN (SELECT unnest($probe) AS p) v ON t.pos = v.p".replace(
            "$probe", str(probe)
        ),
    ).fetchall()
    assert sorted(joined) == sorted((f, p) for f, p in want if p in probe)


def test_a_data_filter_keeps_the_anti_join(table: str) -> None:
    scan = lq.DeltaTable(table).snapshot().scan(filter="pos >= 19000")
    rel = scan.to_duckdb()
    assert "ANTI JOIN" in rel.sql_query()
    assert "POSITIONAL JOIN" not in rel.sql_query()
    got = set(rel.project("f, pos").fetchall())
    assert got == {(f, p) for f, p in expected() if p >= 19000}


def test_few_large_files_on_many_threads_keep_the_anti_join(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keep_masks, "SERIAL_ROWS", 0)  # every table counts as large
    rel = lq.DeltaTable(table).snapshot().scan().to_duckdb(connection(64, True))
    assert "ANTI JOIN" in rel.sql_query()
    assert len(rel.fetchall()) == len(expected())


def masks(con: duckdb.DuckDBPyConnection, kind: str) -> list[str]:
    """The keep masks on ``con`` that are temporary tables or registered views."""
    sql = {
        "table": "SELECT table_name FROM duckdb_tables() WHERE temporary",
        "view": "SELECT view_name FROM duckdb_views() WHERE temporary",
    }[kind]
    return sorted(n for (n,) in con.sql(sql).fetchall() if n.startswith("_lq_keep_"))


@pytest.mark.parametrize("ordered", [True, False])
def test_masks_are_made_once_per_connection(table: str, ordered: bool) -> None:
    """On a caller's connection that keeps insertion order, masks are temporary tables
    (they bind faster, and the connection keeps them for later queries); where it does
    not, a table could lose the rows' order, so they are registered NumPy columns."""
    con = connection(2, ordered)
    snap = lq.DeltaTable(table).snapshot()
    kind, other = ("table", "view") if ordered else ("view", "table")
    first = None
    for _ in range(3):
        assert len(snap.scan().to_duckdb(con).fetchall()) == len(expected())
        made = masks(con, kind)
        assert len(made) == WITH_DV and masks(con, other) == []
        assert first is None or made == first  # the same masks serve every query
        first = made
    if ordered:
        # a table keeps its rows in order once made: a positional scan reads it in order
        # whatever the connection's setting later is
        con.execute("SET preserve_insertion_order = false")
        rel = snap.scan().to_duckdb(con)
        rows = rel.query("t", "SELECT f, pos, s FROM t").fetchall()
        assert {(f, p) for f, p, _ in rows} == expected() and len(rows) == len(expected())
        assert all(s == f"{f}:{p}" for f, p, s in rows)
        assert masks(con, "table") == first and masks(con, "view") == []


def _names(rel: duckdb.DuckDBPyRelation) -> set[str]:
    return {n for n in rel.sql_query().split() if n.startswith("_lq_keep_")}


def test_cursors_of_the_engine_database_share_their_masks(table: str) -> None:
    """``to_duckdb()`` without a connection builds on a new engine cursor each call: the
    masks are tables of the engine database, made once and read by every later call."""
    from lakequery.duckdb_databases import engine_cursor

    snap = lq.DeltaTable(table).snapshot()
    first = snap.scan().to_duckdb()
    second = snap.scan().to_duckdb()
    assert _names(first) == _names(second)
    assert len(_names(first)) == WITH_DV
    assert all(n.startswith("_lq_keep_s") for n in _names(first))
    for rel in (first, second):
        rows = rel.query("t", "SELECT f, pos, s FROM t").fetchall()
        assert {(f, p) for f, p, _ in rows} == expected() and len(rows) == len(expected())
        assert all(s == f"{f}:{p}" for f, p, s in rows)
    tables = "SELECT table_name FROM duckdb_tables() WHERE NOT temporary"
    shared = {n for (n,) in engine_cursor().sql(tables).fetchall()}
    assert _names(first) <= shared


def test_shared_masks_stop_at_their_budget(table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond :data:`SHARED_MAX_BYTES` a mask is registered on the cursor (nothing shared
    is ever dropped: a relation handed out may still name it)."""
    monkeypatch.setattr(keep_masks, "_SHARED", type(keep_masks._SHARED)())  # none made yet
    # a mask of more than 2,048 rows takes DuckDB blocks of 256 KiB, whatever its rows:
    # the budget counts those (it counted a byte a row, 13-130 times less)
    monkeypatch.setattr(keep_masks, "SHARED_MAX_BYTES", 2 * keep_masks._BLOCK_BYTES)
    rel = lq.DeltaTable(table).snapshot().scan().to_duckdb()
    names = _names(rel)
    assert len(names) == WITH_DV
    shared = {n for n in names if n.startswith("_lq_keep_s")}
    assert 1 <= len(shared) <= 2  # what fits is shared, the rest registered
    from lakequery.duckdb_databases import engine_cursor, engine_database

    charged = keep_masks._SHARED[engine_database()].nbytes
    rows = [engine_cursor().sql(f"SELECT count(*) FROM {n}").fetchall()[0][0] for n in shared]
    assert charged == sum(keep_masks._charged(n) for n in rows) <= keep_masks.SHARED_MAX_BYTES
    assert all(n.removeprefix("_lq_keep_").isdigit() for n in names - shared)
    rows = rel.project("f, pos").fetchall()
    assert set(rows) == expected() and len(rows) == len(expected())


def test_a_dropped_shared_mask_is_made_again(table: str) -> None:
    from lakequery.duckdb_databases import engine_cursor

    snap = lq.DeltaTable(table).snapshot()
    name = sorted(_names(snap.scan().to_duckdb()))[0]
    assert name.startswith("_lq_keep_s")
    engine_cursor().execute(f"DROP TABLE {name}")  # e.g. through lakequery.sql
    rel = snap.scan().to_duckdb()
    assert name not in _names(rel) and len(_names(rel)) == WITH_DV
    rows = rel.project("f, pos").fetchall()
    assert set(rows) == expected() and len(rows) == len(expected())


@pytest.mark.parametrize(
    "ordered, gone_by",
    [(True, "rollback"), (True, "drop"), (False, "rollback"), (False, "unregister")],
)
def test_masks_taken_away_from_the_connection_are_made_again(
    table: str, ordered: bool, gone_by: str
) -> None:
    """A mask is a catalog entry of the caller's connection: a rolled-back transaction
    (or the caller's ``DROP TABLE`` / ``unregister``) removes it, and the next read must
    not name it."""
    con = connection(2, ordered)
    snap = lq.DeltaTable(table).snapshot()
    kind = "table" if ordered else "view"
    if gone_by == "rollback":
        con.execute("BEGIN")
    assert len(snap.scan().to_duckdb(con).fetchall()) == len(expected())
    if gone_by == "rollback":
        con.execute("ROLLBACK")
    elif gone_by == "drop":
        con.execute(f"DROP TABLE {masks(con, kind)[0]}")
    else:
        con.unregister(masks(con, kind)[0])
    assert len(masks(con, kind)) < WITH_DV
    for _ in range(2):
        rows = snap.scan().to_duckdb(con).project("f, pos").fetchall()
        assert set(rows) == expected() and len(rows) == len(expected())
    assert len(masks(con, kind)) == WITH_DV


def test_a_wrong_num_records_falls_back_to_the_anti_join(table: str, tmp_path: Path) -> None:
    copy = tmp_path / "t"
    shutil.copytree(table, copy)
    log = sorted((copy / "_delta_log").glob("*.json"))[-1]
    lines = []
    changed = 0
    for line in log.read_text().splitlines():
        action = json.loads(line)
        add = action.get("add")
        if add and add.get("deletionVector") and not changed:
            stats = json.loads(add["stats"])
            stats["numRecords"] += 1
            add["stats"] = json.dumps(stats)
            changed += 1
        lines.append(json.dumps(action))
    assert changed == 1
    log.write_text("\n".join(lines) + "\n")
    scan = lq.DeltaTable(str(copy)).snapshot().scan()
    rel = scan.to_duckdb()
    assert "ANTI JOIN" in rel.sql_query()  # no mask of a length the log contradicts
    assert "POSITIONAL JOIN" not in rel.sql_query()
    got = sorted(rel.project("f, pos").fetchall())
    arrow = scan.to_arrow()
    assert got == sorted(zip(arrow["f"].to_pylist(), arrow["pos"].to_pylist(), strict=True))
    assert set(got) == expected()


def test_partitions_and_paths_that_need_quoting(tmp_path: Path) -> None:
    uri = str(tmp_path / "we'ird [t]*?")
    for part in ["a'b", "c[d]*", "e?f"]:
        lq.write(
            uri,
            pa.table({"x": list(range(20)), "p": [part] * 20}),
            mode="append",
            partition_by=["p"],
            configuration={"delta.enableDeletionVectors": "true"},
        )
    dt = lq.DeltaTable(uri)
    dt.delete("x % 3 = 0")
    kept = [x for x in range(20) if x % 3]
    rel = dt.snapshot().scan().to_duckdb()
    assert rel.sql_query().count("POSITIONAL JOIN") == 3
    assert sorted(rel.fetchall()) == sorted((x, p) for x in kept for p in ["a'b", "c[d]*", "e?f"])
    # no data column read: the positional scans still count rows
    only = dt.snapshot().scan(columns=["p"]).to_duckdb()
    got = only.query("t", "SELECT p, count(*) FROM t GROUP BY p ORDER BY p").fetchall()
    assert got == [("a'b", len(kept)), ("c[d]*", len(kept)), ("e?f", len(kept))]


@pytest.mark.parametrize("temporary", [True, False])
@pytest.mark.parametrize("threads", [2, 8])
def test_a_mask_table_keeps_the_rows_order(threads: int, temporary: bool) -> None:
    """A mask table's row i is the mask's bit i, on many threads and for masks of many
    row groups (DuckDB scans a NumPy column in parallel; the connection's insertion order
    must put the rows back)."""
    con = connection(threads, True)
    rng = np.random.default_rng(7)
    keep = rng.random(3_000_017) > 0.01
    keep_masks._create_table(con, "_lq_keep_order", keep, temporary=temporary)
    got = con.sql("SELECT keep FROM _lq_keep_order").fetchnumpy()["keep"]
    assert got.dtype == np.bool_ and got.size == keep.size
    assert np.array_equal(got, keep)
    rowids = con.sql("SELECT rowid FROM _lq_keep_order WHERE NOT keep").fetchnumpy()["rowid"]
    assert np.array_equal(np.sort(rowids), np.flatnonzero(~keep))
    assert masks(con, "view") == []  # the staged registration is gone
