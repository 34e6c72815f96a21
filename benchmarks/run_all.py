"""Generate benchmark data (if missing) and run every benchmark, printing Markdown.

    python -m benchmarks.run_all            # full sizes: 200k/500k-file logs, 5M-row tables
    python -m benchmarks.run_all --quick    # small sizes, fewer repetitions (a minute or so)
    python -m benchmarks.run_all --dml      # also DELETE / UPDATE / MERGE vs deltalake (opt-in)

Data goes to ``benchmarks/data/`` (git-ignored): ``logs/<kind>_<size>`` for snapshot benchmarks
and ``scan/<variant>_<rows>`` for scan benchmarks, each with a ``*.manifest.json`` next to it.
Existing data is reused unless ``--regen``; ``--check`` validates generated logs with deltalake.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import bench_dml, bench_scan, bench_snapshot, synth_data, synth_log

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

# (kind, live files, commits / checkpoint version)
FULL_LOGS = [
    ("json", 200_000, 1000),
    ("checkpoint", 200_000, 1000),
    ("json", 500_000, 1000),
    ("checkpoint", 500_000, 1000),
]
QUICK_LOGS = [("json", 20_000, 200), ("checkpoint", 20_000, 200)]
# (variant, rows, files)
FULL_TABLES = [("flat", 5_000_000, 32), ("part", 5_000_000, 32)]
QUICK_TABLES = [("flat", 500_000, 16), ("part", 500_000, 16)]


def _size(n: int) -> str:
    return f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1000}k"


def ensure_logs(specs: list[tuple[str, int, int]], regen: bool, check: bool) -> list[Path]:
    paths = []
    for kind, n, commits in specs:
        out = DATA / "logs" / f"{kind}_{_size(n)}"
        if regen or not synth_log.manifest_path(out).exists():
            info = synth_log.generate(out, kind, n, n_commits=commits)
            print(
                f"generated {out.name}: {info['live_files']} live files, "
                f"{info['log_bytes'] / 2**20:.0f} MiB log in {info['gen_seconds']} s",
                file=sys.stderr,
            )
            if check:
                res = synth_log.check_with_deltalake(out)
                print(f"  deltalake check: ok={res['ok']}", file=sys.stderr)
                if not res["ok"]:
                    raise SystemExit(f"generated log {out} failed the deltalake check: {res}")
        paths.append(out)
    return paths


def ensure_tables(specs: list[tuple[str, int, int]], regen: bool) -> list[Path]:
    paths = []
    for variant, rows, files in specs:
        out = DATA / "scan" / f"{variant}_{_size(rows)}"
        if regen or not synth_data.manifest_path(out).exists():
            info = synth_data.generate(out, variant, rows, files)
            print(
                f"generated {out.name}: {info['rows']} rows in {info['files']} files "
                f"({info['data_bytes'] / 2**20:.0f} MiB) in {info['gen_seconds']} s",
                file=sys.stderr,
            )
        paths.append(out)
    return paths


def environment() -> str:
    def ver(pkg: str) -> str:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return "not installed"

    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=HERE.parent,
            check=False,
        ).stdout.strip()
    except OSError:
        rev = "?"
    pkgs = ", ".join(
        f"{p} {ver(p)}" for p in ("lakequery", "deltalake", "duckdb", "polars", "pyarrow")
    )
    return (
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}, git {rev or '?'}\n"
        f"- python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs\n"
        f"- {pkgs}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, fewer repetitions")
    p.add_argument("--regen", action="store_true", help="regenerate data even if present")
    p.add_argument("--check", action="store_true", help="validate new logs with deltalake")
    p.add_argument("--skip-snapshot", action="store_true")
    p.add_argument("--skip-scan", action="store_true")
    p.add_argument(
        "--dml", action="store_true", help="also run bench_dml (DELETE/UPDATE/MERGE; opt-in)"
    )
    p.add_argument("--procs", type=int, help="snapshot: fresh processes per measurement")
    p.add_argument("--iters", type=int, help="snapshot: loads per process")
    p.add_argument("--repeat", type=int, help="scan: timed runs per query (best of)")
    p.add_argument("--json", type=Path, help="write all raw results to this file")
    a = p.parse_args(argv)

    procs = a.procs or (1 if a.quick else 3)
    iters = a.iters or 2
    repeat = a.repeat or (3 if a.quick else 5)
    raw: dict[str, Any] = {}
    out = ["# lakequery benchmarks" + (" (quick)" if a.quick else ""), "", environment(), ""]

    if not a.skip_snapshot:
        logs = ensure_logs(QUICK_LOGS if a.quick else FULL_LOGS, a.regen, a.check)
        print("snapshot benchmark ...", file=sys.stderr, flush=True)
        res = bench_snapshot.run(logs, procs=procs, iters=iters)
        raw["snapshot"] = res
        out += [
            f"## Snapshot load (best of {procs} fresh processes, {iters} loads each)",
            "",
            bench_snapshot.markdown(res),
            "",
        ]
    if not a.skip_scan:
        tables = ensure_tables(QUICK_TABLES if a.quick else FULL_TABLES, a.regen)
        print("scan benchmark ...", file=sys.stderr, flush=True)
        res = bench_scan.run(tables, repeat=repeat)
        raw["scan"] = res
        out += [f"## Scans (best of {repeat}, same process)", "", bench_scan.markdown(res), ""]

    if a.dml:
        rows = 500_000 if a.quick else 5_000_000
        dml_repeat = a.repeat or (2 if a.quick else 5)
        print("DML benchmark ...", file=sys.stderr, flush=True)
        res = bench_dml.run(
            rows, 16, dml_repeat, list(bench_dml.OPS), bench_dml.DEFAULT_WORKDIR / f"{rows}x16"
        )
        raw["dml"] = res
        out += [
            f"## DML (DELETE / UPDATE / MERGE; best of {dml_repeat} fresh processes per side)",
            "",
            bench_dml.markdown(res),
            "",
        ]

    if a.json:
        a.json.write_text(json.dumps(raw, indent=2))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
