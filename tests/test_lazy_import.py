"""`import lakequery` loads no engine, and the read path no numba: checked in fresh processes,
since the test session itself has imported everything long before."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from fresh_process import run_python
from tablekit import TableKit, dv_protocol, remove_action, with_dv

import lakequery as lq

HEAVY = ("duckdb", "polars", "numba", "llvmlite", "pyspark", "deltalake", "lakequery.demo")


def test_import_loads_no_engine_and_the_api_still_resolves(tmp_path: Path) -> None:
    code = f"""
import json, sys
import lakequery as lq
loaded = sorted(m for m in {HEAVY!r} if m in sys.modules)
demo = lq.demo.__name__
change_scan = lq.ChangeScan.__module__ + "." + lq.ChangeScan.__qualname__
missing = [n for n in lq.__all__ if getattr(lq, n, None) is None]
ns = {{}}
exec("from lakequery import *", ns)
star = sorted(n for n in lq.__all__ if n not in ns)
import lakequery.sql  # the import system binds the submodule on the package...
sql_is_function = callable(lq.sql) and lq.sql.__name__ == "sql"  # ...but lq.sql stays the function
table_module = lq.table.__name__  # submodules that used to be bound as a side effect
try:
    lq.no_such_attribute
    unknown = "resolved"
except AttributeError:
    unknown = "AttributeError"
print(json.dumps(dict(loaded=loaded, demo=demo, change_scan=change_scan, missing=missing,
                      star=star, sql_is_function=sql_is_function, table_module=table_module,
                      unknown=unknown, rows=lq.sql("SELECT 42 AS x").fetchall())))
"""
    got = run_python(code, tmp_path)
    assert got["loaded"] == []
    assert got["demo"] == "lakequery.demo"
    assert got["change_scan"] == "lakequery.cdf.ChangeScan"
    assert got["missing"] == []
    assert got["star"] == []
    assert got["sql_is_function"] is True
    assert got["table_module"] == "lakequery.table"
    assert got["unknown"] == "AttributeError"
    assert got["rows"] == [[42]]


def test_lazy_names_are_the_defining_modules_objects() -> None:
    from lakequery.cdf import ChangeScan
    from lakequery.sql import sql
    from lakequery.table import DeltaTable
    from lakequery.writer import write

    assert lq.ChangeScan is ChangeScan
    assert lq.DeltaTable is DeltaTable
    assert lq.sql is sql
    assert lq.write is write
    assert set(lq.__all__) <= set(dir(lq))


def _dv_table(root: Path) -> tuple[str, int]:
    kit = TableKit(root)
    kit.create(pa.schema([("id", pa.int64())]), protocol=dv_protocol())
    add = kit.write_parquet(pa.table({"id": pa.array(range(1000), pa.int64())}))
    kit.commit([add])
    kit.commit([remove_action(add), with_dv(add, kit.write_dv(range(0, 1000, 7)))])
    return kit.uri, 1000 - len(range(0, 1000, 7))


def test_reads_with_deletion_vectors_need_no_numba(tmp_path: Path) -> None:
    uri, kept = _dv_table(tmp_path / "t")
    code = f"""
import json, sys
import polars as pl
import lakequery as lq
scan = lq.DeltaTable({uri!r}).snapshot().scan()
counts = [scan.to_arrow().num_rows, scan.to_polars().select(pl.len()).collect().item(),
          scan.to_duckdb().aggregate("count(*)").fetchall()[0][0]]
print(json.dumps(dict(counts=counts, numba="numba" in sys.modules,
                      demo="lakequery.demo" in sys.modules)))
