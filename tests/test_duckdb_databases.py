"""lakequery's two process-wide DuckDB databases (lakequery.duckdb_databases): relations
handed out without a connection share one database, each on a cursor of its own, and a
forked child never touches its parent's databases. The process-level properties are
checked in fresh interpreters (the test session has opened its databases long before)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
from fresh_process import run_python

import lakequery as lq


def _table(path: Path, files: int = 3) -> str:
    uri = str(path)
    for i in range(files):
        lq.write(
            uri,
            pa.table({"id": pa.array(range(i * 100, i * 100 + 100), pa.int64())}),
            mode="append",
        )
    lq.DeltaTable(uri).delete("id % 10 = 3")  # deletion vectors: keep masks, DV reads
    return uri


def test_forked_children_read_write_and_exit_cleanly(tmp_path: Path) -> None:
    """The parent has used both databases (a read through DuckDB, a DELETE); its forked
    children replay logs, query, run DML and exit, through ``multiprocessing``'s fork
    context and a bare ``os.fork`` whose child leaves through normal interpreter
    shutdown. Before, a pool child hung in the parent's database and a child's exit
    crashed on freeing it."""
    tables = [_table(tmp_path / f"t{i}") for i in range(3)]
    code = f"""
import json, multiprocessing, os, sys
import lakequery as lq

TABLES = {tables!r}

def work(uri):
    table = lq.DeltaTable(uri)
    before = table.snapshot().scan().to_duckdb().aggregate("count(*), sum(id)").fetchall()[0]
    deleted = table.delete("id % 10 = 7").num_deleted_rows
    after = lq.sql("SELECT count(*) FROM t", t=uri).fetchall()[0][0]
    return [before[0], before[1], deleted, after]

parent = work(TABLES[0])
with multiprocessing.get_context("fork").Pool(2) as pool:
    pooled = pool.map_async(work, TABLES[1:]).get(timeout=120)
pid = os.fork()
if pid == 0:
    try:
        ok = work(TABLES[1])[3] == pooled[0][3]  # a table the pool child changed
    except BaseException:
        os._exit(3)
    sys.exit(0 if ok else 4)  # normal shutdown: atexit hooks, objects freed
_, status = os.waitpid(pid, 0)
print(json.dumps(dict(parent=parent, pooled=pooled, status=status,
                      own=lq.DeltaTable(TABLES[0]).snapshot().scan().to_duckdb()
                      .aggregate("count(*)").fetchall()[0][0])))
"""
    got = run_python(code, tmp_path)
    ids = range(300)
    live = [i for i in ids if i % 10 != 3]
    assert got["parent"] == [len(live), sum(live), 30, 240]
    assert got["pooled"] == [[270, sum(live), 30, 240]] * 2
    assert got["status"] == 0
    assert got["own"] == 240


def test_relations_without_a_connection_share_one_database(tmp_path: Path) -> None:
    """Reads, a change feed, a write with a constraint and ``lq.sql`` without a connection
    open one database in all (the engine's: the log is small, so not even the private
    one), not one per relation or per query."""
    uri = _table(tmp_path / "t")
    lq.DeltaTable(uri).alter.set_properties({"delta.enableChangeDataFeed": "true"})
    code = f"""
import json
import duckdb
opened = []
_connect = duckdb.connect
def counting_connect(*args, **kwargs):
    opened.append(args[:1])
    return _connect(*args, **kwargs)
