"""Cost of refusing symbolic links out of a local table root (issue 18).

On a local table of 10,000 live files (empty files: nothing here reads them), measures
within one run:

* ``load``: a snapshot load with its live files (``load_state``: list, replay, path and
  link checks), what planning a scan of the whole table costs;
* ``check``: the link check alone (:meth:`LocalStorage.check_links`: one ``scandir`` per
  directory holding files, no call per file);
* ``lstat``: the alternative of one ``os.lstat`` per file (and per distinct directory).

Layouts: ``flat`` (all files in the root) and ``partitioned`` (the synthetic log of
:mod:`benchmarks.synth_log`: two partition columns, ~2,200 directories).

CLI::

    python -m benchmarks.bench_links [--files 10000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import synth_log


def _flat(root: Path, n: int) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    lines = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
            }
        },
    ]
    lines += [
        {
            "add": {
                "path": f"part-{i:05d}.parquet",
                "partitionValues": {},
                "size": 1,
                "modificationTime": 0,
                "dataChange": True,
            }
        }
        for i in range(n)
    ]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")


def _touch_live_files(root: Path, paths: list[str]) -> None:
    for p in paths:
        path = root / p
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def _median(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(root: Path, repeat: int) -> dict[str, Any]:
    from lakequery.log_segment import load_state
    from lakequery.storage import open_storage

    storage = open_storage(str(root))
    files = load_state(storage, None).files
    paths = [str(root / p) for p in files.column("path").to_pylist()]
    directories = sorted({os.path.dirname(p) for p in paths})

    def lstat_each() -> None:
        for d in directories:
            os.lstat(d)
        for p in paths:
            os.lstat(p)

    load = _median(lambda: load_state(open_storage(str(root)), None), repeat)
    check = _median(lambda: open_storage(str(root)).check_links(files), repeat)
    lstat = _median(lstat_each, repeat)
    return {
        "files": files.num_rows,
        "directories": len(directories),
        "load_ms": round(load * 1000, 1),
        "check_ms": round(check * 1000, 2),
        "lstat_ms": round(lstat * 1000, 2),
        "check/load": round(check / load, 3),
        "lstat/check": round(lstat / check, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        flat = Path(tmp) / "flat"
        _flat(flat, args.files)
        _touch_live_files(flat, [f"part-{i:05d}.parquet" for i in range(args.files)])
        parted = Path(tmp) / "partitioned"
        synth_log.generate(parted, "json", args.files, n_commits=100)
        _touch_live_files(parted, sorted(synth_log.expected_live_paths(parted)))
        print(
            "| layout | files | directories | load ms | check ms | lstat ms | check/load | lstat/check |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, root in (("flat", flat), ("partitioned", parted)):
            r = measure(root, args.repeat)
            print(
                f"| {name} | {r['files']} | {r['directories']} | {r['load_ms']} | "
                f"{r['check_ms']} | {r['lstat_ms']} | {r['check/load']} | {r['lstat/check']} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