"""
    got = run_python(code, tmp_path)
    assert got["counts"] == [kept, kept, kept]
    assert got["numba"] is False
    assert got["demo"] is False


def test_the_package_pickles_by_name() -> None:
    """Spark ships closures that refer to ``lq`` (UDFs, mapInArrow functions) with
    cloudpickle; the package must pickle as a module reference, not by value."""
    import pickle

    from pyspark import cloudpickle

    import lakequery as lq

    assert pickle.loads(pickle.dumps(lq)) is lq
    restored = pickle.loads(cloudpickle.dumps(lambda: lq.DeltaTable))
    assert restored() is lq.DeltaTable


def test_duckdb_and_polars_reads_import_no_pandas_nor_fsspec(tmp_path: Path) -> None:
    """pyarrow imports pandas on its first conversion of a Python value (``pa.array``,
    ``pa.scalar``, a number given to a compute function), and DuckDB does when handed an
    Arrow object: 0.2-0.4 s of a fresh process. The DuckDB and Polars reads of a table
    with deletion vectors avoid all of them (pandas is installed in the test environment,
    so an import would happen). A local table is read through ``os``, so fsspec (~0.02 s
    with the asyncio it imports) is not loaded either, nor is ``pyarrow.compute`` (~18 ms),
    which Polars imports when handed a pyarrow array (the keep masks reach it through the
    Arrow C data interface)."""
    uri, kept = _dv_table(tmp_path / "t")
    for engine, count in (
        ("duckdb", 'scan.to_duckdb().aggregate("count(*)").fetchall()[0][0]'),
        ("polars", "scan.to_polars().select(pl.len()).collect().item()"),
    ):
        code = f"""
import json, sys
import polars as pl
import lakequery as lq
scan = lq.DeltaTable({uri!r}).snapshot().scan()
count = {count}
print(json.dumps(dict(count=count, loaded=sorted(
    m for m in ("pandas", "pyarrow.dataset", "pyarrow.parquet", "pyarrow.compute", "fsspec",
                "asyncio") if m in sys.modules))))
"""
        got = run_python(code, tmp_path)
        assert got["count"] == kept, engine
        assert got["loaded"] == [], engine


def test_duckdb_read_of_a_checkpointed_table_imports_no_pyarrow_parquet(tmp_path: Path) -> None:
    """The checkpoint's schema comes from DuckDB's ``parquet_schema``: importing
    ``pyarrow.parquet`` for it would cost a fresh process ~12 ms."""
    uri = str(tmp_path / "t")
    for i in range(3):
        lq.write(uri, pa.table({"id": pa.array([i, i + 10], pa.int64())}), mode="append")
    lq.DeltaTable(uri).checkpoint()
    lq.write(uri, pa.table({"id": pa.array([99], pa.int64())}), mode="append")
    code = f"""
import json, sys
import lakequery as lq
snap = lq.DeltaTable({uri!r}).snapshot()
total = snap.scan().to_duckdb().aggregate("sum(id)").fetchall()[0][0]
print(json.dumps(dict(total=total, version=snap.version,
                      loaded="pyarrow.parquet" in sys.modules)))
"""
    got = run_python(code, tmp_path)
    assert got["version"] == 3  # the checkpoint at version 2 and one commit after it
    assert got["total"] == sum(range(3)) + sum(i + 10 for i in range(3)) + 99
    assert got["loaded"] is False


def test_duckdb_reads_import_no_pyarrow_compute(tmp_path: Path) -> None:
    """``import pyarrow.compute`` costs a fresh process ~27 ms (a wrapper and docstring per
    kernel): the replay, its load checks, planning and the DuckDB engine call the kernels
    through :mod:`lakequery.arrow_kernels`. Whole-table DuckDB reads of a table written by
    lakequery, a partitioned one, one with deletion vectors and one read from a checkpoint
    (files without schema tags, so every footer is checked) leave it unimported; a
    filtered read in the same process then imports it and still prunes."""
    plain = str(tmp_path / "plain")
    lq.write(plain, pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    parts = str(tmp_path / "parts")
    lq.write(
        parts,
        pa.table({"p": ["a", "b", "b", "c"], "id": pa.array([1, 2, 3, 4], pa.int64())}),
        partition_by="p",
    )
    dv, kept = _dv_table(tmp_path / "dv")
    kit = TableKit(tmp_path / "cp")
    kit.create(pa.schema([("id", pa.int64())]))
    for k in range(3):
        kit.commit([kit.write_parquet(pa.table({"id": pa.array([k, k + 10], pa.int64())}))])
    lq.DeltaTable(kit.uri).checkpoint()
    kit.commit([kit.write_parquet(pa.table({"id": pa.array([99], pa.int64())}))])
    code = f"""
