"""Snapshot-load benchmark: lakequery vs deltalake on synthetic logs (see ``synth_log``).

Measured operation (one "load"):

* lakequery: ``lq.DeltaTable(path).snapshot().files()`` -> ``pa.Table`` with one row per live
  file (log replay + materialised live-file table).
* deltalake: ``pa.table(DeltaTable(path).get_add_actions(flatten=True))`` -> one row per live
  file with partition values and *parsed* stats columns (``min.*``, ``max.*``, ``null_count.*``).
  deltalake 1.x materialises the active-file metadata in ``DeltaTable()`` already; the
  ``get_add_actions`` call adds the Arrow export.

Every measurement runs in a fresh child process (``python -m benchmarks.bench_snapshot --child``)
so peak RSS is per engine and per log. ``--procs`` children are started per
(log, engine); each runs ``--iters`` loads in a row:

* ``best_s``: best first-load time over the fresh processes (the "open a table" cost),
* ``warm_s``: best time of the later in-process loads (caches and JITs warm),
* ``peak_mb``: median peak RSS right after the first load; ``base_mb``: peak RSS after imports.
  Peak RSS is ``VmHWM`` (``/proc/self/status``), not ``ru_maxrss``: on Linux the latter is
  inherited across fork+exec, so it would report the parent's RSS if that is larger.

CLI::

    python -m benchmarks.bench_snapshot                       # all logs under benchmarks/data/logs
    python -m benchmarks.bench_snapshot --logs benchmarks/data/logs/json_200k --procs 3 --iters 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_LOG_DIR = HERE / "data" / "logs"
ENGINES = ("lakequery", "deltalake")


def _maxrss_mb() -> float:
    """Peak RSS of this process in MiB.

    Uses ``VmHWM`` from ``/proc/self/status`` when available: on Linux ``ru_maxrss`` survives
    ``execve`` and so includes the *parent's* RSS at fork time (a large parent such as
    ``run_all`` would inflate every child's number). Falls back to ``ru_maxrss``.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _lakequery_loader() -> Any:
    try:
        import lakequery as lq
    except Exception as e:  # pragma: no cover - depends on work in progress
        raise RuntimeError(f"lakequery is not importable: {e!r}") from e
    if not hasattr(lq, "DeltaTable"):
        raise RuntimeError(
            "lakequery API missing: expected lakequery.DeltaTable(uri).snapshot().files() "
            "(lakequery.DeltaTable is not defined yet)"
        )
    # lakequery imports its replay modules on first use; import them here, outside the
    # timing, as deltalake's import is (otherwise a fresh process's first load pays them)
    import lakequery.log_segment
    import lakequery.snapshot

    def load(path: str) -> Any:
        snap = lq.DeltaTable(path).snapshot()
        files = snap.files()
        if not hasattr(files, "num_rows"):
            raise RuntimeError(f"snapshot.files() returned {type(files).__name__}, not a pa.Table")
        return files

    return load


def _deltalake_loader() -> Any:
    import pyarrow as pa
    from deltalake import DeltaTable

    def load(path: str) -> Any:
        return pa.table(DeltaTable(path).get_add_actions(flatten=True))

    return load


def child_main(engine: str, path: str, iters: int) -> dict[str, Any]:
    """Runs inside a fresh interpreter; returns the measurements."""
    import pyarrow  # noqa: F401  (imported by both engines; part of the baseline)

    out: dict[str, Any] = {"engine": engine, "path": path}
    try:
        load = _lakequery_loader() if engine == "lakequery" else _deltalake_loader()
    except Exception as e:
        out["error"] = str(e)
        return out
    out["base_mb"] = _maxrss_mb()
    times: list[float] = []
    try:
        for i in range(iters):
            t0 = time.perf_counter()
            tbl = load(path)
            times.append(time.perf_counter() - t0)
            if i == 0:
                out["peak_mb"] = _maxrss_mb()
                out["rows"] = tbl.num_rows
                out["columns"] = tbl.num_columns
                out["column_names"] = tbl.column_names[:40]
                out["nbytes_mb"] = tbl.nbytes / 2**20
            del tbl
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        return out
    out["times"] = times
    out["peak_all_mb"] = _maxrss_mb()
    return out


def run_child(engine: str, path: Path, iters: int, timeout: float = 1800) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bench_snapshot",
        "--child",
        engine,
        "--logs",
        str(path),
        "--iters",
        str(iters),
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
    return {"engine": engine, "path": str(path), "error": f"child rc={p.returncode}: {tail}"}


