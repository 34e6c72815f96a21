"""A ~5M-row Delta table written by the ``deltalake`` package, for scan benchmarks.

Two variants:

* ``flat``: unpartitioned, ``--files`` appends of equal size (one Parquet file each).
* ``part``: partitioned by ``region`` (4 values); ``--files / 4`` appends, each writing one file
  per region.

Columns: ``id`` (int64, increasing in write order, so per-file min/max stats are disjoint and a
range filter on ``id`` can skip files), ``category`` (string, 8 values), ``region`` (string,
4 values), ``name`` (string, ~100k distinct), ``value`` (float64), ``qty`` (int32), ``ts``
(timestamp[us, UTC], increasing with ``id``) and ``day`` (date32 of ``ts``).

CLI::

    python -m benchmarks.synth_data --variant flat --rows 5000000 --files 32 \\
        --out benchmarks/data/scan/flat_5m
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CATEGORIES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
REGIONS = ["ap", "eu", "sa", "us"]
TS0_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
TS_STEP_US = 6_000_000  # 6 s between consecutive ids: 5M rows ~ one year


def make_chunk(start: int, n: int, rng: np.random.Generator) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    ts = pa.array(TS0_US + ids * TS_STEP_US, type=pa.timestamp("us", tz="UTC"))
    names = pc.binary_join_element_wise(
        "user_",
        pc.utf8_lpad(pc.cast(pa.array(rng.integers(0, 100_000, n)), pa.string()), 6, "0"),
        "",
    )
    return pa.table(
        {
            "id": ids,
            "category": pa.array(CATEGORIES).take(pa.array(rng.integers(0, len(CATEGORIES), n))),
            "region": pa.array(REGIONS).take(pa.array(rng.integers(0, len(REGIONS), n))),
            "name": names,
            "value": np.round(rng.normal(100.0, 25.0, n), 4),
            "qty": rng.integers(0, 1000, n).astype(np.int32),
            "ts": ts,
            "day": pc.cast(ts, pa.date32()),
        }
    )


def manifest_path(out: Path) -> Path:
    return out.parent / f"{out.name}.manifest.json"


def generate(
    out: Path, variant: str = "flat", rows: int = 5_000_000, files: int = 32, seed: int = 0
) -> dict[str, Any]:
    from deltalake import DeltaTable, write_deltalake

    t0 = time.perf_counter()
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    manifest_path(out).unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    if variant == "flat":
        appends, partition_by = files, None
    elif variant == "part":
        appends, partition_by = max(1, files // len(REGIONS)), ["region"]
    else:
        raise ValueError(f"unknown variant {variant!r}")
    rng = np.random.default_rng(seed)
    bounds = np.linspace(0, rows, appends + 1).astype(np.int64)
    for i in range(appends):
        chunk = make_chunk(int(bounds[i]), int(bounds[i + 1] - bounds[i]), rng)
        write_deltalake(
            str(out),
            chunk,
            mode="append",
            partition_by=partition_by,
            target_file_size=1 << 30,  # one file per partition per append
        )
    dt = DeltaTable(str(out))
    uris = dt.file_uris()
    info = {
        "variant": variant,
        "path": str(out),
        "rows": rows,
        "files": len(uris),
        "partition_by": partition_by,
        "version": dt.version(),
        "data_bytes": sum(Path(u).stat().st_size for u in uris),
        "id_per_file": rows // appends,
        "gen_seconds": round(time.perf_counter() - t0, 2),
    }
    manifest_path(out).write_text(json.dumps(info, indent=2))
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--variant", choices=["flat", "part"], default="flat")
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--files", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    print(json.dumps(generate(a.out, a.variant, a.rows, a.files, a.seed), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