import json, sys
import lakequery as lq
counts = [lq.DeltaTable(u).snapshot().scan().to_duckdb().aggregate("count(*)").fetchall()[0][0]
          for u in {[plain, parts, dv, kit.uri]!r}]
compute = "pyarrow.compute" in sys.modules
plan = lq.DeltaTable({parts!r}).snapshot().scan(filter="p = 'b'").plan()
print(json.dumps(dict(counts=counts, compute=compute, files=plan.num_files)))
"""
    got = run_python(code, tmp_path)
    assert got["counts"] == [3, 4, kept, 7]
    assert got["compute"] is False
    assert got["files"] == 1


def test_a_whole_table_read_imports_no_predicate_language_nor_thread_pool(
    tmp_path: Path,
) -> None:
    """A read without a filter needs neither the predicate language nor file skipping
    (~3.5 ms), nor the SQL renderer of predicates (~4 ms); the deletion vectors of a few
    local files are read in turn, without ``concurrent.futures`` (~2 ms); ``numpy.typing``
    (~1 ms: it parses docstrings when imported) is for annotations only. ``to_arrow()``
    loads no predicate module either. A filtered read in the same process then loads the
    predicate language and still skips files."""
    kit = TableKit(tmp_path / "t")
    kit.create(pa.schema([("id", pa.int64())]), protocol=dv_protocol())
    adds = [
        kit.write_parquet(pa.table({"id": pa.array(range(k * 100, k * 100 + 100), pa.int64())}))
        for k in range(2)
    ]
    kit.commit(adds)
    kit.commit(
        [remove_action(a) for a in adds]
        + [with_dv(a, kit.write_dv(range(0, 100, 3 + k))) for k, a in enumerate(adds)]
    )
    kept = 200 - len(range(0, 100, 3)) - len(range(0, 100, 4))
    code = f"""
import json, sys
import lakequery as lq
snap = lq.DeltaTable({kit.uri!r}).snapshot()
count = snap.scan().to_duckdb().aggregate("count(*)").fetchall()[0][0]
watched = ("lakequery.protocol.predicate_ast", "lakequery.protocol.predicate_sql",
           "lakequery.protocol.skipping", "concurrent.futures", "numpy.typing")
loaded = sorted(m for m in watched if m in sys.modules)
arrow_rows = snap.scan().to_arrow().num_rows
arrow_loaded = sorted(m for m in watched[:3] if m in sys.modules)
plan = snap.scan(filter="id >= 100").plan()
print(json.dumps(dict(count=count, loaded=loaded, files=plan.num_files,
                      arrow_rows=arrow_rows, arrow_loaded=arrow_loaded,
                      predicates="lakequery.protocol.predicate_ast" in sys.modules)))
"""
    got = run_python(code, tmp_path)
    assert got["count"] == got["arrow_rows"] == kept
    assert got["loaded"] == [] and got["arrow_loaded"] == []
    assert got["files"] == 1 and got["predicates"] is True


def test_a_plain_duckdb_read_creates_only_the_records_it_needs(tmp_path: Path) -> None:
    """Each frozen dataclass costs ~0.5-1 ms to create under Python 3.11 (its methods are
    compiled at import): a read of an unpartitioned table without deletion vectors loads
    none of the modules only other tables need. A partitioned table with deletion vectors
    then loads them, and reads right."""
    plain, other = str(tmp_path / "plain"), str(tmp_path / "other")
    lq.write(plain, pa.table({"id": pa.array(range(10), pa.int64())}))
    lq.write(
        other,
        pa.table({"p": [1, 1, 2], "id": pa.array([1, 2, 3], pa.int64())}),
        partition_by="p",
        configuration={"delta.enableDeletionVectors": "true"},
    )
    lq.DeltaTable(other).delete("id = 2")
    code = f"""
import json, sys
import lakequery as lq
watched = ("lakequery.history", "lakequery.engines.keep_masks",
           "lakequery.engines.variant_files", "lakequery.row_grouping",
           "lakequery.protocol.partitions")
count = lq.DeltaTable({plain!r}).snapshot().scan().to_duckdb().aggregate("count(*)").fetchall()
loaded = sorted(m for m in watched if m in sys.modules)
rows = sorted(lq.DeltaTable({other!r}).snapshot().scan().to_duckdb().fetchall())
print(json.dumps(dict(count=count[0][0], loaded=loaded, rows=rows,
                      later=sorted(m for m in watched if m in sys.modules))))
