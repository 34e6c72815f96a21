"""Latency benchmarks (issue 16): cold start, small tables, DV scans in DuckDB, Figure 4.

Run with the benchmark-only environment (``make bench-env``), which holds the peers:
DuckDB 1.5.x with the official ``delta`` extension from PyPI (``duckdb-extension-delta``,
loaded from the wheel's file with ``LOAD '<path>'``: nothing is installed from DuckDB's
extension server), ``polars-deltalake`` and ``deltalake``::

    make bench-env
    .venv-bench/bin/python -m benchmarks.bench_latency            # full sizes
    .venv-bench/bin/python -m benchmarks.bench_latency --quick    # < 2 minutes

Tables are created on first use under ``benchmarks/data/latency/`` (git-ignored) by
lakequery (``lq.write`` appends, ``DeltaTable.delete`` for the deletion vectors,
``DeltaTable.checkpoint``):

* ``small4``: 4 appends -> 4 files.
* ``dv2``: 2 appends -> 2 files, then ~1% of the rows deleted through DVs.
* ``log300``: 300 one-file commits of 100 rows (written directly, with the protocol,
  metadata and statistics ``lq.write`` gives), a checkpoint by lakequery at version 279,
  20 JSON commits after it.
* ``dv_<rows>`` / ``plain_<rows>``: ``<rows>`` rows in 32 files with ~1% of the rows
  deleted by DVs, and a twin holding exactly the remaining rows without DVs.
* ``fig4_<rows>_<partitions>``: the paper's Figure 4, one file per partition.

Sections (every ratio is lakequery / peer, both measured in the same run, alternating):

1. fresh process: ``python -c`` per measurement (interpreter start, imports, open, one
   aggregate ``count(*), sum(value)``), median of N; and bare imports. lakequery's
   bytecode is compiled first (``benchmarks/bytecode.py``), as ``pip install`` does for it
   and for every peer: runs before 2026-11-26 13:00 UTC compiled it in every process.
2. warm, same process: the same aggregate (open included: a new ``lq.DeltaTable`` /
   ``delta_scan`` / ``scan_delta`` each time; ``to_duckdb()`` on one connection and
   without one) and ``snapshot()`` vs ``deltalake.DeltaTable()``, median of N.
3. DuckDB scan of the DV table vs ``delta_scan`` of the same table, and each one's DV penalty
   against the DV-free twin (wall and process CPU medians).
4. Figure 4: ``sum(value)`` over every row, each reader in a fresh process; lakequery's time
   split into import, replay (``snapshot()``), planning (``scan().plan()``) and the engine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bytecode import compile_sources

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data" / "latency"
AGG = "SELECT count(*) AS n, sum(value) AS s FROM t"
CATEGORIES = ["a", "b", "c", "d", "e", "f", "g", "h"]
# no extension is ever installed or auto-loaded from the network
DUCKDB_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def delta_extension() -> str:
    """Path of the ``delta`` extension file shipped in the ``duckdb-extension-delta`` wheel
    for the DuckDB version installed."""
    import duckdb

    spec = importlib.util.find_spec("duckdb_extension_delta")
    if spec is None or spec.origin is None:
        raise SystemExit("duckdb-extension-delta is missing: make bench-env")
    base = Path(spec.origin).parent / "extensions"
    path = base / f"v{duckdb.__version__}" / "delta.duckdb_extension"
    if not path.exists():
        found = sorted(base.glob("v*/delta.duckdb_extension"))
        raise SystemExit(f"no delta extension for duckdb {duckdb.__version__}: {found}")
    return str(path)


def delta_connection(ext: str) -> Any:
    import duckdb

    con = duckdb.connect(config=DUCKDB_CONFIG)
    con.execute(f"LOAD '{ext}'")
    return con


# ---------------------------------------------------------------------------------------
# data


def _rows(n: int, start: int, seed: int) -> Any:
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    cats = pa.DictionaryArray.from_arrays(
        pa.array(rng.integers(0, len(CATEGORIES), n, dtype=np.int32)), pa.array(CATEGORIES)
    ).cast(pa.string())
    return pa.table(
        {
            "id": np.arange(start, start + n, dtype=np.int64),
            "category": cats,
            "value": rng.random(n),
            "k": rng.integers(0, 10_000, n, dtype=np.int32),  # k < 100: ~1% of rows
        }
    )


def _build(path: Path, make: Callable[[str], None]) -> str:
    if (path / "_SUCCESS").exists():
        return str(path)
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    make(str(path))
    (path / "_SUCCESS").write_text(f"{time.perf_counter() - t0:.1f} s\n")
    print(f"built {path.name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return str(path)


_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("id", "long"), ("category", "string"), ("value", "double"), ("k", "integer"))
    ],
}


def _append_commit(root: Path, version: int, table: Any) -> None:
    """Commit ``version`` adding one zstd Parquet file of ``table`` (protocol and metadata in
    version 0 as ``lq.write`` makes them), written straight into ``_delta_log``."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    (root / "_delta_log").mkdir(parents=True, exist_ok=True)
    name = f"part-{version:05d}-latency.zstd.parquet"
    pq.write_table(table, root / name, compression="zstd")
    now = int(time.time() * 1000)
    cols = ["id", "category", "value", "k"]
    stats = {
        "numRecords": table.num_rows,
        "minValues": {c: pc.min(table[c]).as_py() for c in cols},
        "maxValues": {c: pc.max(table[c]).as_py() for c in cols},
        "nullCount": dict.fromkeys(cols, 0),
    }
    actions: list[dict[str, Any]] = [
        {"commitInfo": {"timestamp": now, "operation": "WRITE", "engineInfo": "bench_latency"}}
    ]
    if version == 0:
        features = ["deletionVectors"]  # what `lq.write` gives a new table
        protocol = {"minReaderVersion": 3, "minWriterVersion": 7}
        actions.append(
            {"protocol": protocol | {"readerFeatures": features, "writerFeatures": features}}
        )
        actions.append(
            {
                "metaData": {
                    "id": "00000000-0000-0000-0000-000000000300",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(_SCHEMA),
                    "partitionColumns": [],
                    "configuration": {"delta.enableDeletionVectors": "true"},
                    "createdTime": now,
                }
            }
        )
    add = {
        "path": name,
        "partitionValues": {},
        "size": (root / name).stat().st_size,
        "modificationTime": now,
        "dataChange": True,
        "stats": json.dumps(stats),
    }
    actions.append({"add": add})
    with open(root / "_delta_log" / f"{version:020d}.json", "x") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def small_tables(rows_per_file: int) -> dict[str, str]:
    import lakequery as lq

    def small4(root: str) -> None:
        for i in range(4):
            lq.write(root, _rows(rows_per_file, i * rows_per_file, i), mode="append")

    def dv2(root: str) -> None:
        for i in range(2):
            lq.write(root, _rows(rows_per_file, i * rows_per_file, 10 + i), mode="append")
        lq.DeltaTable(root).delete("k < 100")

    def log300(root: str) -> None:
        # commits written directly (300 `lq.write` calls took 20-70 s), checkpoint by lakequery
        for i in range(300):
            _append_commit(Path(root), i, _rows(100, i * 100, 100 + i))
            if i == 279:
                lq.DeltaTable(root).checkpoint()

    return {
        "small4": _build(DATA / f"small4_{rows_per_file}", small4),
        "dv2": _build(DATA / f"dv2_{rows_per_file}", dv2),
        "log300": _build(DATA / "log300_v2", log300),
    }


