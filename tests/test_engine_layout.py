"""What the engines decide about a scan's files before reading them: whether Hive
directories may stand in for the log's partition values (`hive_layout`), which footers
represent every file's schema (`_schema_representatives`), and how a list of paths is
spelled for DuckDB. Each decision is checked against the rows the engines then return."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from tablekit import TableKit

import lakequery as lq
from lakequery.engines.duckdb import _schema_representatives
from lakequery.engines.layout import hive_layout
from lakequery.engines.sql_types import glob_list_sql, glob_literal
from lakequery.protocol.sql_spelling import SPLIT_LIST_MIN

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.string()),
        ("i", pa.int32()),
        ("d", pa.date32()),
        ("b", pa.bool_()),
    ]
)
PARTS = ["s", "i", "d", "b"]
PLAIN = {"s": "x_1.a+b-c", "i": -7, "d": dt.date(2024, 2, 29), "b": True}


def _table(root: Path, files: list[tuple[dict[str, Any], str | None]]) -> TableKit:
    """One file per entry: (partition values, where to move it relative to the root, or
    None to leave it in the Hive directories TableKit writes)."""
    kit = TableKit(root)
    kit.create(SCHEMA, partition_by=PARTS)
    adds = []
    for n, (values, moved) in enumerate(files):
        data = pa.table({"id": pa.array([n], pa.int64())})
        add = kit.write_parquet(data, partition_values=values)
        if moved is not None:
            target = root / moved
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(root / add["add"]["path"]), target)
            add["add"]["path"] = moved
        adds.append(add)
    kit.commit(adds)
    return kit


def _check(kit: TableKit) -> bool:
    """hive_layout's answer, after checking that every engine returns the log's values."""
    scan = lq.DeltaTable(kit.uri).snapshot().scan()
    answer = hive_layout(scan)
    want = scan.to_arrow().sort_by("id")
    got = scan.to_duckdb().order("id").arrow()
    got = got.read_all() if hasattr(got, "read_all") else got
    assert got.cast(want.schema).equals(want)
    polars = scan.to_polars().sort("id").collect().to_arrow()
    assert polars.cast(want.schema).equals(want)
    return answer


def test_hive_directories_that_spell_the_values_are_used(tmp_path: Path) -> None:
    other = {"s": "Y", "i": 0, "d": dt.date(1999, 12, 31), "b": False}
    assert _check(_table(tmp_path / "t", [(PLAIN, None), (other, None), (PLAIN, None)]))


def test_a_root_with_spaces_and_pattern_characters(tmp_path: Path) -> None:
    root = tmp_path / "a b (1)+[c]{2}^$|?*.d"
    assert _check(_table(root, [(PLAIN, None)]))


@pytest.mark.parametrize(
    ("values", "moved"),
    [
        ({**PLAIN, "s": "a b"}, None),  # a value Hive parsers may not read back unchanged
        ({**PLAIN, "s": "100%"}, None),  # escaped in the directory name
        ({**PLAIN, "i": None}, None),  # null
        ({**PLAIN, "s": "__HIVE_DEFAULT_PARTITION__"}, None),  # the string: Hive reads NULL
        (PLAIN, "flat/f.parquet"),  # no partition directories
        (PLAIN, "s=x_1.a+b-c/i=-7/d=2024-02-29/b=true/z=1/f.parquet"),  # col=value below
        (PLAIN, "s=x_1.a+b-c/i=7/d=2024-02-29/b=true/f.parquet"),  # directory says 7
        (PLAIN, "i=-7/s=x_1.a+b-c/d=2024-02-29/b=true/f.parquet"),  # columns out of order
    ],
)
def test_anything_else_falls_back_to_the_logs_values(
    tmp_path: Path, values: dict[str, Any], moved: str | None
) -> None:
    assert not _check(_table(tmp_path / "t", [(PLAIN, None), (values, moved)]))


def test_plain_subdirectories_below_the_partitions_are_fine(tmp_path: Path) -> None:
    moved = "s=x_1.a+b-c/i=-7/d=2024-02-29/b=true/sub/f.parquet"
    assert _check(_table(tmp_path / "t", [(PLAIN, None), (PLAIN, moved)]))


def test_schema_representatives_one_footer_per_fingerprint(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    one = pa.table({"id": pa.array([1], pa.int64())})
    two = pa.table({"id": pa.array([1], pa.int64()), "v": pa.array(["x"])})
    lq.write(uri, one)
    lq.write(uri, one, mode="append")
    lq.write(uri, two, mode="append", schema_mode="merge")
    kit = TableKit(uri)
    kit.commit([kit.write_parquet(one, stats=False)])  # untagged
    lq.write(uri, one, mode="append")
    kit.commit([kit.write_parquet(one, stats=False)])  # untagged
    scan = lq.DeltaTable(uri).snapshot().scan()
    locations = scan.plan().location_list
    tags = scan.plan().files.column("tags").to_pylist()
    fingerprints = [dict(t or []).get("lakequery.parquetSchema") for t in tags]
    seen: set[str] = set()
    want = []
    for loc, fp in zip(locations, fingerprints, strict=True):
        if fp is None or fp not in seen:
            want.append(loc)
            seen.update([fp] if fp else [])
    assert sum(fp is None for fp in fingerprints) == 2
    assert len(set(fp for fp in fingerprints if fp)) == 2
    assert _schema_representatives(scan)[0] == want
    assert sorted(scan.to_duckdb().arrow().read_all().column("id").to_pylist()) == [1] * 6


_ODD = ["/t/it's[1].parquet", "/t/x*?y", "/t/a b", "/t/back\\slash", "/t/e\u00e9"]


@pytest.mark.parametrize(
    "paths",
    [
        [],
        ["/t/a.parquet"],
        _ODD,
        _ODD * 2,  # from SPLIT_LIST_MIN paths on: one literal split at newlines
        ["/t/new\nline", "/t/c"] * 5,
        ["/t/nul\x00z", "/t/c"] * 5,
    ],
)
def test_a_list_of_paths_is_spelled_as_each_path_would_be(paths: list[str]) -> None:
    """DuckDB reads the spelled list as the paths escaped one by one, in order, whether
    the list is one split literal or (few paths, or a path holding a newline or a NUL)
    one literal each."""
    sql = glob_list_sql(paths)
    split = len(paths) >= SPLIT_LIST_MIN and not any("\n" in p or "\x00" in p for p in paths)
    assert sql.startswith("string_split(") == split
    got = duckdb.connect().execute(f"SELECT CAST({sql} AS VARCHAR[])").fetchone()
    assert got is not None
    assert got[0] == [glob_literal(p) for p in paths]


def _files_read(con: duckdb.DuckDBPyConnection, rel: Any, out: Path) -> int:
    """Runs ``rel`` with DuckDB's profiler on and returns how many files its scans read."""
    con.execute(f"PRAGMA enable_profiling = 'json'; PRAGMA profiling_output = '{out}'")
    rel.fetchall()
    con.execute("PRAGMA disable_profiling")
    found = re.findall(r'"Total Files Read": "(\d+)"', out.read_text())
    assert found, "the profile names no scan"
    return sum(int(n) for n in found)