"""
    got = run_python(code, tmp_path)
    assert got["count"] == 10
    assert got["loaded"] == []
    assert got["rows"] == [[1, 1], [2, 3]]
    assert "lakequery.engines.keep_masks" in got["later"]
    assert "lakequery.protocol.partitions" in got["later"]


def test_cli_reads_import_no_pandas(tmp_path: Path) -> None:
    """``lakequery describe`` / ``files`` / ``head`` on a table with deletion vectors: a
    filled-in zero used to be ``pa.scalar(0)``, which made pyarrow import pandas (~0.15 s,
    a third of such a call). Nor do they import ``pyarrow.compute`` (~27 ms) or the commit
    machinery (``describe`` reads ``lakequery.management.detail``, whose package used to
    import ALTER TABLE's transactions and writer)."""
    uri, _ = _dv_table(tmp_path / "t")
    code = f"""
import contextlib, io, json, sys
from lakequery.cli import main
out = {{}}
for command in ("describe", "files", "head"):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main([command, {uri!r}])
        except SystemExit as exc:
            assert not exc.code, exc.code
    out[command] = len(buf.getvalue())
loaded = sorted(m for m in ("pandas", "pyarrow.compute", "lakequery.txn") if m in sys.modules)
print(json.dumps(dict(out=out, loaded=loaded)))
"""
    got = run_python(code, tmp_path)
    assert all(n > 0 for n in got["out"].values()), got
    assert got["loaded"] == []


def test_pruned_and_partitioned_reads_import_no_pandas(tmp_path: Path) -> None:
    """A filter that matches no file (a day not written yet) leaves the plan without rows:
    ``combine_chunks()`` of a chunked array without chunks and ``Schema.empty_table()``
    make pyarrow import pandas (0.15-0.2 s), so the DuckDB and Polars engines avoid both;
    so does grouping a partitioned table's files (``Table.group_by(...).aggregate`` imports
    pandas; :mod:`lakequery.row_grouping`). DELETE and UPDATE through deletion vectors,
    and the snapshot update after them, skip ``pyarrow.compute`` as well."""
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"id": pa.array(range(10), pa.int64()), "k": pa.array([0, 1] * 5, pa.int64())}),
        partition_by="k",
        configuration={"delta.enableDeletionVectors": "true"},
    )
    code = f"""
import json, sys
import polars as pl
import lakequery as lq
dt = lq.DeltaTable({uri!r})
deleted = dt.delete("id = 3").num_deleted_rows
updated = dt.update("id = 4", set={{"id": "id + 100"}}).num_updated_rows
compute = "pyarrow.compute" in sys.modules
scan = dt.snapshot().scan(filter="k = 7")
counts = [scan.to_duckdb().aggregate("count(*)").fetchall()[0][0],
          scan.to_polars().select(pl.len()).collect().item(),
          dt.delete("k = 7").num_deleted_rows,
          dt.snapshot().scan().to_polars().select(pl.len()).collect().item()]
pandas = "pandas" in sys.modules
print(json.dumps(dict(counts=counts, pandas=pandas, compute=compute, dml=[deleted, updated])))
"""
    got = run_python(code, tmp_path)
    assert got["counts"] == [0, 0, 0, 9]
    assert got["pandas"] is False
    assert got["dml"] == [1, 1]
    assert got["compute"] is False
    ids = lq.DeltaTable(uri).snapshot().scan(columns=["id"]).to_arrow().column("id").to_pylist()
    assert sorted(ids) == [0, 1, 2, 5, 6, 7, 8, 9, 104]