def dv_tables(rows: int, files: int = 32) -> tuple[str, str]:
    import pyarrow.compute as pc

    import lakequery as lq

    per = rows // files

    def dv(root: str) -> None:
        for i in range(files):
            lq.write(root, _rows(per, i * per, 1000 + i), mode="append")
        lq.DeltaTable(root).delete("k < 100")

    def plain(root: str) -> None:
        for i in range(files):
            t = _rows(per, i * per, 1000 + i)
            lq.write(root, t.filter(pc.greater_equal(t["k"], 100)), mode="append")

    return _build(DATA / f"dv_{rows}", dv), _build(DATA / f"plain_{rows}", plain)


def fig4_table(rows: int, partitions: int) -> str:
    import pyarrow as pa

    import lakequery as lq

    def make(root: str) -> None:
        t = _rows(rows, 0, 4)
        t = t.append_column("p", pa.array(np.arange(rows, dtype=np.int64) % partitions))
        lq.write(root, t.select(["p", "id", "value"]), partition_by="p")

    return _build(DATA / f"fig4_{rows}_{partitions}", make)


# ---------------------------------------------------------------------------------------
# fresh processes

_PROLOGUE = "import time\n_t0 = time.perf_counter()\nP = {path!r}\nAGG = {agg!r}\n"
_EPILOGUE = (
    "\nimport json as _json, sys as _sys\n"
    "_marks = {k: v - _t0 for k, v in globals().items() if k.startswith('T_')}\n"
    "_sys.stdout.write(_json.dumps({'marks': _marks, 'result': str(res)}))\n"
)