def test_a_filter_on_hive_partition_values_skips_files(tmp_path: Path) -> None:
    """The partition values of a Hive table come from each file's name; DuckDB still skips
    the files a filter added over the relation rules out, before reading them."""
    uri = str(tmp_path / "t")
    rows = pa.table({"p": pa.array(range(40), pa.int16()), "x": list(range(40))})
    lq.write(uri, rows, partition_by="p")
    scan = lq.DeltaTable(uri).snapshot().scan()
    assert hive_layout(scan)
    con = duckdb.connect()
    rel = scan.to_duckdb(con)
    assert rel.types[rel.columns.index("p")] == duckdb.sqltype("SMALLINT")
    picked = rel.filter("p = 7 OR p = 30")
    assert sorted(picked.fetchall()) == [(7, 7), (30, 30)]
    assert _files_read(con, picked.aggregate("sum(x)"), tmp_path / "profile.json") == 2
    assert _files_read(con, rel.aggregate("sum(x)"), tmp_path / "profile.json") == 40


@pytest.mark.parametrize("layout", ["hive", "join", "literal"])
def test_a_column_named_filename(
    tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's column of each row's file name is named ``filename`` unless the files
    store a column of that name (DuckDB refuses the clash): every layout that reads
    partition values through file names keeps the table's own column."""
    from lakequery.engines import duckdb as duckdb_engine

    if layout == "join":  # more partition values than literal branches
        monkeypatch.setattr(duckdb_engine, "MAX_UNION_GROUPS", 2)
    if layout != "hive":
        monkeypatch.setattr(duckdb_engine, "hive_layout", lambda scan: False)
    uri = str(tmp_path / "t")
    n = 6
    rows = pa.table({"p": [i % 3 for i in range(n)], "FileName": [f"f{i}" for i in range(n)]})
    lq.write(uri, rows, partition_by="p")
    rel = lq.DeltaTable(uri).snapshot().scan().to_duckdb()
    assert sorted(rel.fetchall()) == sorted(
        zip(rows["p"].to_pylist(), rows["FileName"].to_pylist(), strict=True)
    )
    assert sorted(rel.filter("p = 1").fetchall()) == [(1, "f1"), (1, "f4")]


def test_hive_files_of_several_stored_schemas(tmp_path: Path) -> None:
    """Files of one Hive table that store different schemas (a column added later, a
    ``timestamp`` that keeps the table from being read by a declared schema) are read by
    one scan per stored schema, each taking its partition values from its file names."""
    uri = str(tmp_path / "t")
    when = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    first = pa.table({"p": ["a", "b"], "ts": pa.array([when, when], pa.timestamp("us", "UTC"))})
    lq.write(uri, first, partition_by="p")
    later = first.append_column("v", pa.array([1, 2], pa.int64()))
    lq.write(uri, later, mode="append", schema_mode="merge")
    scan = lq.DeltaTable(uri).snapshot().scan()
    assert hive_layout(scan)
    rel = scan.to_duckdb()
    assert not re.search(r'"?schema"?\s*=\s*(MAP|main\."map")', rel.sql_query())  # footers
    want = scan.to_arrow().sort_by([("p", "ascending"), ("v", "ascending")])
    got = rel.order("p, v NULLS LAST").to_arrow_table()
    assert got.cast(want.schema).equals(want)
    assert got.column("p").to_pylist() == ["a", "a", "b", "b"]


def test_hive_values_from_file_names_on_s3(
    s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    """On an object store DuckDB names files through lakequery's filesystem bridge; the
    values cast from those names are the log's."""
    rows = pa.table({"s": ["a", "b", "a", "c"], "i": pa.array([1, -2, 1, 3], pa.int8())})
    rows = rows.append_column("x", pa.array(range(4), pa.int64()))
    lq.write(s3_table_uri, rows, partition_by=["s", "i"], storage_options=s3_storage_options)
    scan = lq.DeltaTable(s3_table_uri, storage_options=s3_storage_options).snapshot().scan()
    assert hive_layout(scan)
    rel = scan.to_duckdb()
    assert sorted(rel.fetchall()) == sorted(
        zip(*(rows[c].to_pylist() for c in rel.columns), strict=True)
    )
    assert sorted(rel.filter("i = 1").fetchall()) == [("a", 1, 0), ("a", 1, 2)]


def _partitioned_copy(tmp_path: Path, partitions: int) -> str:
    """A table of ``partitions`` one-file partitions, copied to a path this process has
    never loaded (so the next snapshot is a full load, not an update of a cached state)."""
    uri = str(tmp_path / "written")
    data = pa.table({"p": list(range(partitions)), "x": list(range(partitions))})
    lq.write(uri, data, partition_by="p")
    copy = tmp_path / "copy"
    shutil.copytree(uri, copy)
    return str(copy)


def _build(scan: lq.Scan, engine: str) -> Any:
    return scan.to_duckdb() if engine == "duckdb" else scan.to_polars()


def _count_stats(monkeypatch: pytest.MonkeyPatch, root: str) -> list[str]:
    """Records the data files of ``root`` the engines' existence check looks at."""
    import os

    seen: list[str] = []
    exists = os.path.exists

    def counting(path: Any) -> bool:
        if str(path).startswith(root) and str(path).endswith(".parquet"):
            seen.append(str(path))
        return exists(path)

    monkeypatch.setattr(os.path, "exists", counting)
    return seen


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_a_load_that_found_every_file_spares_long_lists_a_second_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """The load's link check ``lstat``s every file of a partitioned local table; the engines
    then skip their own stat of a long list, and still stat a short one at every build."""
    from lakequery.engines import layout

    uri = _partitioned_copy(tmp_path, 3)
    snap = lq.DeltaTable(uri).snapshot()
    assert snap._state.files_found is True
    seen = _count_stats(monkeypatch, uri)
    _build(snap.scan(), engine)
    _build(snap.scan(), engine)
    assert len(seen) == 6  # 3 files: a short list, stat'ed at each build
    seen.clear()
    monkeypatch.setattr(layout, "STAT_EVERY_BUILD", 2)
    _build(snap.scan(), engine)
    assert seen == []  # a long list the load found: not stat'ed again
    # removed after the load: an error when the query binds (DuckDB expands the Hive
    # paths, then lakequery names the file) or runs (Polars)
    Path(snap.scan().plan().location_list[1]).unlink()
    with pytest.raises(Exception, match=r"(?i)no such|not found|no files found"):
        built = _build(snap.scan(), engine)
        built.fetchall() if engine == "duckdb" else built.collect()


def test_only_a_full_load_that_lstat_ed_every_file_counts(tmp_path: Path) -> None:
    """Flat tables are checked by listing their directory (no file is looked at one by
    one), and an incremental update carries files found at an earlier load: neither
    counts as found."""
    uri = _partitioned_copy(tmp_path, 3)
    assert lq.DeltaTable(uri).snapshot()._state.files_found is True
    lq.write(uri, pa.table({"p": [7], "x": [7]}), mode="append")
    updated = lq.DeltaTable(uri).snapshot()
    assert updated.version == 1 and updated._state.files_found is False
    flat = tmp_path / "flat"
    for i in range(9):  # 9 files in the root: listed, not lstat'ed
        lq.write(str(flat), pa.table({"x": [i]}), mode="append")
    shutil.copytree(flat, tmp_path / "flat_copy")
    assert lq.DeltaTable(str(tmp_path / "flat_copy")).snapshot()._state.files_found is False


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_long_lists_are_stat_ed_once_per_process_by_every_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """Where the load did not find every file, a long list is stat'ed on its first build
    in the process only, by the DuckDB and the Polars engine alike; a file removed after
    that surfaces as the engine's own error when the query runs."""
    from lakequery.engines import layout

    monkeypatch.setattr(layout, "STAT_EVERY_BUILD", 2)
    flat = tmp_path / "flat"
    for i in range(9):
        lq.write(str(flat), pa.table({"x": [i]}), mode="append")
    uri = str(tmp_path / "copy")
    shutil.copytree(flat, uri)
    snap = lq.DeltaTable(uri).snapshot()
    assert snap._state.files_found is False
    seen = _count_stats(monkeypatch, uri)
    _build(snap.scan(), engine)
    assert len(seen) == 9
    seen.clear()
    _build(snap.scan(), engine)
    assert seen == []
    _build(snap.scan(filter="x >= 3"), engine)  # another list: stat'ed at its first build
    assert len(seen) == 6
    last = snap.scan(filter="x = 8").plan().location_list
    Path(last[0]).unlink()
    with pytest.raises(Exception, match=r"(?i)no such file|not found|no files found") as info:
        built = _build(snap.scan(), engine)
        built.fetchall() if engine == "duckdb" else built.collect()
    assert not isinstance(info.value, lq.ObjectNotFoundError)