def test_writes_import_neither_pandas_nor_pyarrow_compute(tmp_path: Path) -> None:
    """Creating and appending to a plain table and to one partitioned by a string column: the
    writer's partitioning and statistics call :mod:`lakequery.arrow_kernels` (~27 ms of a
    fresh process for ``pyarrow.compute``), and the empty-string check of string partition
    values builds its scalars from buffers (``pa.scalar(0, ...)`` made pyarrow import
    pandas, ~0.15 s)."""
    root = str(tmp_path)
    code = f"""
import json, sys
import numpy as np
import pyarrow as pa
import lakequery as lq
from lakequery.arrow_buffers import int64_array, python_array
def batch(ids, keys):
    return pa.table({{"id": int64_array(np.array(ids)), "p": python_array(keys, pa.string())}})
plain, parts = {root!r} + "/plain", {root!r} + "/parts"
for uri, kw in ((plain, {{}}), (parts, {{"partition_by": "p"}})):
    lq.write(uri, batch([1, 2], ["a", ""]), **kw)
    lq.write(uri, batch([3, 4], ["b", None]), mode="append", **kw)
loaded = sorted(m for m in ("pandas", "pyarrow.compute") if m in sys.modules)
print(json.dumps(dict(loaded=loaded)))
"""
    got = run_python(code, tmp_path)
    assert got["loaded"] == []
    rows = (
        lq.DeltaTable(root + "/parts")
        .snapshot()
        .scan()
        .to_duckdb()
        .query("t", "SELECT id, p FROM t ORDER BY id")
        .fetchall()
    )
    assert rows == [(1, "a"), (2, None), (3, "b"), (4, None)]  # '' is stored as null
    assert lq.DeltaTable(root + "/plain").snapshot().scan().to_arrow().num_rows == 4


def test_tables_partitioned_by_two_columns_import_no_pandas(tmp_path: Path) -> None:
    """Grouping by two partition columns combines their codes (:mod:`lakequery.row_grouping`)
    with a kernel whose scalar is built from buffers: a Python number handed to it made
    pyarrow import pandas, in every write and Polars read of such a table."""
    uri = str(tmp_path / "t")
    code = f"""
import json, sys
import numpy as np
import polars as pl
import pyarrow as pa
import lakequery as lq
from lakequery.arrow_buffers import int64_array, python_array
t = pa.table({{"a": int64_array(np.array([1, 2, 1, 2])), "b": python_array(["x", "y", "y", "y"], pa.string()),
              "v": int64_array(np.arange(4))}})
lq.write({uri!r}, t, partition_by=["a", "b"])
groups = lq.DeltaTable({uri!r}).snapshot().files().num_rows
count = lq.DeltaTable({uri!r}).snapshot().scan().to_polars().select(pl.len()).collect().item()
loaded = sorted(m for m in ("pandas", "pyarrow.compute") if m in sys.modules)
print(json.dumps(dict(groups=groups, count=count, loaded=loaded)))
"""
    got = run_python(code, tmp_path)
    assert got["loaded"] == []
    assert (got["groups"], got["count"]) == (3, 4)
    rows = lq.DeltaTable(uri).snapshot().scan().to_duckdb().query("t", "SELECT a, b, v FROM t")
    assert sorted(rows.fetchall()) == [(1, "x", 0), (1, "y", 2), (2, "y", 1), (2, "y", 3)]


def test_writes_dml_and_filtered_reads_import_no_pandas(tmp_path: Path) -> None:
    """A script that writes, deletes, updates, compacts or reads with a filter: pyarrow
    imports pandas (0.15-0.2 s) on its first conversion of a Python or NumPy value, so
    lakequery builds such arrays from buffers (``lakequery.arrow_buffers``)."""
    root = str(tmp_path)
    code = f"""
import json, sys
import numpy as np
import polars as pl
import pyarrow as pa
import lakequery as lq
from lakequery.arrow_buffers import int64_array
t = pa.table({{"id": int64_array(np.arange(100)), "k": int64_array(np.arange(100) % 3)}})
plain, parts = {root!r} + "/plain", {root!r} + "/parts"
lq.write(plain, t)
lq.write(plain, t, mode="append")
lq.write(parts, t, partition_by=["k"])
lq.DeltaTable(plain).delete("id = 3")
lq.DeltaTable(plain).update("id = 5", set={{"id": "id + 1000"}})
lq.DeltaTable(plain).optimize()
lq.DeltaTable(parts).optimize(z_order_by=["id"])
snap = lq.DeltaTable(plain).snapshot()
counts = [
    snap.scan(filter="id > 50").to_duckdb().aggregate("count(*)").fetchall()[0][0],
    snap.scan(filter="id > 50").to_polars().select(pl.len()).collect().item(),
    lq.DeltaTable(parts).snapshot().scan(filter="k = 1").to_duckdb().aggregate("count(*)")
    .fetchall()[0][0],
]
print(json.dumps(dict(counts=counts, pandas="pandas" in sys.modules)))
"""
    got = run_python(code, tmp_path)
    # ids 0..99 twice; id 3 deleted twice, id 5 became 1005 twice: 2 * 49 rows above 50
    # plus the two 1005s; k = 1 holds 33 of the 100 rows
    assert got["counts"] == [2 * 49 + 2, 2 * 49 + 2, 33]
    assert got["pandas"] is False