# Each reader's whole program in a fresh interpreter. T_<phase> = time.perf_counter() marks
# after each phase (seconds since the program's first line; the parent times the process).
READERS: dict[str, str] = {
    "lq_duckdb": (
        "import lakequery as lq\nT_import = time.perf_counter()\n"
        "snap = lq.DeltaTable(P).snapshot()\nT_replay = time.perf_counter()\n"
        "scan = snap.scan()\nscan.plan()\nT_plan = time.perf_counter()\n"
        "res = scan.to_duckdb().query('t', AGG).fetchall()\nT_engine = time.perf_counter()\n"
    ),
    "delta_scan": (
        "import duckdb\nT_import = time.perf_counter()\n"
        "con = duckdb.connect(config={cfg!r})\ncon.execute(\"LOAD '{ext}'\")\n"
        "T_load_ext = time.perf_counter()\n"
        "res = con.sql(AGG.replace('FROM t', \"FROM delta_scan('\" + P + \"')\")).fetchall()\n"
        "T_engine = time.perf_counter()\n"
    ),
    "lq_polars": (
        "import lakequery as lq\nimport polars as pl\nT_import = time.perf_counter()\n"
        "snap = lq.DeltaTable(P).snapshot()\nT_replay = time.perf_counter()\n"
        "res = snap.scan().to_polars().select(pl.len(), pl.col('value').sum()).collect().rows()\n"
        "T_engine = time.perf_counter()\n"
    ),
    "polars_deltalake": (
        "import polars as pl\nimport polars_deltalake as pld\nT_import = time.perf_counter()\n"
        "res = pld.scan_delta(P).select(pl.len(), pl.col('value').sum()).collect().rows()\n"
        "T_engine = time.perf_counter()\n"
    ),
    "lq_arrow": (
        "import lakequery as lq\nimport pyarrow.compute as pc\nT_import = time.perf_counter()\n"
        "snap = lq.DeltaTable(P).snapshot()\nT_replay = time.perf_counter()\n"
        "t = snap.scan(columns=['value']).to_arrow()\n"
        "res = [(t.num_rows, pc.sum(t['value']).as_py())]\nT_engine = time.perf_counter()\n"
    ),
    "deltalake": (
        "import deltalake\nT_import = time.perf_counter()\n"
        "dt = deltalake.DeltaTable(P)\nT_replay = time.perf_counter()\n"
        "out = deltalake.QueryBuilder().register('t', dt).execute(AGG).read_all()\n"
        "res = [tuple(c.to_pylist()[0] for c in out.columns)]\n"
        "T_engine = time.perf_counter()\n"
    ),
    "read_parquet_hive": (
        "import duckdb\nT_import = time.perf_counter()\n"
        "res = duckdb.sql(AGG.replace('FROM t', \"FROM read_parquet('\" + P + "
        '"/*/*.parquet\', hive_partitioning=true)")).fetchall()\n'
        "T_engine = time.perf_counter()\n"
    ),
    "import_lakequery": "import lakequery\nres = None\n",
    "import_pyarrow": "import pyarrow\nres = None\n",
    "import_deltalake": "import deltalake\nres = None\n",
    "import_duckdb": "import duckdb\nres = None\n",
    "python": "res = None\n",
}


