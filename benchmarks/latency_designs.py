"""Fresh-process designs of issue 16, side by side in one run (section 8 of RESULTS.md).

Each reader of :mod:`benchmarks.bench_latency`'s fresh section runs against the work
tree and against a second lakequery source tree (``--before``, e.g. an export of an older
commit: ``git archive <commit> lakequery udfs | tar -x -C /tmp/lq-before``), round-robin
with the peers, plus probes that bound what a design can reach:

* ``floor_*``: a bare ``python -c`` importing only the modules a path imports today
  (no table opened), i.e. the floor of any design that keeps those modules;
* ``duckdb_only``: DuckDB alone replays a JSON-only log (adds minus removes by path, no
  deletion vectors, no checkpoint, no protocol checks) and aggregates the live files: a
  generous floor for a replay that never imports pyarrow (small4 only);
* ``lq_arrow_via_duckdb``: ``scan.to_duckdb().to_arrow_table()``, the Arrow table read by
  DuckDB instead of pyarrow.dataset;
* ``design_b``: lakequery's own statements for the table, captured in this process (the
  replay on the private database, then the footer check and the relation on the engine
  database) and run in a fresh interpreter that imports DuckDB only, the live files
  fetched as Python rows: what a ``to_duckdb()`` that never imports pyarrow would cost,
  less lakequery's own modules and the path, DV and link checks (small4 and log300; dv2's
  relation reads keep masks registered from NumPy, which a capture cannot carry).

Usage: ``PYTHONPATH=$PWD .venv-bench/bin/python -m benchmarks.latency_designs --before
/tmp/lq-before --reps 9``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import bench_latency as bl
from benchmarks.bytecode import compile_sources

PROBES = {
    "floor_duckdb": "import duckdb, numpy, pyarrow, pyarrow.compute\nres = None\n",
    "floor_polars": "import polars, duckdb, numpy, pyarrow, pyarrow.compute\nres = None\n",
    "floor_arrow": "import duckdb, numpy, pyarrow, pyarrow.compute, pyarrow.dataset\nres = None\n",
    "floor_arrow_no_dataset": "import duckdb, numpy, pyarrow, pyarrow.compute\nres = None\n",
    "duckdb_only": (
        "import duckdb\nT_import = time.perf_counter()\n"
        "con = duckdb.connect()\n"
        "live = [r[0] for r in con.sql(\n"
        '  "WITH a AS (SELECT add.path AS p, remove.path AS r FROM read_json(\'"\n'
        '  + P + "/_delta_log/*.json\', columns="\n'
        "  \"{'add': 'STRUCT(path VARCHAR)', 'remove': 'STRUCT(path VARCHAR)'}))\"\n"
        "  ' SELECT p FROM a WHERE p IS NOT NULL AND p NOT IN'\n"
        "  ' (SELECT r FROM a WHERE r IS NOT NULL)').fetchall()]\n"
        "T_replay = time.perf_counter()\n"
        "files = ', '.join(\"'\" + P + '/' + x + \"'\" for x in live)\n"
        "res = con.sql(AGG.replace('FROM t', 'FROM read_parquet([' + files + '])')).fetchall()\n"
        "T_engine = time.perf_counter()\n"
    ),
    "design_b": (
        "import json, duckdb\nT_import = time.perf_counter()\n"
        "cap = json.load(open(P + '.design_b.json'))\n"
        "con = duckdb.connect(':memory:', config=cap['private_config'])\n"
        "for kind, stmt in cap['replay']:\n"
        "    rows = con.sql(stmt).fetchall() if kind == 'sql' else con.execute(stmt).fetchall()\n"
        "    if kind == 'execute' and 'metaData' in stmt:\n"
        "        [json.loads(v) for r in rows for v in r[1:] if isinstance(v, str)]\n"
        "T_replay = time.perf_counter()\n"
        "cur = duckdb.connect().cursor()\n"
        "for kind, stmt in cap['engine']:\n"
        "    r = cur.execute(stmt) if kind == 'execute' else cur.sql(stmt)\n"
        "    if 'parquet_schema(' in stmt:\n"
        "        r.fetchall()\n"
        "res = cur.sql(cap['relation']).query('t', AGG).fetchall()\n"
        "T_engine = time.perf_counter()\n"
    ),
    "lq_arrow_via_duckdb": (
        "import lakequery as lq\nimport pyarrow.compute as pc\nT_import = time.perf_counter()\n"
        "snap = lq.DeltaTable(P).snapshot()\nT_replay = time.perf_counter()\n"
        "t = snap.scan(columns=['value']).to_duckdb().to_arrow_table()\n"
        "res = [(t.num_rows, pc.sum(t['value']).as_py())]\nT_engine = time.perf_counter()\n"
    ),
}


class _Recorder:
    """A DuckDB connection that notes the SQL it is given (``execute`` and ``sql``)."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.statements: list[tuple[str, str]] = []

    def execute(self, sql: str, *args: Any) -> Any:
        self.statements.append(("execute", sql))
        return self.con.execute(sql, *args)

    def sql(self, sql: str, *args: Any) -> Any:
        self.statements.append(("sql", sql))
        return self.con.sql(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def capture_design_b(path: str) -> None:
    """Writes ``<path>.design_b.json``: the statements lakequery runs to read ``path``
    through ``to_duckdb()`` (see the module docstring, ``design_b``)."""
    import lakequery as lq
    from lakequery import duckdb_databases
    from lakequery.duckdb_databases import engine_cursor, private_cursor
    from lakequery.engines import duckdb as engine
    from lakequery.log_segment import load_state

    table = lq.DeltaTable(path)
    replay = _Recorder(private_cursor())
    load_state(table.storage, None, replay)  # type: ignore[arg-type]
    cur = _Recorder(engine_cursor())
    engine._SHARED_TYPES.clear()  # the footer check runs as in a fresh process
    rel = table.snapshot().scan().to_duckdb(cur)  # type: ignore[arg-type]
    Path(path + ".design_b.json").write_text(
        json.dumps(
            {
                "private_config": duckdb_databases._PRIVATE_SETTINGS,
                "replay": replay.statements,
                "engine": cur.statements[:-1],  # the last one is the relation
                "relation": rel.sql_query(),
            }
        )
    )


PAIRS = [
    ("lq_duckdb", "delta_scan", 1.0),
    ("lq_polars", "polars_deltalake", 1.0),
    ("lq_arrow", "deltalake", 1.5),
]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="a lakequery source tree to compare")
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    compile_sources()
    bl.READERS.update(PROBES)
    ext = bl.delta_extension()
    tables = bl.small_tables(25_000)
    here = str(bl.REPO)
    trees = {"after": here, "before": args.before}
    jobs: list[tuple[str, str, str]] = []  # (reader, path, tree)
    for path in tables.values():
        for lq_reader, peer, _ in PAIRS:
            jobs += [(lq_reader, path, "after"), (lq_reader, path, "before"), (peer, path, "")]
        jobs.append(("lq_arrow_via_duckdb", path, "after"))
    jobs.append(("duckdb_only", tables["small4"], ""))
    for name in ("small4", "log300"):
        capture_design_b(tables[name])
        jobs.append(("design_b", tables[name], ""))
    jobs += [(p, "", "") for p in PROBES if p.startswith("floor_")]
    jobs += [(p, "", "") for p in ("python", "import_duckdb", "import_pyarrow", "import_deltalake")]

    def run(job: tuple[str, str, str]) -> dict[str, object]:
        reader, path, tree = job
        os.environ["PYTHONPATH"] = trees.get(tree, here)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = bl.run_fresh(reader, path, ext)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out["cpu"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return out

    print(f"{bl._git()}, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load {bl._load()}")
    for job in jobs:  # untimed: page cache, .pyc files
        run(job)
    runs: dict[tuple[str, str, str], list[dict[str, object]]] = {j: [] for j in jobs}
    for _ in range(args.reps):
        for job in jobs:
            runs[job].append(run(job))
    print(f"median of {args.reps}, load after {bl._load()}")
    wall = {j: statistics.median(float(r["wall"]) for r in rs) for j, rs in runs.items()}  # type: ignore[arg-type]
    print(
        "\n| table | reader | before s | after s | peer | peer s | before ratio | after ratio | target |"
    )
    print("|---|---|---:|---:|---|---:|---:|---:|---:|")
    for name, path in tables.items():
        deltalake_s = wall[("deltalake", path, "")]
        for lq_reader, peer, target in PAIRS:
            before, after = wall[(lq_reader, path, "before")], wall[(lq_reader, path, "after")]
            peer_s = wall[(peer, path, "")]
            got, want = (
                str(runs[j][0]["result"]) for j in ((lq_reader, path, "after"), (peer, path, ""))
            )
            print(
                f"| {name} | {lq_reader} | {before:.3f} | {after:.3f} | {peer} | {peer_s:.3f} "
                f"| {before / peer_s:.2f} | {after / peer_s:.2f} | <= {target} |"
                + ("" if bl._same(got, want) else " (results differ)")
            )
        via = wall[("lq_arrow_via_duckdb", path, "after")]
        print(
            f"| {name} | lq_arrow_via_duckdb | | {via:.3f} | deltalake | {deltalake_s:.3f} "
            f"| | {via / deltalake_s:.2f} | |"
        )
    # CPU seconds of the child (user + system): less sensitive than wall time to other
    # processes on a loaded machine
    cpu = {j: statistics.median(float(r["cpu"]) for r in rs) for j, rs in runs.items()}  # type: ignore[arg-type]
    print(
        "\n| table | reader | before CPU s | after CPU s | peer CPU s | before ratio | after ratio |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, path in tables.items():
        for lq_reader, peer, _ in PAIRS:
            before, after = cpu[(lq_reader, path, "before")], cpu[(lq_reader, path, "after")]
            peer_s = cpu[(peer, path, "")]
            print(
                f"| {name} | {lq_reader} / {peer} | {before:.3f} | {after:.3f} | {peer_s:.3f} "
                f"| {before / peer_s:.2f} | {after / peer_s:.2f} |"
            )
    print("\n| probe | wall s | CPU s |\n|---|---:|---:|")
    for job in jobs:
        if not job[1] or job[0] in ("duckdb_only", "design_b"):
            name = next((n for n, p in tables.items() if p == job[1]), "")
            peer = ("delta_scan", job[1], "")
            ratio = ""
            if peer in wall:
                ratio = f" ({wall[job] / wall[peer]:.2f}x `delta_scan` on {name})"
                got, want = (str(runs[j][0]["result"]) for j in (job, peer))
                ratio += "" if bl._same(got, want) else " (results differ)"
            print(f"| {job[0]}{ratio} | {wall[job]:.3f} | {cpu[job]:.3f} |")
    print("\n| phase marks (median s since first line) | table | marks |\n|---|---|---|")
    for job, rs in runs.items():
        if rs[0]["marks"]:
            keys = list(rs[0]["marks"])  # type: ignore[call-overload]
            marks = {k: statistics.median(r["marks"][k] for r in rs) for k in keys}  # type: ignore[index]
            name = next((n for n, p in tables.items() if p == job[1]), "")
            text = ", ".join(f"{k[2:]} {v:.3f}" for k, v in marks.items())
            print(f"| {job[0]} {job[2]} | {name} | {text} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
