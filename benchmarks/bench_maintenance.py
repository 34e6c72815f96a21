"""Table maintenance benchmarks (issue 6): Z-order, the Delta paper's Figure 5 skipping
experiment, and compaction, each against ``deltalake`` on identical tables.

1. Z-order: ``--rows`` rows (default 2M) of four random numeric clustering columns
   (int64, float64, int64, int64) plus a string and an int payload, 8 unclustered files,
   written once and copied for each run. ``DeltaTable.optimize(z_order_by=...)`` on 2 and
   4 columns vs ``deltalake``'s ``optimize.z_order`` with the same target size. Every run
   happens in a fresh subprocess that reports its wall time and peak RSS
   (``ru_maxrss``), so import and numba-compile costs are excluded from the time and each
   side's memory is its own.
2. Figure 5: ``--fig5-rows`` rows (default 1M) of sourceIP / destIP (uniform 32-bit) and
   sourcePort / destPort (uniform 16-bit), stored as int64, in ~100 files: unclustered,
   Z-ordered and Hilbert-ordered by lakequery, and Z-ordered by ``deltalake``. For each
   column, ``--probes`` point queries ``col = v`` on values present in the table; the
   share of files skipped is counted with lakequery's ``scan(filter=...).plan()`` on
   every layout.
3. Z-order in the Figure 5 layout (issue 16, ``--only zorder-fig5``): ``--rows`` rows
   (default 2M) of the four Figure 5 columns (uniform 32- and 16-bit values as int64)
   written by 20 appends, by lakequery into lakequery's base table and by ``deltalake``
   into deltalake's (the same rows); both Z-order all four columns into ~100 files. The
   two writers' targets differ in meaning (lakequery cuts its input into
   ``input bytes / target`` files; deltalake rolls a file over when its *estimated* size
   reaches the target and its files come out smaller), so lakequery gets ``input / 100``
   and deltalake's target is calibrated by one untimed run at ``input / 100`` scaled by
   the file count it gave. Same fresh-subprocess timing as 1; both sides' file counts
   are reported and both results are checked (row count, column sums).
4. Compaction: 1000 small files (``--compact-rows`` rows in all) in one partition-less
   table; ``DeltaTable.optimize()`` vs ``deltalake``'s ``optimize.compact`` (same target).

CLI::

    python -m benchmarks.bench_maintenance                     # all three, default sizes
    python -m benchmarks.bench_maintenance --rows 5000000 --only zorder
    python -m benchmarks.bench_maintenance --repeat 3 --only zorder-fig5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
FIG5_COLUMNS = ["sourceIP", "destIP", "sourcePort", "destPort"]

_RUNNER = r"""
import json, resource, sys, time
kind, path, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
import pyarrow as pa
warm = {"a": [3, 1, 2], "b": [0.1, 0.2, 0.3], "c": [1, 2, 3], "d": [1, 2, 3]}
if kind.startswith("lakequery"):
    # Warm up on a throwaway table: imports, numba kernels (both sides pay this once per
    # process, not per table).
    import lakequery as lq
    for _ in range(2):
        lq.write("memory://warm", pa.table(warm), mode="append")
    lq.DeltaTable("memory://warm").optimize(z_order_by=["a", "b", "c", "d"])
    lq.DeltaTable("memory://warm").optimize()
    start, cpu = time.perf_counter(), time.process_time()
    dt = lq.DeltaTable(path)  # opening is timed on both sides (deltalake loads the log here)
    if kind == "lakequery-zorder":
        m = dt.optimize(z_order_by=args["columns"], curve=args.get("curve", "zorder"),
                        target_file_size=args["target"])
    else:
        m = dt.optimize(target_file_size=args["target"])
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    out = {"files_added": m.files_added, "files_removed": m.files_removed}
else:
    import tempfile
    import deltalake
    scratch = tempfile.mkdtemp()
    for _ in range(2):
        deltalake.write_deltalake(scratch, pa.table(warm), mode="append")
    deltalake.DeltaTable(scratch).optimize.z_order(["a", "b", "c", "d"])
    deltalake.DeltaTable(scratch).optimize.compact()
    start, cpu = time.perf_counter(), time.process_time()
    dt = deltalake.DeltaTable(path)
    if kind == "deltalake-zorder":
        r = dt.optimize.z_order(args["columns"], target_size=args["target"])
    else:
        r = dt.optimize.compact(target_size=args["target"])
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    out = {"files_added": r["numFilesAdded"], "files_removed": r["numFilesRemoved"]}
out["seconds"] = elapsed
out["cpu_seconds"] = cpu  # all threads of the process
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if args.get("check"):  # after the RSS reading: not part of the measurement
    import pyarrow.compute as pc
    if kind.startswith("lakequery"):
        t = lq.DeltaTable(path).snapshot().scan().to_arrow()
    else:
        t = deltalake.DeltaTable(path).to_pyarrow_table()
    out["check"] = [t.num_rows, *(int(pc.sum(t.column(c)).as_py()) for c in args["columns"])]