def run_fresh(reader: str, path: str, ext: str) -> dict[str, Any]:
    body = READERS[reader].replace("{cfg!r}", repr(DUCKDB_CONFIG)).replace("{ext}", ext)
    code = _PROLOGUE.format(path=path, agg=AGG) + body + _EPILOGUE
    env = dict(os.environ, PYTHONHASHSEED="0")
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=DATA, env=env
    )
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{reader} on {path} failed:\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return {"wall": wall, "marks": out["marks"], "result": out["result"]}


def fresh_medians(
    jobs: list[tuple[str, str]], reps: int, ext: str
) -> dict[tuple[str, str], dict[str, Any]]:
    """Runs every (reader, path) job ``reps`` times, round-robin so that all see the same
    machine load; the median wall time and median phase marks of each."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {j: [] for j in jobs}
    for job in jobs:  # one untimed run each: page cache, .pyc files
        run_fresh(*job, ext)
    for _ in range(reps):
        for job in jobs:
            runs[job].append(run_fresh(*job, ext))
    out = {}
    for job, rs in runs.items():
        marks = {k: statistics.median(r["marks"][k] for r in rs) for k in rs[0]["marks"]}
        out[job] = {
            "wall": statistics.median(r["wall"] for r in rs),
            "marks": marks,
            "result": rs[0]["result"],
        }
    return out


def _same(a: str, b: str) -> bool:
    """Results printed by two readers agree: (count, sum) with the sum to 1e-9."""
    import re

    na = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", a)]
    nb = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", b)]
    return len(na) == len(nb) and all(
        abs(x - y) <= 1e-9 * max(1.0, abs(y)) for x, y in zip(na, nb, strict=True)
    )


# ---------------------------------------------------------------------------------------
# warm, same process


def _median_pair(
    a: Callable[[], Any], b: Callable[[], Any], reps: int
) -> tuple[float, float, float, float]:
    """Median wall and process-CPU times of ``a`` and ``b``, run alternately after one
    warm-up each: ``(wall a, wall b, cpu a, cpu b)``."""
    a()
    b()
    walls: list[list[float]] = [[], []]
    cpus: list[list[float]] = [[], []]
    for _ in range(reps):
        for i, fn in enumerate((a, b)):
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            walls[i].append(time.perf_counter() - w0)
            cpus[i].append(time.process_time() - c0)
    med = statistics.median
    return med(walls[0]), med(walls[1]), med(cpus[0]), med(cpus[1])


def warm(tables: dict[str, str], reps: int, ext: str) -> list[dict[str, Any]]:
    import deltalake
    import duckdb
    import polars as pl
    import polars_deltalake as pld

    import lakequery as lq

    con = duckdb.connect(config=DUCKDB_CONFIG)
    dcon = delta_connection(ext)
    out = []
    for name, path in tables.items():

        def delta_scan(p: str = path) -> Any:
            return dcon.sql(AGG.replace("FROM t", f"FROM delta_scan('{p}')")).fetchall()

        pairs: list[tuple[str, Callable[[], Any], str, Callable[[], Any]]] = [
            (
                "to_duckdb()",
                lambda p=path: (
                    lq.DeltaTable(p).snapshot().scan().to_duckdb(con).query("t", AGG).fetchall()
                ),
                "delta_scan",
                delta_scan,
            ),
            (
                # the default: no connection given (lakequery's engine database; a new
                # database per call before git c06d9b1)
                "to_duckdb() without con",
                lambda p=path: (
                    lq.DeltaTable(p).snapshot().scan().to_duckdb().query("t", AGG).fetchall()
                ),
                "delta_scan",
                delta_scan,
            ),
            (
                "to_polars()",
                lambda p=path: (
                    lq.DeltaTable(p)
                    .snapshot()
                    .scan()
                    .to_polars()
                    .select(pl.len(), pl.col("value").sum())
                    .collect()
                ),
                "polars-deltalake",
                lambda p=path: pld.scan_delta(p).select(pl.len(), pl.col("value").sum()).collect(),
            ),
            (
                "snapshot()",
                lambda p=path: lq.DeltaTable(p).snapshot(),
                "deltalake.DeltaTable()",
                lambda p=path: deltalake.DeltaTable(p),
            ),
        ]
        for lq_name, lq_fn, peer_name, peer_fn in pairs:
            w_lq, w_peer, c_lq, c_peer = _median_pair(lq_fn, peer_fn, reps)
            out.append(
                {
                    "table": name,
                    "lakequery": lq_name,
                    "peer": peer_name,
                    "lq_s": w_lq,
                    "peer_s": w_peer,
                    "ratio": w_lq / w_peer,
                    "cpu_ratio": c_lq / c_peer if c_peer else float("nan"),
                }
            )
    return out


# ---------------------------------------------------------------------------------------
# DV scan in DuckDB


def dv_scan(dv: str, plain: str, reps: int, ext: str) -> dict[str, Any]:
    import duckdb

    import lakequery as lq

    con = duckdb.connect(config=DUCKDB_CONFIG)
    dcon = delta_connection(ext)
    snaps = {"dv": lq.DeltaTable(dv).snapshot(), "plain": lq.DeltaTable(plain).snapshot()}
    paths = {"dv": dv, "plain": plain}
    agg = "SELECT category, sum(value), count(*) FROM t GROUP BY category ORDER BY category"
    runs: dict[str, Callable[[], Any]] = {}
    for name in ("dv", "plain"):
        runs[f"lq_engine_{name}"] = lambda n=name: (
            snaps[n].scan().to_duckdb(con).query("t", agg).fetchall()
        )
        runs[f"lq_e2e_{name}"] = lambda n=name: (
            lq.DeltaTable(paths[n]).snapshot().scan().to_duckdb(con).query("t", agg).fetchall()
        )
        runs[f"delta_scan_{name}"] = lambda n=name: dcon.sql(
            agg.replace("FROM t", f"FROM delta_scan('{paths[n]}')")
        ).fetchall()
    results = {k: fn() for k, fn in runs.items()}
    ref = results["delta_scan_plain"]
    for k, r in results.items():
        if not all(
            a[0] == b[0] and a[2] == b[2] and abs(a[1] - b[1]) <= 1e-9 * abs(b[1])
            for a, b in zip(r, ref, strict=True)
        ):
            raise AssertionError(f"{k} disagrees with delta_scan on the DV-free twin")
    walls: dict[str, list[float]] = {k: [] for k in runs}
    cpus: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(reps):
        for k, fn in runs.items():
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            walls[k].append(time.perf_counter() - w0)
            cpus[k].append(time.process_time() - c0)
    med = statistics.median
    return {
        "wall": {k: med(v) for k, v in walls.items()},
        "cpu": {k: med(v) for k, v in cpus.items()},
        "best": {k: min(v) for k, v in walls.items()},
        "rows_kept": ref and sum(r[2] for r in ref),
    }


# ---------------------------------------------------------------------------------------
# report


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _git() -> str:
    """Where lakequery is imported from: the repository's HEAD, with the modified files
    under lakequery/ and udfs/ when the work tree differs, or another directory (e.g. an
    export of an older commit put first on PYTHONPATH)."""
    import lakequery

    where = Path(lakequery.__file__).resolve().parent.parent
    if where != REPO:
        return f"lakequery imported from {where}"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "lakequery", "udfs"],
            capture_output=True,
            text=True,
            cwd=REPO,
        ).stdout.split("\n")
        changed = [line[3:] for line in dirty if line.strip()]
        return f"git {head}" + (f" + work-tree changes to {', '.join(changed)}" if changed else "")
    except OSError:
        return "git ?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--small-rows", type=int, default=None, help="rows per small file")
    parser.add_argument("--fresh-reps", type=int, default=None)
    parser.add_argument("--warm-reps", type=int, default=None)
    parser.add_argument("--dv-rows", type=int, default=None, help="rows of the DV table")
    parser.add_argument("--dv-reps", type=int, default=None)
    parser.add_argument("--fig4-rows", type=int, default=None)
    parser.add_argument("--fig4-partitions", default=None, help="comma-separated, e.g. 1000,10000")
    parser.add_argument("--fig4-reps", type=int, default=None)
    parser.add_argument(
        "--only", default="fresh,warm,dv,fig4", help="comma-separated sections to run"
    )
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    args = parser.parse_args(argv)
    q = args.quick
    compile_sources()

    def pick(value: Any, quick: Any, full: Any) -> Any:
        return value if value is not None else (quick if q else full)

    small_rows = pick(args.small_rows, 2_000, 25_000)
    fresh_reps = pick(args.fresh_reps, 3, 7)
    warm_reps = pick(args.warm_reps, 7, 25)
    dv_rows = pick(args.dv_rows, 1_000_000, 5_000_000)
    dv_reps = pick(args.dv_reps, 5, 15)
    fig4_rows = pick(args.fig4_rows, 100_000, 1_000_000)
    fig4_parts = [int(x) for x in pick(args.fig4_partitions, "1000", "1000,10000").split(",")]
    fig4_reps = pick(args.fig4_reps, 1, 3)
    sections = set(args.only.split(","))

    from importlib import metadata

    import deltalake
    import duckdb
    import polars
    import polars_deltalake
    import pyarrow

    ext = delta_extension()
    raw: dict[str, Any] = {}
    print(
        f"{_git()}, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
        f"load average {_load()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"duckdb {duckdb.__version__} + delta extension "
        f"{metadata.version('duckdb-extension-delta')}, deltalake {deltalake.__version__}, "
        f"polars {polars.__version__}, polars-deltalake "
        f"{metadata.version('polars-deltalake')}, pyarrow {pyarrow.__version__}"
    )
    del polars_deltalake
    DATA.mkdir(parents=True, exist_ok=True)
    tables = small_tables(small_rows)

    if "fresh" in sections:
        pairs = [
            ("lq_duckdb", "delta_scan", "<= 1.0"),
            ("lq_polars", "polars_deltalake", "<= 1.0"),
            ("lq_arrow", "deltalake", "<= 1.5"),
        ]
        jobs = [(r, p) for p in tables.values() for a, b, _ in pairs for r in (a, b)]
        imports = ["python", "import_pyarrow", "import_lakequery", "import_deltalake"]
        imports.append("import_duckdb")
        jobs += [(r, "") for r in imports]
        res = fresh_medians(jobs, fresh_reps, ext)
        raw["fresh"] = {f"{r} {p}": v for (r, p), v in res.items()}
        print(
            f"\n### Fresh process: import + open + `count(*), sum(value)` "
            f"(median of {fresh_reps}, load {_load()})\n"
            "\n| table | lakequery | s | peer | s | ratio | target | same result |"
            "\n|---|---|---:|---|---:|---:|---|---|"
        )
        for name, path in tables.items():
            for a, b, target in pairs:
                ra, rb = res[(a, path)], res[(b, path)]
                print(
                    f"| {name} | {a} | {ra['wall']:.3f} | {b} | {rb['wall']:.3f} "
                    f"| {ra['wall'] / rb['wall']:.2f} | {target} "
                    f"| {_same(ra['result'], rb['result'])} |"
                )
        print("\n| phase medians (s since the first line) | " + " | ".join(tables) + " |")
        print("|---|" + "---:|" * len(tables))
        for reader in ("lq_duckdb", "delta_scan", "lq_polars", "lq_arrow", "deltalake"):
            for mark in res[(reader, next(iter(tables.values())))]["marks"]:
                cells = [f"{res[(reader, p)]['marks'][mark]:.3f}" for p in tables.values()]
                print(f"| {reader} {mark.removeprefix('T_')} | " + " | ".join(cells) + " |")
        base = res[("python", "")]["wall"]
        print("\n| fresh `python -c` | wall (s) | minus bare interpreter (s) |\n|---|---:|---:|")
        for r in imports:
            w = res[(r, "")]["wall"]
            print(f"| {r} | {w:.3f} | {w - base:.3f} |")
        lqi, pai = res[("import_lakequery", "")]["wall"], res[("import_pyarrow", "")]["wall"]
        print(f"\n`import lakequery` - `import pyarrow` = {lqi - pai:.3f} s (target <= 0.15 s)")

    if "warm" in sections:
        rows = warm(tables, warm_reps, ext)
        raw["warm"] = rows
        print(
            f"\n### Warm, same process: open + query each time (median of {warm_reps}, "
            f"load {_load()})\n"
            "\n| table | lakequery | ms | peer | ms | ratio | CPU ratio | target |"
            "\n|---|---|---:|---|---:|---:|---:|---|"
        )
        targets = {
            "to_duckdb()": "<= 1.0",
            "to_duckdb() without con": "<= 1.0",
            "to_polars()": "<= 1.0",
            "snapshot()": "<= 1.5",
        }
        for r in rows:
            print(
                f"| {r['table']} | {r['lakequery']} | {r['lq_s'] * 1e3:.1f} | {r['peer']} "
                f"| {r['peer_s'] * 1e3:.1f} | {r['ratio']:.2f} | {r['cpu_ratio']:.2f} "
                f"| {targets[r['lakequery']]} |"
            )

    if "dv" in sections:
        dv, plain = dv_tables(dv_rows)
        r = dv_scan(dv, plain, dv_reps, ext)
        raw["dv"] = r
        w, c = r["wall"], r["cpu"]
        print(
            f"\n### DuckDB scan, {dv_rows:,} rows in 32 files, ~1% deleted by DVs "
            f"({r['rows_kept']:,} kept), `category, sum(value), count(*) GROUP BY category` "
            f"(median of {dv_reps}, alternating, load {_load()})\n"
            "\n| reader | DV table (ms) | DV-free twin (ms) | DV penalty wall | DV penalty CPU |"
            "\n|---|---:|---:|---:|---:|"
        )
        for k, label in (
            ("lq_engine", "lakequery `to_duckdb()` (snapshot loaded before)"),
            ("lq_e2e", "lakequery, `DeltaTable(p).snapshot()` each time"),
            ("delta_scan", "DuckDB `delta_scan`"),
        ):
            print(
                f"| {label} | {w[k + '_dv'] * 1e3:.1f} | {w[k + '_plain'] * 1e3:.1f} "
                f"| {w[k + '_dv'] / w[k + '_plain']:.2f} | {c[k + '_dv'] / c[k + '_plain']:.2f} |"
            )
        print(
            f"\nlakequery / delta_scan on the DV table: {w['lq_engine_dv'] / w['delta_scan_dv']:.2f}"
            f" (engine only; CPU {c['lq_engine_dv'] / c['delta_scan_dv']:.2f}), "
            f"{w['lq_e2e_dv'] / w['delta_scan_dv']:.2f} (open included; CPU "
            f"{c['lq_e2e_dv'] / c['delta_scan_dv']:.2f}); target <= 1.0"
        )

    if "fig4" in sections:
        raw["fig4"] = {}
        readers = ["lq_duckdb", "delta_scan", "deltalake", "read_parquet_hive"]
        print(
            f"\n### Figure 4: {fig4_rows:,} rows, one file per partition, `count(*), "
            f"sum(value)`, fresh process (median of {fig4_reps})\n"
            "\n| partitions | reader | wall (s) | lakequery / reader | same result | load |"
            "\n|---:|---|---:|---:|---|---|"
        )
        splits = []
        for parts in fig4_parts:
            path = fig4_table(fig4_rows, parts)
            res = fresh_medians([(r, path) for r in readers], fig4_reps, ext)
            raw["fig4"][parts] = {r: res[(r, path)] for r in readers}
            lqw = res[("lq_duckdb", path)]["wall"]
            for r in readers:
                x = res[(r, path)]
                print(
                    f"| {parts} | {r} | {x['wall']:.3f} | {lqw / x['wall']:.2f} "
                    f"| {_same(x['result'], res[('lq_duckdb', path)]['result'])} | {_load()} |"
                )
            m = res[("lq_duckdb", path)]["marks"]
            start = lqw - m["T_engine"]  # interpreter start-up, before the first line
            splits.append(
                (
                    parts,
                    start,
                    m["T_import"],
                    m["T_replay"] - m["T_import"],
                    m["T_plan"] - m["T_replay"],
                    m["T_engine"] - m["T_plan"],
                    lqw,
                )
            )
        print(
            "\n| partitions | interpreter (s) | import (s) | replay `snapshot()` (s) "
            "| planning `plan()` (s) | engine `to_duckdb()` + query (s) | total (s) |"
            "\n|---:|---:|---:|---:|---:|---:|---:|"
        )
        for row in splits:
            print(f"| {row[0]} | " + " | ".join(f"{x:.3f}" for x in row[1:]) + " |")

    print(f"\nload average at the end: {_load()}")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