def test_a_write_that_lands_on_a_checkpoint_imports_no_pandas(tmp_path: Path) -> None:
    """Every tenth commit writes a checkpoint, whose protocol, metadata and txn rows are
    built from Python values, and whose partition columns are parsed with Arrow scalars:
    both used to make pyarrow import pandas (+0.15-0.2 s on that commit)."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(10), pa.int64()), "k": pa.array([i % 3 for i in range(10)])})
    lq.write(uri, t, partition_by=["k"], configuration={"delta.enableDeletionVectors": "true"})
    for v in range(1, 7):
        lq.write(uri, t, mode="append", app_id="job", app_version=v)
    lq.DeltaTable(uri).delete("id = 3")  # deletion vectors
    lq.DeltaTable(uri).delete("k = 1")  # removes
    assert lq.DeltaTable(uri).snapshot().version == 8
    code = f"""
import json, sys
import numpy as np
import pyarrow as pa
import lakequery as lq
from lakequery.arrow_buffers import int64_array
t = pa.table({{"id": int64_array(np.arange(2)), "k": int64_array(np.arange(2))}})
lq.write({uri!r}, t, mode="append")  # version 9
lq.write({uri!r}, t, mode="append", app_id="job", app_version=7)  # version 10: checkpoint
print(json.dumps(dict(pandas="pandas" in sys.modules)))
"""
    got = run_python(code, tmp_path)
    assert got["pandas"] is False
    log = tmp_path / "t" / "_delta_log"
    assert (log / f"{10:020d}.checkpoint.parquet").exists()
    for v in range(10):  # as log cleanup would: the state comes from the checkpoint
        (log / f"{v:020d}.json").unlink()
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.version == 10
    assert snap.txns == {"job": 7}
    ids = sorted(snap.scan().to_arrow().column("id").to_pylist())
    # seven writes of 0..9, less id 3 and the k = 1 partition; then 0 and 1 twice
    assert ids == sorted([i for i in range(10) if i % 3 != 1 and i != 3] * 7 + [0, 1, 0, 1])


def test_parsing_partition_values_of_every_type_imports_no_pandas(tmp_path: Path) -> None:
    """Partition values are parsed with Arrow compute functions; a Python value handed to
    one of them (a key, a filler, a suffix) is an Arrow scalar, which pyarrow builds by
    importing pandas unless it comes from buffers."""
    code = """
import datetime as dt, json, sys
import pyarrow as pa
from lakequery.arrow_buffers import python_array
from lakequery.protocol.partitions import partition_struct
from lakequery.protocol.schema import parse_type
texts = {"string": "a", "long": "5", "integer": "-3", "short": "", "byte": None,
         "boolean": "TRUE", "date": "2024-01-02", "timestamp": "2024-01-02 03:04:05",
         "timestamp_ntz": "2024-01-02 03:04:05", "double": "1.5", "float": "2.5",
         "decimal(10,2)": "3.25", "binary": "ab"}
row = {f"c{i}": v for i, v in enumerate(texts.values())}
pv = python_array([row, {}], pa.map_(pa.string(), pa.string()))
specs = [(f"c{i}", f"c{i}", parse_type(t)) for i, t in enumerate(texts)]
parsed = partition_struct(pv, specs)
loaded = "pandas" in sys.modules  # (to_pylist of zoned timestamps may import it)
rows = parsed.to_pylist()
print(json.dumps(dict(first=[repr(v) for v in rows[0].values()],
                      second=list(rows[1].values()), pandas=loaded)))