duckdb.connect = counting_connect
import lakequery as lq
import pyarrow as pa
t = lq.DeltaTable({uri!r})
counts = [t.snapshot().scan().to_duckdb().aggregate("count(*)").fetchall()[0][0] for _ in range(3)]
t.alter.add_constraint({{"positive": "id >= 0"}})
lq.write({uri!r}, pa.table({{"id": pa.array([1000], pa.int64())}}), mode="append")
v = t.snapshot().version
counts.append(t.changes(starting_version=v, ending_version=v).to_duckdb().aggregate("count(*)").fetchall()[0][0])
shared = len(opened)
counts.append(lq.sql("SELECT count(*) FROM a JOIN b USING (id)", a=t, b=t).fetchall()[0][0])
print(json.dumps(dict(counts=counts, shared=shared, opened=len(opened))))
"""
    got = run_python(code, tmp_path)
    assert got["counts"] == [270, 270, 270, 1, 271]
    assert got["shared"] == 1
    assert got["opened"] == 1


def test_small_logs_are_replayed_without_a_second_database(tmp_path: Path) -> None:
    """Replaying a small log segment and skipping files need no join sides kept as
    written, and DML, the change feed, the stream consumer and history join nothing
    DuckDB cannot size: a process that reads such a table through DuckDB, with deletion
    vectors and a filter, reads it again after a commit, checkpoints it, lists what VACUUM
    would delete, then runs DELETE, UPDATE and MERGE, reads the change feed and a stream
    and lists the history, opens the engine database alone. A log above
    ``SMALL_LOG_BYTES`` is replayed on the private database, with the same result."""
    uri = _table(tmp_path / "t")
    code = f"""
import json
import pyarrow as pa
import lakequery as lq
from lakequery import duckdb_databases, log_reader

def read(table, version=None):
    scan = table.snapshot(version=version).scan(filter="id >= 150")
    return scan.to_duckdb().aggregate("count(*), sum(id)").fetchall()[0]

t = lq.DeltaTable({uri!r})
first = read(t)
opened_first = sorted(duckdb_databases._DATABASES)
lq.write({uri!r}, pa.table({{"id": pa.array([1000], pa.int64())}}), mode="append")
duckdb_databases._close()
second = read(t)  # the process's cached state brought up to date
t.checkpoint()  # replays the segment again
t.vacuum(retention_hours=0, enforce_retention=False)  # a dry run: tombstones replayed
opened_second = sorted(duckdb_databases._DATABASES)
v2 = t.snapshot().version
duckdb_databases._close()
t.alter.set_properties({{"delta.enableChangeDataFeed": "true"}})
dml = [t.delete("id = 151").num_deleted_rows,
       t.update("id = 152", set={{"id": "id + 2000"}}).num_updated_rows]