print(json.dumps(out))
"""


def _run(kind: str, path: Path, **args: Any) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, kind, str(path), json.dumps(args)],
        check=False,
        capture_output=True,
        text=True,
        cwd=HERE.parent,
    )
    if proc.returncode:
        raise RuntimeError(f"{kind} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best run (by wall time) plus the median wall and CPU times over all runs."""
    best = dict(min(runs, key=lambda r: r["seconds"]))
    best["median_s"] = float(np.median([r["seconds"] for r in runs]))
    best["median_cpu_s"] = float(np.median([r["cpu_seconds"] for r in runs]))
    best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    return best


def _compare(lq: dict[str, Any], dl: dict[str, Any]) -> dict[str, Any]:
    return {
        "lakequery_s": lq["seconds"],
        "deltalake_s": dl["seconds"],
        "ratio": lq["seconds"] / dl["seconds"],
        "median_ratio": lq["median_s"] / dl["median_s"],
        "lakequery_median_s": lq["median_s"],
        "deltalake_median_s": dl["median_s"],
        "cpu_ratio": lq["median_cpu_s"] / dl["median_cpu_s"],
        "lakequery_cpu_s": lq["median_cpu_s"],
        "deltalake_cpu_s": dl["median_cpu_s"],
        "lakequery_rss_mb": lq["peak_rss_mb"],
        "deltalake_rss_mb": dl["peak_rss_mb"],
        "files": f"{lq['files_added']} / {dl['files_added']}",
    }


def _copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*.parquet"))


# --- 1. Z-order ---------------------------------------------------------------------------------


def _zorder_rows(n: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "a": rng.integers(0, 1 << 40, n, dtype=np.int64),
            "b": rng.normal(0, 1000, n),
            "c": rng.integers(-1000, 1000, n, dtype=np.int64),
            "d": rng.integers(0, 1 << 20, n, dtype=np.int64),
            "payload": pa.array(rng.integers(0, 10**9, n).astype(str)),
            "v": rng.integers(0, 100, n, dtype=np.int64),
        }
    )


def bench_zorder(work: Path, rows: int, repeat: int) -> list[dict[str, Any]]:
    import deltalake

    src = work / "zorder_src"
    if src.exists():
        shutil.rmtree(src)
    data = _zorder_rows(rows)
    per_file = -(-rows // 8)
    for k in range(8):
        deltalake.write_deltalake(str(src), data.slice(k * per_file, per_file), mode="append")
    target = max(1 << 20, _size(src) // 8)
    out = []
    for columns in (["a", "b"], ["a", "b", "c", "d"]):
        runs: dict[str, list[dict[str, Any]]] = {}
        for _ in range(repeat):  # the two sides alternate, so load changes hit both
            for kind in ("lakequery-zorder", "deltalake-zorder"):
                table = _copy(src, work / "zorder_run")
                runs.setdefault(kind, []).append(_run(kind, table, columns=columns, target=target))
        lq, dl = _summary(runs["lakequery-zorder"]), _summary(runs["deltalake-zorder"])
        out.append({"columns": len(columns), "rows": rows, **_compare(lq, dl)})
    return out


# --- 2. Figure 5 --------------------------------------------------------------------------------


def _network_rows(n: int, seed: int = 5) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "sourceIP": rng.integers(0, 1 << 32, n, dtype=np.int64),
            "destIP": rng.integers(0, 1 << 32, n, dtype=np.int64),
            "sourcePort": rng.integers(0, 1 << 16, n, dtype=np.int64),
            "destPort": rng.integers(0, 1 << 16, n, dtype=np.int64),
        }
    )