"""
    got = run_python(code, tmp_path)
    assert got["pandas"] is False
    assert got["second"] == [None] * 13
    assert got["first"] == [
        "'a'",
        "5",
        "-3",
        "None",  # an empty value is null
        "None",
        "True",
        "datetime.date(2024, 1, 2)",
        "datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=zoneinfo.ZoneInfo(key='UTC'))",
        "datetime.datetime(2024, 1, 2, 3, 4, 5)",
        "1.5",
        "2.5",
        "Decimal('3.25')",
        "b'ab'",
    ]


def test_vacuum_imports_no_pandas(tmp_path: Path) -> None:
    """VACUUM lists the table and keeps what the log references: its listing and its set
    of referenced paths are Arrow arrays built from buffers, not from Python lists."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(10), pa.int64()), "k": pa.array([i % 3 for i in range(10)])})
    lq.write(uri, t, partition_by=["k"], configuration={"delta.enableDeletionVectors": "true"})
    lq.write(uri, t, mode="append")
    lq.DeltaTable(uri).delete("id = 3")  # deletion vectors, kept
    lq.DeltaTable(uri).delete("k = 1")  # removed files, deleted by VACUUM
    before = sorted(lq.DeltaTable(uri).snapshot().scan().to_arrow().column("id").to_pylist())
    code = f"""
import json, os, sys
import lakequery as lq
dt = lq.DeltaTable({uri!r})
dry = dt.vacuum(retention_hours=0, enforce_retention=False)
done = dt.vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
print(json.dumps(dict(dry=list(dry.files), done=list(done.files), deleted=done.files_deleted,
                      gone=[not os.path.exists(p) for p in done.files],
                      pandas="pandas" in sys.modules)))
"""
    got = run_python(code, tmp_path)
    assert got["pandas"] is False
    assert len(got["done"]) == got["deleted"] == 2  # the two k=1 files
    assert sorted(got["dry"]) == sorted(got["done"]) and all(got["gone"])
    after = sorted(lq.DeltaTable(uri).snapshot().scan().to_arrow().column("id").to_pylist())
    assert after == before


def test_partition_only_commands_import_no_pandas(tmp_path: Path) -> None:
    """A DELETE, an overwrite ``predicate`` and an OPTIMIZE ``predicate`` on partition
    columns pick whole files by their partition values; DuckDB evaluates the predicate
    (pyarrow's datasets would import pandas)."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(12), pa.int64()), "k": pa.array([i % 4 for i in range(12)])})
    lq.write(uri, t, partition_by=["k"])
    lq.write(uri, t, mode="append")
    code = f"""
import json, sys
import numpy as np
import pyarrow as pa
import lakequery as lq
from lakequery.arrow_buffers import int64_array
dt = lq.DeltaTable({uri!r})
deleted = dt.delete("k = 1 OR k IS NULL").num_removed_files
t = pa.table({{"id": int64_array(np.array([100])), "k": int64_array(np.array([2]))}})
replaced = lq.write({uri!r}, t, mode="overwrite", predicate="k = 2").num_removed_files
compacted = dt.optimize(predicate="k >= 3").files_removed
print(json.dumps(dict(counts=[deleted, replaced, compacted], pandas="pandas" in sys.modules)))
"""
    got = run_python(code, tmp_path)
    assert got["pandas"] is False
    assert got["counts"] == [2, 2, 2]  # two files per partition, from the two writes
    ids = sorted(lq.DeltaTable(uri).snapshot().scan().to_arrow().column("id").to_pylist())
    assert ids == sorted([i for i in range(12) if i % 4 in (0, 3)] * 2 + [100])


@pytest.mark.parametrize(
    "read",
    [
        'batch.to_duckdb().project("id").fetchall()',
        'batch.to_polars().select("id").rows()',
    ],
    ids=["duckdb", "polars"],
)
def test_a_stream_consumer_imports_no_pandas(tmp_path: Path, read: str) -> None:
    """A short-lived consumer (resume from a stored offset, read the new batches, exit):
    planning the batches and reading them with ``to_duckdb()`` or ``to_polars()`` load
    no pandas."""
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": pa.array([0, 1], pa.int64()), "k": pa.array([0, 1])}))
    stored = list(lq.DeltaTable(uri).stream())[-1].offset.to_json()
    for start in (2, 4, 6):
        t = pa.table({"id": pa.array([start, start + 1], pa.int64()), "k": pa.array([0, 1])})
        lq.write(uri, t, mode="append")
    code = f"""