source = pa.table({{"id": pa.array([154, 3000], pa.int64())}})
m = (t.merge(source, on="t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_delete().when_not_matched_insert_all().execute())
dml += [m.num_deleted_rows, m.num_inserted_rows]
feed = t.changes(starting_version=v2 + 2).to_duckdb().aggregate("count(*)").fetchall()[0][0]
streamed = sum(b.to_duckdb().aggregate("count(*)").fetchall()[0][0]
               for b in t.stream(starting_version=v2, skip_change_commits=True))
history = len(t.history().to_arrow())
opened_dml = sorted(duckdb_databases._DATABASES)
duckdb_databases._close()
log_reader.SMALL_LOG_BYTES = 0
large = read(lq.DeltaTable({uri!r}), version=v2)  # replayed afresh
print(json.dumps(dict(first=first, second=second, large=large, opened_first=opened_first,
                      opened_second=opened_second, dml=dml, feed=feed, streamed=streamed,
                      history=history, opened_dml=opened_dml,
                      opened_large=sorted(duckdb_databases._DATABASES))))
"""
    got = run_python(code, tmp_path)
    live = [i for i in range(150, 300) if i % 10 != 3]
    assert got["first"] == [len(live), sum(live)]
    assert got["second"] == got["large"] == [len(live) + 1, sum(live) + 1000]
    assert got["dml"] == [1, 1, 1, 1]
    # the change feed from the DELETE on: one delete, an update's pre- and post-image,
    # one merge delete, one insert
    assert got["feed"] == 5
    assert got["streamed"] == 1  # the append of the second read; DML commits skipped
    assert got["history"] >= 7
    assert got["opened_first"] == got["opened_second"] == got["opened_dml"] == ["engine"]
    assert got["opened_large"] == ["engine", "private"]


def test_dml_in_parallel_threads(tmp_path: Path) -> None:
    """DELETE, UPDATE and MERGE on four tables at once, each in its thread: every statement
    sees its own target (the views DML builds are temporary, per cursor; they were views of
    the shared database, and statements replaced each other's)."""
    uris = [_table(tmp_path / f"t{i}", files=2) for i in range(4)]
    errors: list[str] = []
    counts: dict[int, list[int]] = {}

    def work(i: int) -> None:
        table = lq.DeltaTable(uris[i])
        got = []
        try:
            for k in (0, 1, 2):
                got.append(table.delete(f"id % 10 = {k}").num_deleted_rows)
                got.append(
                    table.update(f"id % 10 = {k + 4}", set={"id": "id + 1000"}).num_updated_rows
                )
                source = pa.table({"id": pa.array([k * 10 + 5, 5000 + k], pa.int64())})
                m = (
                    table.merge(source, on="t.id = s.id", source_alias="s", target_alias="t")
                    .when_matched_delete()
                    .when_not_matched_insert_all()
                    .execute()
                )
                got += [m.num_deleted_rows, m.num_inserted_rows]
        except Exception as exc:  # collected: an assertion in a thread would be lost
            errors.append(repr(exc))
        counts[i] = got

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    # the same statements on a Python list of the ids
    ids = [i for i in range(200) if i % 10 != 3]
    want = []
    for k in (0, 1, 2):
        want.append(sum(1 for i in ids if i % 10 == k))
        ids = [i for i in ids if i % 10 != k]
        want.append(sum(1 for i in ids if i % 10 == k + 4))
        ids = [i + 1000 if i % 10 == k + 4 else i for i in ids]
        matched = [i for i in (k * 10 + 5, 5000 + k) if i in ids]
        ids = [i for i in ids if i not in matched] + [
            i for i in (k * 10 + 5, 5000 + k) if i not in matched
        ]
        want += [len(matched), 2 - len(matched)]
    assert counts == {i: want for i in range(4)}
    for uri in uris:
        got = lq.DeltaTable(uri).snapshot().scan().to_arrow().column("id").to_pylist()
        assert sorted(got) == sorted(ids)


def test_relations_from_threads_and_in_file_order(tmp_path: Path) -> None:
    """Each relation has a cursor of its own: relations built and run in parallel threads
    give their own answers; and the engine database keeps rows in file order (the private
    one would not)."""
    uri = _table(tmp_path / "t", files=4)
    snap = lq.DeltaTable(uri).snapshot()
    expected = snap.scan().to_arrow().column("id").to_pylist()
    results: dict[int, Any] = {}

    def read(i: int) -> None:
        scan = snap.scan(filter=f"id >= {i * 100}")
        results[i] = scan.to_duckdb().aggregate("count(*)").fetchall()[0][0]

    threads = [threading.Thread(target=read, args=(i,)) for i in range(4) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {i: 90 * (4 - i) for i in range(4)}
    ordered = snap.scan().to_duckdb().to_arrow_table().column("id").to_pylist()
    assert ordered == expected


def test_sql_without_a_connection_keeps_each_query_s_names_to_itself(tmp_path: Path) -> None:
    """``lq.sql`` without a connection runs on a cursor of the engine database: the same
    name bound to different tables in a loop and in parallel threads reads each call's own
    table, a relation returned earlier still reads its own after later calls, and no
    view is left in the shared database for other cursors to see."""
    uris = [_table(tmp_path / f"t{i}", files=i + 1) for i in range(3)]
    want = [90 * (i + 1) for i in range(3)]  # 100 rows a file, ids ending in 3 deleted
    held = [lq.sql("SELECT count(*) FROM t", t=uri) for uri in uris]
    assert [r.fetchall()[0][0] for r in held] == want
    results: dict[int, Any] = {}
    errors: list[str] = []

    def query(k: int) -> None:
        try:
            i = k % 3
            rel = lq.sql("SELECT count(*), min(id) FROM t JOIN u USING (id)", t=uris[i], u=uris[i])
            results[k] = rel.fetchall()[0]
        except Exception as exc:  # collected: an assertion in a thread would be lost
            errors.append(repr(exc))

    threads = [threading.Thread(target=query, args=(k,)) for k in range(9)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert results == {k: (want[k % 3], 0) for k in range(9)}
    assert [r.fetchall()[0][0] for r in held] == want
    from lakequery.duckdb_databases import engine_cursor

    views = engine_cursor().sql("SELECT view_name FROM duckdb_views() WHERE NOT internal")
    assert views.fetchall() == []


def test_engine_cursors_are_known_and_need_no_settings(tmp_path: Path) -> None:
    """Relations built on an engine cursor (``lq.sql``'s) read with the database's Parquet
    metadata cache and issue no per-cursor setting; a caller's own connection gets it set
    once."""
    import duckdb

    from lakequery.duckdb_databases import engine_cursor, is_engine_cursor
    from lakequery.engines import duckdb as engine

    uri = _table(tmp_path / "t")
    scan = lq.DeltaTable(uri).snapshot().scan()
    cur = engine_cursor()
    assert is_engine_cursor(cur)
    rel = engine.duckdb_relation(scan, cur)
    assert rel.aggregate("count(*)").fetchall() == [(270,)]
    assert cur not in engine._METADATA_CACHE_SET  # nothing was set on it
    ((cached,),) = cur.execute("SELECT current_setting('parquet_metadata_cache')").fetchall()
    assert cached is True
    own = duckdb.connect()
    assert not is_engine_cursor(own)
    assert engine.duckdb_relation(scan, own).aggregate("count(*)").fetchall() == [(270,)]
    assert own in engine._METADATA_CACHE_SET
    ((cached,),) = own.execute("SELECT current_setting('parquet_metadata_cache')").fetchall()
    assert cached is True
    own.close()


def test_the_engine_database_keeps_no_copy_of_the_files_it_reads(tmp_path: Path) -> None:
    """The engine database reads local files without DuckDB's external file cache (DuckDB
    1.5 copies them into it: a cold read and the close pay for the copies, and the page
    cache already holds the files), keeps the Parquet metadata cache, and changes neither
    setting on a caller's connection."""
    import duckdb

    from lakequery.duckdb_databases import engine_cursor

    uri = _table(tmp_path / "t")
    scan = lq.DeltaTable(uri).snapshot().scan()
    assert scan.to_duckdb().aggregate("count(*)").fetchall() == [(270,)]
    settings = (
        "SELECT current_setting('enable_external_file_cache'), "
        "current_setting('parquet_metadata_cache')"
    )
    assert engine_cursor().execute(settings).fetchall() == [(False, True)]
    own = duckdb.connect()
    ((default_file_cache, _),) = own.execute(settings).fetchall()
    assert scan.to_duckdb(own).aggregate("count(*)").fetchall() == [(270,)]
    assert own.execute(settings).fetchall() == [(default_file_cache, True)]
    own.close()


def test_a_forked_child_uses_the_parents_s3_table_object(
    tmp_path: Path, s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    """A pre-forking server builds its DeltaTable once: the child reads and writes through
    it (the parent's s3fs client refused use from another process: "not fork-safe")."""
    lq.write(s3_table_uri, pa.table({"id": [1, 2, 3]}), storage_options=s3_storage_options)
    code = f"""
import json, os, sys
import pyarrow as pa
import lakequery as lq

table = lq.DeltaTable({s3_table_uri!r}, storage_options={s3_storage_options!r})
parent = table.snapshot().scan().to_duckdb().aggregate("count(*)").fetchall()[0][0]
pid = os.fork()
if pid == 0:
    try:
        rows = table.snapshot().scan().to_arrow().num_rows
        version = lq.write(table, pa.table({{"id": [9]}}), mode="append").version
        ok = (rows, version) == (3, 1)
    except BaseException:
        os._exit(3)
    os._exit(0 if ok else 4)
_, status = os.waitpid(pid, 0)
print(json.dumps(dict(parent=parent, status=status, after=table.snapshot().num_files)))
"""
    got = run_python(code, tmp_path)
    assert got == {"parent": 3, "status": 0, "after": 2}