def _skipping(path: Path, probes: pa.Table) -> dict[str, float]:
    import lakequery as lq

    snap = lq.DeltaTable(str(path)).snapshot()
    out = {}
    for col in FIG5_COLUMNS:
        shares = []
        for v in probes.column(col).to_pylist():
            plan = snap.scan(filter=f"{col} = {v}").plan()
            shares.append(plan.skipped_files / plan.total_files)
        out[col] = float(np.mean(shares))
    out["files"] = snap.num_files
    return out


def bench_figure5(work: Path, rows: int, n_probes: int) -> dict[str, dict[str, float]]:
    import lakequery as lq

    src = work / "fig5_src"
    if src.exists():
        shutil.rmtree(src)
    data = _network_rows(rows)
    per_file = -(-rows // 100)
    # ~100 unclustered files (each a random sample), one commit
    lq.write(str(src), data.to_batches(max_chunksize=per_file), target_file_size=per_file * 16)
    target = max(1, sum(lq.DeltaTable(str(src)).snapshot().files().column("size").to_pylist()))
    target //= 100
    rng = np.random.default_rng(11)
    probes = data.take(pa.array(rng.integers(0, rows, n_probes)))
    results = {"none": _skipping(src, probes)}
    for label, kind, extra in (
        ("lakequery z-order", "lakequery-zorder", {"curve": "zorder"}),
        ("lakequery hilbert", "lakequery-zorder", {"curve": "hilbert"}),
        ("deltalake z-order", "deltalake-zorder", {}),
    ):
        table = _copy(src, work / "fig5_run")
        r = _run(kind, table, columns=FIG5_COLUMNS, target=target, **extra)
        results[label] = {**_skipping(table, probes), "seconds": r["seconds"]}
    return results


# --- 3. Z-order in the Figure 5 layout (issue 16) ---------------------------------------------


def _fig5_bases(work: Path, rows: int, appends: int = 20) -> tuple[Path, Path, pa.Table]:
    """lakequery's and deltalake's base tables: the same rows, each written by its own
    library in ``appends`` appends."""
    import deltalake

    import lakequery as lq

    data = _network_rows(rows, seed=7)
    per = -(-rows // appends)
    lq_src, dl_src = work / "fig5z_lq_src", work / "fig5z_dl_src"
    for src in (lq_src, dl_src):
        if src.exists():
            shutil.rmtree(src)
    for k in range(appends):
        part = data.slice(k * per, per)
        lq.write(str(lq_src), part, mode="append")
        deltalake.write_deltalake(str(dl_src), part, mode="append")
    return lq_src, dl_src, data


def bench_zorder_fig5(work: Path, rows: int, repeat: int, files: int = 100) -> dict[str, Any]:
    lq_src, dl_src, data = _fig5_bases(work, rows)
    expected = [data.num_rows, *(int(pc.sum(data.column(c)).as_py()) for c in FIG5_COLUMNS)]
    lq_target = max(1, _size(lq_src) // files)
    probe = max(1, _size(dl_src) // files)
    calib = _run(
        "deltalake-zorder", _copy(dl_src, work / "fig5z_run"), columns=FIG5_COLUMNS, target=probe
    )
    dl_target = max(1, probe * calib["files_added"] // files)
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(repeat):  # the two sides alternate, so load changes hit both
        for kind, src, target in (
            ("lakequery-zorder", lq_src, lq_target),
            ("deltalake-zorder", dl_src, dl_target),
        ):
            table = _copy(src, work / "fig5z_run")
            r = _run(kind, table, columns=FIG5_COLUMNS, target=target, check=True)
            if r["check"] != expected:
                raise AssertionError(f"{kind}: count and sums {r['check']} != {expected}")
            runs.setdefault(kind, []).append(r)
    lq, dl = _summary(runs["lakequery-zorder"]), _summary(runs["deltalake-zorder"])
    return {
        "rows": rows,
        "input_files": "20 / 20",
        "targets": f"{lq_target:,} / {dl_target:,} (calibration: {probe:,} gave "
        f"{calib['files_added']} files)",
        "input_bytes": f"{_size(lq_src):,} / {_size(dl_src):,}",
        "all_files": "; ".join(
            f"{k.split('-')[0]} {[r['files_added'] for r in v]}" for k, v in runs.items()
        ),
        **_compare(lq, dl),
    }


# --- 4. Compaction ------------------------------------------------------------------------------


def bench_compaction(work: Path, rows: int, repeat: int) -> dict[str, Any]:
    import lakequery as lq
    from lakequery.txn import Transaction
    from lakequery.writer import WriteState
    from lakequery.writer.data_files import write_data_files

    src = work / "compact_src"
    if src.exists():
        shutil.rmtree(src)
    data = _zorder_rows(rows, seed=3)
    per_file = -(-rows // 1000)
    lq.write(str(src), data.slice(0, per_file))
    table = lq.DeltaTable(str(src))
    snap = table.snapshot()
    state = WriteState.for_table(table.uri, snap.metadata, snap.protocol)
    adds = []
    for start in range(per_file, rows, per_file):  # one file per chunk, one commit
        adds += write_data_files(data.slice(start, per_file), state)
    txn = Transaction(table.storage, snap, operation="WRITE")
    txn.add_files(adds)
    txn.commit()
    n_files = lq.DeltaTable(str(src)).snapshot().num_files
    target = 64 << 20
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(repeat):
        for kind in ("lakequery-compact", "deltalake-compact"):
            table = _copy(src, work / "compact_run")
            runs.setdefault(kind, []).append(_run(kind, table, target=target))
    lqr, dl = _summary(runs["lakequery-compact"]), _summary(runs["deltalake-compact"])
    return {"input_files": n_files, "rows": rows, **_compare(lqr, dl)}


_HEADER = (
    "lq best / median (s) | dl best / median (s) | ratio best | ratio median | "
    "CPU lq / dl (s, median) | CPU ratio | peak RSS lq / dl (MB) | files lq / dl |"
)
_ALIGN = "---|---|---:|---:|---|---:|---|---|"


def _cells(r: dict[str, Any]) -> str:
    return (
        f"{r['lakequery_s']:.2f} / {r['lakequery_median_s']:.2f} | "
        f"{r['deltalake_s']:.2f} / {r['deltalake_median_s']:.2f} | {r['ratio']:.2f} | "
        f"{r['median_ratio']:.2f} | {r['lakequery_cpu_s']:.2f} / {r['deltalake_cpu_s']:.2f} | "
        f"{r['cpu_ratio']:.2f} | {r['lakequery_rss_mb']:.0f} / {r['deltalake_rss_mb']:.0f} | "
        f"{r['files']} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--fig5-rows", type=int, default=1_000_000)
    parser.add_argument("--compact-rows", type=int, default=1_000_000)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--only", choices=["zorder", "figure5", "zorder-fig5", "compaction"], default=None
    )
    parser.add_argument("--work", type=Path, default=None, help="scratch directory")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="lq-bench-maint-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print("load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    try:
        if args.only in (None, "zorder"):
            print("\n### Z-order\n")
            print(f"| columns | rows | {_HEADER}")
            print("|---:|---:|" + _ALIGN)
            for r in bench_zorder(work, args.rows, args.repeat):
                print(f"| {r['columns']} | {r['rows']:,} | {_cells(r)}", flush=True)
        if args.only in (None, "figure5"):
            print("\n### Figure 5: share of files skipped by point queries\n")
            print("| layout | files | " + " | ".join(FIG5_COLUMNS) + " | average | optimize (s) |")
            print("|---|---:|" + "---:|" * (len(FIG5_COLUMNS) + 2))
            for label, r in bench_figure5(work, args.fig5_rows, args.probes).items():
                avg = float(np.mean([r[c] for c in FIG5_COLUMNS]))
                cells = " | ".join(f"{100 * r[c]:.0f}%" for c in FIG5_COLUMNS)
                secs = f"{r['seconds']:.2f}" if "seconds" in r else "-"
                print(
                    f"| {label} | {int(r['files'])} | {cells} | {100 * avg:.0f}% | {secs} |",
                    flush=True,
                )
        if args.only in (None, "zorder-fig5"):
            print("\n### Z-order, Figure 5 layout (20 appends, ~100 output files)\n")
            r = bench_zorder_fig5(work, args.rows, args.repeat)
            print(f"| rows | {_HEADER}")
            print("|---:|" + _ALIGN)
            print(f"| {r['rows']:,} | {_cells(r)}")
            print(f"\ninput bytes lq / dl: {r['input_bytes']}; targets lq / dl: {r['targets']}")
            print(f"output files per run: {r['all_files']}; results checked (count, sums)")
        if args.only in (None, "compaction"):
            print("\n### Compaction\n")
            r = bench_compaction(work, args.compact_rows, args.repeat)
            print(f"| input files | rows | {_HEADER}")
            print("|---:|---:|" + _ALIGN)
            print(f"| {r['input_files']} | {r['rows']:,} | {_cells(r)}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    print("load average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