def bench_log(path: Path, engines: tuple[str, ...], procs: int, iters: int) -> list[dict[str, Any]]:
    manifest = json.loads((path.parent / f"{path.name}.manifest.json").read_text())
    results = []
    for engine in engines:
        runs = [run_child(engine, path, iters) for _ in range(procs)]
        errors = [r["error"] for r in runs if "error" in r]
        r0 = runs[0]
        res: dict[str, Any] = {
            "log": path.name,
            "kind": manifest["kind"],
            "live_files": manifest["live_files"],
            "engine": engine,
        }
        if errors:
            res["error"] = errors[0]
        else:
            firsts = [r["times"][0] for r in runs]
            later = [t for r in runs for t in r["times"][1:]]
            res.update(
                best_s=min(firsts),
                median_s=statistics.median(firsts),
                warm_s=min(later) if later else None,
                peak_mb=statistics.median(r["peak_mb"] for r in runs),
                base_mb=statistics.median(r["base_mb"] for r in runs),
                rows=r0["rows"],
                columns=r0["columns"],
                table_mb=r0["nbytes_mb"],
                rows_ok=all(r["rows"] == manifest["live_files"] for r in runs),
            )
        results.append(res)
        print(f"  {path.name:>18} {engine:>10}: {_fmt_result(res)}", file=sys.stderr, flush=True)
    return results


def _fmt_result(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"ERROR {r['error']}"
    warm = f"{r['warm_s']:.3f}" if r["warm_s"] is not None else "-"
    return (
        f"best {r['best_s']:.3f}s warm {warm}s peak {r['peak_mb']:.0f} MB "
        f"(base {r['base_mb']:.0f} MB) rows {r['rows']} ok={r['rows_ok']}"
    )


def _f(x: Any, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| log | live files | engine | best of N (s) | warm (s) | peak RSS (MB) | RSS after "
        "imports (MB) | result cols | rows ok |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(
                f"| {r['log']} | {r['live_files']} | {r['engine']} | error: "
                f"{str(r['error'])[:120]} | | | | | |"
            )
            continue
        lines.append(
            f"| {r['log']} | {r['live_files']} | {r['engine']} | {_f(r['best_s'])} | "
            f"{_f(r['warm_s'])} | {_f(r['peak_mb'], '.0f')} | {_f(r['base_mb'], '.0f')} | "
            f"{r['columns']} | {r['rows_ok']} |"
        )
    lines += [
        "",
        "| log | time lakequery/deltalake | warm time ratio | peak RSS ratio | "
        "(peak - base) RSS ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        by.setdefault(r["log"], {})[r["engine"]] = r
    for log, d in by.items():
        lq, dl = d.get("lakequery"), d.get("deltalake")
        if not lq or not dl or "error" in lq or "error" in dl:
            lines.append(f"| {log} | n/a | n/a | n/a | n/a |")
            continue
        warm = lq["warm_s"] / dl["warm_s"] if lq["warm_s"] and dl["warm_s"] else None
        d_lq, d_dl = lq["peak_mb"] - lq["base_mb"], dl["peak_mb"] - dl["base_mb"]
        lines.append(
            f"| {log} | {lq['best_s'] / dl['best_s']:.2f} | {_f(warm, '.2f')} | "
            f"{lq['peak_mb'] / dl['peak_mb']:.2f} | {_f(d_lq / d_dl if d_dl > 0 else None, '.2f')} |"
        )
    return "\n".join(lines)


def find_logs(log_dir: Path = DEFAULT_LOG_DIR) -> list[Path]:
    return sorted(
        p.parent / p.name.removesuffix(".manifest.json") for p in log_dir.glob("*.manifest.json")
    )


def run(
    logs: list[Path], engines: tuple[str, ...] = ENGINES, procs: int = 3, iters: int = 2
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for log in logs:
        results += bench_log(log, engines, procs, iters)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--logs", nargs="*", type=Path, help="log dirs (default: all generated)")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--procs", type=int, default=3, help="fresh processes per (log, engine)")
    p.add_argument("--iters", type=int, default=2, help="loads per process")
    p.add_argument("--json", type=Path, help="also write raw results here")
    p.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child_main(a.child, str(a.logs[0]), a.iters)))
        return 0
    logs = a.logs or find_logs()
    if not logs:
        print("no logs found; generate them with benchmarks.synth_log or run_all", file=sys.stderr)
        return 1
    engines = tuple(e.strip() for e in a.engines.split(",") if e.strip())
    results = run(logs, engines, a.procs, a.iters)
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