import json, sys
import lakequery as lq
ids = []
for batch in lq.DeltaTable({uri!r}).stream(starting_offset={stored!r}, max_files_per_batch=1):
    ids += [r[0] for r in {read}]
compute = "pyarrow.compute" in sys.modules
print(json.dumps(dict(ids=sorted(ids), pandas="pandas" in sys.modules, compute=compute)))
"""
    got = run_python(code, tmp_path)
    assert got["ids"] == [2, 3, 4, 5, 6, 7]
    assert got["pandas"] is False
    if "duckdb" in read:  # (Polars' own Arrow import path is not lakequery's to choose)
        assert got["compute"] is False


def test_maintenance_commands_import_no_pyarrow_compute(tmp_path: Path) -> None:
    """A DELETE of whole partitions, a checkpoint and a VACUUM that deletes files, each the
    whole job of a short-lived process (a scheduled task, a CLI call), call Arrow's kernels
    through :mod:`lakequery.arrow_kernels` (``pyarrow.compute`` costs ~27 ms to import)."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(6), pa.int64()), "k": pa.array([0, 1, 2] * 2, pa.int64())})
    lq.write(uri, t, partition_by="k")
    lq.write(uri, t, mode="overwrite", partition_by="k")
    code = f"""
import json, sys
import lakequery as lq
dt = lq.DeltaTable({uri!r})
deleted = dt.delete("k = 1").num_deleted_rows
version = dt.checkpoint().version
removed = dt.vacuum(retention_hours=0, enforce_retention=False, dry_run=False).files_deleted
loaded = sorted(m for m in ("pandas", "pyarrow.compute") if m in sys.modules)
print(json.dumps(dict(done=[deleted, version, removed], loaded=loaded)))
"""
    got = run_python(code, tmp_path)
    assert got["loaded"] == []
    assert got["done"][:2] == [2, 2] and got["done"][2] >= 4  # the first write's files
    ids = lq.DeltaTable(uri).snapshot().scan().to_arrow().column("id").to_pylist()
    assert sorted(ids) == [0, 2, 3, 5]


def test_small_duckdb_reads_without_deletion_vectors_call_no_kernel(tmp_path: Path) -> None:
    """``pyarrow._compute`` (~5 ms of a fresh process, import and exit) is imported on the
    first Arrow kernel call (``lakequery.arrow_kernels``): DuckDB reads of a small table
    without deletion vectors, flat or read from a checkpoint, make none (their short lists
    of paths are handled as Python strings). A table with deletion vectors then imports
    it, and reads right."""
    plain = str(tmp_path / "plain")
    for k in range(3):
        lq.write(plain, pa.table({"id": pa.array([k, k + 10], pa.int64())}), mode="append")
    checkpointed = str(tmp_path / "cp")
    for k in range(4):
        lq.write(checkpointed, pa.table({"id": pa.array([k], pa.int64())}), mode="append")
    lq.DeltaTable(checkpointed).checkpoint()
    lq.write(checkpointed, pa.table({"id": pa.array([9], pa.int64())}), mode="append")
    dv, kept = _dv_table(tmp_path / "dv")
    code = f"""
import json, sys
import lakequery as lq
counts = [lq.DeltaTable(u).snapshot().scan().to_duckdb().aggregate("count(*)").fetchall()[0][0]
          for u in {[plain, checkpointed]!r}]
before = "pyarrow._compute" in sys.modules
dv = lq.DeltaTable({dv!r}).snapshot().scan().to_duckdb().aggregate("count(*)").fetchall()[0][0]
print(json.dumps(dict(counts=counts, before=before, dv=dv,
                      after="pyarrow._compute" in sys.modules)))
"""
    got = run_python(code, tmp_path)
    assert got["counts"] == [6, 5]
    assert got["before"] is False
    assert got["dv"] == kept and got["after"] is True
