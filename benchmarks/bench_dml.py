"""DML benchmark: DELETE / UPDATE / MERGE, lakequery (deletion vectors) vs ``deltalake``.

Data (generated, seeded): ``--rows`` rows (default 5M) in ``--files`` files (default 16),
columns ``id`` int64 (unique, increasing in write order), ``value`` float64, ``qty`` int64,
``category`` string (16 values), ``name`` string (unique-ish). Two base tables hold the
same rows in the same number of files (one append per file):

* lakequery: ``lq.write(..., configuration={"delta.enableDeletionVectors": "true"})``
  (zstd, lakequery's default codec);
* deltalake: ``deltalake.write_deltalake`` (zstd too, ``--dl-compression``); no deletion
  vectors, so its DML is copy-on-write.

Operations (each spread over every file):

* ``delete``: ``qty = 7`` (``qty`` is uniform over 0..999: 0.1% of rows, in every file);
* ``update``: ``qty = 3`` (0.1%), ``value = value + 1``, ``qty = qty * 2``;
* ``merge``: a 1% source (half existing ids sampled uniformly, half new ids), matched on
  ``target.id = source.id``, ``when_matched_update_all`` + ``when_not_matched_insert_all``.

Every measurement runs in a fresh subprocess on a fresh copy of the base table (the copy
is not timed); sides alternate (lakequery first in odd repeats, deltalake first in even
ones) and each (op, side) runs ``--repeat`` times. The child first runs the same operation
on a second copy (warm-up: lazy imports such as pyarrow's pandas import, runtimes; reported
as "first op in process"; ``--no-warmup`` skips it), then times opening the table and the
operation (``DeltaTable(path).delete(...)``), wall clock and process CPU. Peak RSS is
``VmHWM`` of the child right after the operation (see ``bench_snapshot``). Bytes written = sizes of the files that appear in the table directory
outside ``_delta_log`` (new Parquet and deletion-vector files); the new log bytes are
reported apart. After each operation the child checks count(*), sum(id) and sum(value)
(lakequery's table read by lakequery, deltalake's by deltalake), and the parent checks
both sides agree and match the expected count and sum(id).

CLI::

    python -m benchmarks.bench_dml                          # 5M rows, 16 files, 5 repeats
    python -m benchmarks.bench_dml --rows 500000 --repeat 2 --ops delete
    python -m benchmarks.bench_dml --json /tmp/dml.json
    python -m benchmarks.bench_dml --report /tmp/dml.json   # tables of a saved run
    python -m benchmarks.bench_dml --profile delete         # cProfile one lakequery op
    python -m benchmarks.bench_dml --rows 10000000 --wide   # 10M rows of 12 columns

Base tables are kept in ``benchmarks/data/dml/<rows>x<files>/`` (rebuilt when missing or
with ``--regen``); each measurement copies them to ``run/`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_WORKDIR = HERE / "data" / "dml"
OPS = ("delete", "update", "merge")
SIDES = ("lakequery", "deltalake")
TARGETS = {"delete": 0.05, "update": 0.10, "merge": 0.33}
DELETE_PRED = "qty = 7"
UPDATE_PRED = "qty = 3"
UPDATE_SET = {"value": "value + 1", "qty": "qty * 2"}
MERGE_FRACTION = 0.01
SEED = 23
#: ``--wide``: seven more columns per row (inherited by the child processes).
WIDE = os.environ.get("LQ_BENCH_DML_WIDE") == "1"


# -- data -------------------------------------------------------------------------------------
def make_data(rows: int, seed: int = SEED, id_offset: int = 0) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    categories = np.array([f"category-{i:02d}" for i in range(16)])
    names = pc.binary_join_element_wise(
        "name-", pc.cast(pa.array(rng.integers(0, 10**9, rows)), pa.string()), ""
    )
    table = pa.table(
        {
            "id": pa.array(np.arange(id_offset, id_offset + rows, dtype=np.int64)),
            "value": pa.array(rng.normal(100.0, 25.0, rows)),
            "qty": pa.array(rng.integers(0, 1000, rows, dtype=np.int64)),
            "category": pa.array(categories[rng.integers(0, 16, rows)]),
            "name": names,
        }
    )
    if WIDE:
        # an events-like row of ~12 columns (the shape behind the reference
        # figures): more floats, a timestamp and longer text
        def text(prefix: str) -> Any:
            parts = [pc.cast(pa.array(rng.integers(0, 2**62, rows)), pa.string()) for _ in range(2)]
            return pc.binary_join_element_wise(prefix, parts[0], "-", parts[1], "")

        start = np.datetime64("2026-01-01T00:00:00", "us")
        extra = {
            "price": pa.array(rng.random(rows) * 500),
            "discount": pa.array(rng.random(rows)),
            "units": pa.array(rng.integers(0, 50, rows, dtype=np.int32)),
            "ts": pa.array(start + rng.integers(0, 10**13, rows).astype("timedelta64[us]")),
            "city": pa.array(
                np.array([f"city-{i:03d}" for i in range(256)])[rng.integers(0, 256, rows)]
            ),
            "comment": text("comment-"),
            "email": text("user-"),
        }
        for name, column in extra.items():
            table = table.append_column(name, column)
    return table


def merge_source(rows: int, seed: int = SEED) -> Any:
    """1% of ``rows``: half existing ids (uniform sample), half new ids past the end."""
    import numpy as np
    import pyarrow as pa

    n = max(2, int(rows * MERGE_FRACTION))
    half = n // 2
    rng = np.random.default_rng(seed + 1)
    existing = np.sort(rng.choice(rows, size=half, replace=False).astype(np.int64))
    new = np.arange(rows, rows + (n - half), dtype=np.int64)
    src = make_data(n, seed=seed + 2)
    return src.set_column(0, "id", pa.array(np.concatenate([existing, new])))


def expected(op: str, rows: int) -> dict[str, int]:
    """count(*) and sum(id) after ``op`` on the base table."""
    import numpy as np

    ids = np.arange(rows, dtype=np.int64)
    if op == "delete":
        qty = make_data(rows).column("qty").to_numpy()
        keep = ids[qty != 7]
        return {"count": int(keep.size), "sum_id": int(keep.sum())}
    if op == "update":
        return {"count": rows, "sum_id": int(ids.sum())}
    src = merge_source(rows)
    new = src.column("id").to_numpy()
    new = new[new >= rows]
    return {"count": rows + int(new.size), "sum_id": int(ids.sum()) + int(new.sum())}


def _dl_props(compression: str) -> Any:
    import deltalake

    return deltalake.WriterProperties(compression=compression.upper())  # type: ignore[arg-type]


def build_bases(
    rows: int, files: int, workdir: Path, dl_compression: str, regen: bool
) -> dict[str, Any]:
    """The two base tables (once per rows/files/codec)."""
    import deltalake

    import lakequery as lq

    manifest = workdir / "manifest.json"
    want = {
        "rows": rows,
        "files": files,
        "dl_compression": dl_compression,
        "seed": SEED,
        "wide": WIDE,
    }
    if not regen and manifest.exists():
        info = json.loads(manifest.read_text())
        if {k: info.get(k) for k in want} == want:
            return info
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    t0 = time.perf_counter()
    data = make_data(rows)
    lq_dir, dl_dir = workdir / "base_lakequery", workdir / "base_deltalake"
    per = -(-rows // files)
    props = _dl_props(dl_compression)
    for i in range(files):
        part = data.slice(i * per, per)
        if i == 0:
            lq.write(str(lq_dir), part, configuration={"delta.enableDeletionVectors": "true"})
        else:
            lq.write(str(lq_dir), part, mode="append")
        deltalake.write_deltalake(str(dl_dir), part, mode="append", writer_properties=props)
    lq_files = lq.DeltaTable(str(lq_dir)).snapshot().files().num_rows
    dl_files = len(deltalake.DeltaTable(str(dl_dir)).file_uris())
    if lq_files != files or dl_files != files:
        raise SystemExit(f"expected {files} files per table, got lq={lq_files} dl={dl_files}")
    snap = lq.DeltaTable(str(lq_dir)).snapshot()
    if not snap.protocol.supports("deletionVectors"):
        raise SystemExit("the lakequery base table does not support deletion vectors")
    info = dict(
        want,
        bytes={"lakequery": _data_bytes(lq_dir), "deltalake": _data_bytes(dl_dir)},
        gen_seconds=round(time.perf_counter() - t0, 1),
    )
    manifest.write_text(json.dumps(info, indent=2))
    return info


def _listing(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = p.stat().st_size
    return out


def _data_bytes(root: Path) -> int:
    return sum(s for p, s in _listing(root).items() if not p.startswith("_delta_log"))


def _vmhwm_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/self/status")


# -- one measurement (child process) ---------------------------------------------------------
def _lakequery_op(op: str, path: str, rows: int) -> Any:
    import duckdb  # noqa: F401  (imports before timing)

    import lakequery as lq
    import lakequery.commands.delete
    import lakequery.commands.merge
    import lakequery.commands.update

    source = merge_source(rows) if op == "merge" else None

    def run() -> Any:
        dt = lq.DeltaTable(path)
        if op == "delete":
            m = dt.delete(DELETE_PRED)
        elif op == "update":
            m = dt.update(UPDATE_PRED, set=UPDATE_SET)
        else:
            m = (
                dt.merge(
                    source, on="target.id = source.id", source_alias="source", target_alias="target"
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        return {k: v for k, v in vars(m).items() if isinstance(v, (int, bool))}

    return run


def _deltalake_op(op: str, path: str, rows: int, compression: str) -> Any:
    import deltalake

    source = merge_source(rows) if op == "merge" else None
    props = _dl_props(compression)

    def run() -> Any:
        dt = deltalake.DeltaTable(path)
        if op == "delete":
            m = dt.delete(DELETE_PRED, writer_properties=props)
        elif op == "update":
            m = dt.update(updates=UPDATE_SET, predicate=UPDATE_PRED, writer_properties=props)
        else:
            m = (
                dt.merge(
                    source,
                    predicate="target.id = source.id",
                    source_alias="source",
                    target_alias="target",
                    writer_properties=props,
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        return {k: v for k, v in m.items() if isinstance(v, (int, bool))}

    return run


def _check(side: str, path: str) -> dict[str, Any]:
    sql = "SELECT count(*) AS n, sum(id) AS s, sum(value) AS v FROM t"
    if side == "lakequery":
        import duckdb

        import lakequery as lq

        con = duckdb.connect()
        scan = lq.DeltaTable(path).snapshot().scan(columns=["id", "value"])
        ((n, s, v),) = scan.to_duckdb(con).query("t", sql).fetchall()
    else:
        import deltalake

        dt = deltalake.DeltaTable(path)
        import pyarrow as pa

        result = deltalake.QueryBuilder().register("t", dt).execute(sql).read_all()
        row = pa.table(result).to_pylist()[0]
        n, s, v = row["n"], row["s"], row["v"]
    return {"count": int(n), "sum_id": int(s), "sum_value": float(v)}


def child_main(
    side: str, op: str, path: str, rows: int, compression: str, warm: str | None
) -> dict[str, Any]:
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401

    root = Path(path)

    def make(table: str) -> Any:
        if side == "lakequery":
            return _lakequery_op(op, table, rows)
        return _deltalake_op(op, table, rows, compression)

    run_warm = make(warm) if warm is not None else None  # imports the engine
    out: dict[str, Any] = {"side": side, "op": op, "base_mb": _vmhwm_mb()}
    if run_warm is not None:  # the same operation on another copy: lazy imports, runtimes
        t0 = time.perf_counter()
        run_warm()
        out["cold_seconds"] = time.perf_counter() - t0
        out["cold_peak_mb"] = _vmhwm_mb()
    run = make(path)
    before = _listing(root)
    c0, t0 = time.process_time(), time.perf_counter()
    metrics = run()
    seconds = time.perf_counter() - t0
    out["cpu_seconds"] = time.process_time() - c0  # all threads of the process
    peak_mb = _vmhwm_mb()
    after = _listing(root)
    new = {p: s for p, s in after.items() if p not in before}
    data_new = {p: s for p, s in new.items() if not p.startswith("_delta_log")}
    out.update(
        seconds=seconds,
        peak_mb=peak_mb,
        bytes_written=sum(data_new.values()),
        files_written=len(data_new),
        dv_files_written=sum(1 for p in data_new if p.endswith(".bin")),
        log_bytes_written=sum(s for p, s in new.items() if p.startswith("_delta_log")),
        metrics=metrics,
        check=_check(side, path),
    )
    return out


def profile(op: str, rows: int, files: int, workdir: Path, top: int = 30) -> None:
    """cProfile of one lakequery ``op`` after a warm-up run of the same op on another copy
    (so lazy imports and first-use costs are not in it); prints the top entries by
    cumulative time, then by own time."""
    import cProfile
    import pstats

    build_bases(rows, files, workdir, "zstd", False)
    scratch = workdir / "run"
    shutil.rmtree(scratch, ignore_errors=True)
    for name in ("warm", "table"):
        shutil.copytree(workdir / "base_lakequery", scratch / name)
    _lakequery_op(op, str(scratch / "warm"), rows)()
    run = _lakequery_op(op, str(scratch / "table"), rows)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    metrics = run()
    prof.disable()
    print(f"{op}: {time.perf_counter() - t0:.3f} s under cProfile; {metrics}")
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top // 2)
    shutil.rmtree(scratch, ignore_errors=True)


def run_child(
    side: str, op: str, path: Path, rows: int, compression: str, warm: Path | None
) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "benchmarks.bench_dml", "--child", side, op,
        "--table", str(path), "--rows", str(rows), "--dl-compression", compression,
    ]  # fmt: skip
    if warm is not None:
        cmd += ["--warm-table", str(warm)]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=1800)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (p.stderr or p.stdout).strip().splitlines()[-8:]
    raise RuntimeError(f"{side} {op}: child rc={p.returncode}: " + "\n".join(tail))


# -- driver -----------------------------------------------------------------------------------
def run(
    rows: int,
    files: int,
    repeat: int,
    ops: list[str],
    workdir: Path,
    dl_compression: str = "zstd",
    regen: bool = False,
    warmup: bool = True,
) -> dict[str, Any]:
    info = build_bases(rows, files, workdir, dl_compression, regen)
    load_start = os.getloadavg()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {op: {s: [] for s in SIDES} for op in ops}
    scratch = workdir / "run"
    for r in range(repeat):
        for op in ops:
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            for side in order:
                shutil.rmtree(scratch, ignore_errors=True)
                shutil.copytree(workdir / f"base_{side}", scratch / "table")
                warm = None
                if warmup:
                    warm = scratch / "warm"
                    shutil.copytree(workdir / f"base_{side}", warm)
                res = run_child(side, op, scratch / "table", rows, dl_compression, warm)
                res["loadavg"] = os.getloadavg()[0]
                runs[op][side].append(res)
                print(
                    f"[{r + 1}/{repeat}] {op:6s} {side:9s} {res['seconds']:7.3f} s "
                    f"(cold {res.get('cold_seconds', float('nan')):7.3f} s) "
                    f"peak {res['peak_mb']:6.0f} MB  wrote {res['bytes_written'] / 2**20:7.2f} MiB "
                    f"load {res['loadavg']:.2f}",
                    file=sys.stderr,
                    flush=True,
                )
    shutil.rmtree(scratch, ignore_errors=True)
    return {
        "rows": rows,
        "files": files,
        "repeat": repeat,
        "dl_compression": dl_compression,
        "warmup": warmup,
        "base": info,
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "summary": summarize(runs, rows),
        "runs": runs,
    }


def summarize(runs: dict[str, dict[str, list[dict[str, Any]]]], rows: int) -> list[dict[str, Any]]:
    """Best / median per (op, side), ratios and checks. ``ratio_pairs`` is the median of
    lakequery/deltalake over the repeats, each pair measured back to back (the most
    load-robust figure on a shared machine); ``cpu_ratio`` compares median CPU seconds."""
    nan = float("nan")
    summary = []
    for op in runs:
        exp = expected(op, rows)
        row: dict[str, Any] = {"op": op, "target_ratio": TARGETS[op], "expected": exp}
        for side in SIDES:
            rs = runs[op][side]
            t = [x["seconds"] for x in rs]
            row[side] = {
                "best_s": min(t),
                "median_s": statistics.median(t),
                "cpu_median_s": statistics.median(x.get("cpu_seconds", nan) for x in rs),
                "cold_best_s": min(x.get("cold_seconds", nan) for x in rs),
                "cold_median_s": statistics.median(x.get("cold_seconds", nan) for x in rs),
                "peak_mb": max(x["peak_mb"] for x in rs),
                "base_mb": statistics.median(x["base_mb"] for x in rs),
                "bytes_written": rs[0]["bytes_written"],
                "files_written": rs[0]["files_written"],
                "dv_files_written": rs[0]["dv_files_written"],
                "log_bytes_written": rs[0]["log_bytes_written"],
                "metrics": rs[0]["metrics"],
                "check": rs[0]["check"],
            }
        lq_r, dl_r = row["lakequery"], row["deltalake"]
        row["ratio_best"] = lq_r["best_s"] / dl_r["best_s"]
        row["ratio_median"] = lq_r["median_s"] / dl_r["median_s"]
        pairs = zip(runs[op]["lakequery"], runs[op]["deltalake"], strict=True)
        row["ratio_pairs"] = statistics.median(a["seconds"] / b["seconds"] for a, b in pairs)
        row["cpu_ratio"] = lq_r["cpu_median_s"] / dl_r["cpu_median_s"]
        row["cold_ratio_best"] = lq_r["cold_best_s"] / dl_r["cold_best_s"]
        row["rss_ratio"] = lq_r["peak_mb"] / dl_r["peak_mb"]
        checks = [x["check"] for s in SIDES for x in runs[op][s]]
        row["correct"] = all(
            c["count"] == exp["count"]
            and c["sum_id"] == exp["sum_id"]
            and abs(c["sum_value"] - checks[0]["sum_value"]) <= 1e-9 * abs(checks[0]["sum_value"])
            for c in checks
        )
        row["time_holds"] = row["ratio_best"] <= TARGETS[op]
        row["rss_holds"] = row["rss_ratio"] <= 1.0
        summary.append(row)
    return summary


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "| op | side | best (s) | median (s) | median CPU (s) | first op in process, best (s) "
        "| peak RSS (MB) | RSS after imports (MB) | bytes written | files written (DV files) "
        "| log bytes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for row in res["summary"]:
        for side in SIDES:
            s = row[side]
            lines.append(
                f"| {row['op']} | {side} | {s['best_s']:.3f} | {s['median_s']:.3f} | "
                f"{s.get('cpu_median_s', float('nan')):.3f} | {s['cold_best_s']:.3f} | {s['peak_mb']:.0f} | {s['base_mb']:.0f} | {s['bytes_written']:,} | "
                f"{s['files_written']} ({s['dv_files_written']}) | {s['log_bytes_written']:,} |"
            )
    lines += [
        "",
        "| op | ratio best | ratio median | median of pair ratios | CPU ratio | first-op ratio "
        "| target | time holds (best) | peak RSS ratio | RSS holds "
        "| count / sum(id) / sum(value) agree |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|",
    ]
    for row in res["summary"]:
        lines.append(
            f"| {row['op']} | {row['ratio_best']:.3f} | {row['ratio_median']:.3f} | "
            f"{row['ratio_pairs']:.3f} | {row['cpu_ratio']:.3f} | {row['cold_ratio_best']:.3f} | <= {row['target_ratio']} | {'yes' if row['time_holds'] else '**no**'} | "
            f"{row['rss_ratio']:.2f} | {'yes' if row['rss_holds'] else '**no**'} | "
            f"{row['correct']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--wide", action="store_true", help="12 columns per row instead of 5")
    p.add_argument("--repeat", type=int, default=5, help="runs per (op, side), alternating")
    p.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS))
    p.add_argument(
        "--workdir", type=Path, help="base tables + scratch (default: data/dml/<rows>x<files>)"
    )
    p.add_argument("--dl-compression", default="zstd", help="deltalake's Parquet codec")
    p.add_argument("--regen", action="store_true", help="rebuild the base tables")
    p.add_argument("--json", type=Path, help="write the raw results here")
    p.add_argument("--report", type=Path, help="print the tables of a saved --json file")
    p.add_argument("--profile", choices=OPS, help="cProfile one (warm) lakequery operation instead")
    p.add_argument("--child", nargs=2, metavar=("SIDE", "OP"), help=argparse.SUPPRESS)
    p.add_argument(
        "--no-warmup",
        action="store_true",
        help="time the first operation of each process (includes lazy imports)",
    )
    p.add_argument("--table", help=argparse.SUPPRESS)
    p.add_argument("--warm-table", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    global WIDE
    if a.wide:
        os.environ["LQ_BENCH_DML_WIDE"] = "1"
        WIDE = True
    if a.child:
        side, op = a.child
        print(json.dumps(child_main(side, op, a.table, a.rows, a.dl_compression, a.warm_table)))
        return 0
    if a.report:
        res = json.loads(a.report.read_text())
        res["summary"] = summarize(res["runs"], res["rows"])
        print(markdown(res))
        print(f"\nload average: start {res['loadavg_start']}, end {res['loadavg_end']}")
        return 0
    workdir = a.workdir or DEFAULT_WORKDIR / f"{a.rows}x{a.files}{'-wide' if WIDE else ''}"
    if a.profile:
        profile(a.profile, a.rows, a.files, workdir)
        return 0
    res = run(a.rows, a.files, a.repeat, a.ops, workdir, a.dl_compression, a.regen, not a.no_warmup)
    if a.json:
        a.json.write_text(json.dumps(res, indent=2))
    print(json.dumps(res["summary"], indent=2))
    print()
    print(markdown(res))
    print(f"\nload average: start {res['loadavg_start']}, end {res['loadavg_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
