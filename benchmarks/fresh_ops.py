"""Fresh-process cost of common entry points, for two lakequery source trees side by side.

Each measurement is a new ``python -c`` (run from an empty directory, so that
``PYTHONPATH`` decides which tree is imported) that builds a 1,000-row table in memory
without converting Python values, then runs one operation and reports whether pandas and
``pyarrow.compute`` were imported: ``lq.write`` of a new table, a DELETE through a deletion
vector, a filtered DuckDB read, the CLI's ``describe`` and ``files``, a Polars read of a
partitioned table, an append to a plain table and to one partitioned by a string column, an
append that lands on a checkpoint (version 10), a VACUUM dry run, a DELETE of a whole
partition, and a stream consumer that reads the batches after version 0 (with
``StreamBatch.to_duckdb()`` where the tree has it, else ``to_arrow()``). The table an
operation needs is written by the same tree beforehand, untimed (:data:`SETUP`). Trees
alternate; medians are printed.

Usage (RESULTS.md §8, the sections "pandas kept out of writes, DML and filtered reads" and
"2026-11-27, later")::

    git archive <commit> lakequery udfs | tar -x -C /tmp/lq-before
    .venv/bin/python -m compileall -q /tmp/lq-before lakequery
    .venv/bin/python -m benchmarks.fresh_ops --before /tmp/lq-before --reps 9
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bytecode import REPO, compile_sources

_PROLOGUE = """import numpy as np, pyarrow as pa
import lakequery as lq
ids = pa.Array.from_buffers(pa.int64(), 1000, [None, pa.py_buffer(np.arange(1000))])
t = pa.Table.from_batches([pa.RecordBatch.from_arrays([ids], names=["id"])])
ks = pa.Array.from_buffers(pa.int64(), 1000, [None, pa.py_buffer(np.arange(1000) % 4)])
tk = pa.Table.from_batches([pa.RecordBatch.from_arrays([ids, ks], names=["id", "k"])])
ss = pa.Array.from_buffers(pa.string(), 1000, [None, pa.py_buffer(
    np.arange(1001, dtype=np.int32)), pa.py_buffer(b"abcd" * 250)])
ts = pa.Table.from_batches([pa.RecordBatch.from_arrays([ids, ss], names=["id", "s"])])
"""


def _cli(command: str) -> str:
    """The CLI's ``command`` on the table at ``B``, through its ``main`` in this process."""
    return (
        "import contextlib, io\nfrom lakequery.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try:\n        main([{command!r}, B])\n    except SystemExit:\n        pass"
    )


OPS = {
    "lq.write of a new table": "lq.write(D + '/w', t)",
    "DELETE (deletion vector)": "lq.DeltaTable(B).delete('id = 3')",
    "filtered to_duckdb() + count(*)": (
        "lq.DeltaTable(B).snapshot().scan(filter='id > 50').to_duckdb()"
        ".aggregate('count(*)').fetchall()"
    ),
    "CLI describe (in-process main)": _cli("describe"),
    "CLI files (in-process main)": _cli("files"),
    "to_polars() of a partitioned table + count": (
        "import polars as pl\n"
        "lq.DeltaTable(B).snapshot().scan().to_polars().select(pl.len()).collect()"
    ),
    "append": "lq.write(B, t, mode='append')",
    "append, partitioned by a string column": "lq.write(B, ts, mode='append', partition_by=['s'])",
    "append landing on a checkpoint": "lq.write(B, t, mode='append')",
    "VACUUM (dry run)": "lq.DeltaTable(B).vacuum(retention_hours=0, enforce_retention=False)",
    "DELETE of a partition": "lq.DeltaTable(B).delete('k = 1')",
    "stream consumer: 3 batches after version 0": (
        "for b in lq.DeltaTable(B).stream(starting_version=1):\n"
        "    (b.to_duckdb().aggregate('count(*)').fetchall() if hasattr(b, 'to_duckdb')\n"
        "     else b.to_arrow().num_rows)"
    ),
}

#: The table each operation finds at ``B`` (default: one write of ``t``).
SETUP = {
    "lq.write of a new table": "pass",
    "append landing on a checkpoint": (
        "lq.write(B, t)\nfor _ in range(9):\n    lq.write(B, t, mode='append')"
    ),
    "VACUUM (dry run)": "lq.write(B, t)\nlq.write(B, t, mode='overwrite')",
    "DELETE of a partition": "lq.write(B, tk, partition_by=['k'])",
    "to_polars() of a partitioned table + count": "lq.write(B, tk, partition_by=['k'])",
    "append, partitioned by a string column": "lq.write(B, ts, partition_by=['s'])",
    "stream consumer: 3 batches after version 0": (
        "lq.write(B, t)\nfor _ in range(3):\n    lq.write(B, t, mode='append')"
    ),
}


def _python(code: str, tree: str, cwd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=tree)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a lakequery source tree to compare")
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    compile_sources()
    trees = {"before": str(Path(args.before).resolve()), "now": str(REPO)}
    base = tempfile.mkdtemp(prefix="lq-fresh-ops-")
    walls: dict[tuple[str, str], list[float]] = {}
    imported: dict[tuple[str, str], str] = {}  # 'pandas? pyarrow.compute?' per op, tree
    try:
        for _ in range(args.reps):
            for label, tree in trees.items():
                for name, op in OPS.items():
                    d = tempfile.mkdtemp(dir=base)
                    prepare = SETUP.get(name, "lq.write(B, t)")
                    setup = _python(_PROLOGUE + f"B = {d!r} + '/b'\n{prepare}", tree, base)
                    if setup.returncode:
                        raise RuntimeError(setup.stderr[-2000:])
                    code = (
                        _PROLOGUE
                        + f"D = {d!r}\nB = D + '/b'\n{op}\n"
                        + "import sys\nprint('pandas' in sys.modules, "
                        + "'pyarrow.compute' in sys.modules)"
                    )
                    t0 = time.perf_counter()
                    out = _python(code, tree, base)
                    wall = time.perf_counter() - t0
                    if out.returncode:
                        raise RuntimeError(f"{name} ({label}):\n{out.stderr[-2000:]}")
                    walls.setdefault((name, label), []).append(wall)
                    imported[(name, label)] = out.stdout.strip().splitlines()[-1]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"median of {args.reps}; before = {trees['before']}, now = {trees['now']}\n")
    print(
        "| fresh process | before (s) | now (s) | now / before "
        "| pandas, pyarrow.compute imported (before / now) |"
    )
    print("|---|---:|---:|---:|---|")
    for name in OPS:
        b, n = (statistics.median(walls[(name, t)]) for t in ("before", "now"))
        flags = f"{imported[(name, 'before')]} / {imported[(name, 'now')]}"
        print(f"| {name} | {b:.3f} | {n:.3f} | {n / b:.2f} | {flags} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
