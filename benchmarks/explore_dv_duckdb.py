"""Ways to apply deletion vectors in DuckDB, against the official ``delta`` extension
(issue 16, item 4). Measures only.

Uses the DV table of ``bench_latency`` (``--rows`` rows in 32 files, ~1% of the rows
deleted by DVs, and its DV-free twin) and must run in the benchmark environment::

    make bench-env
    .venv-bench/bin/python -m benchmarks.explore_dv_duckdb --rows 5000000 --repeat 15

Every variant runs the same aggregate (``category, sum(value), count(*) GROUP BY
category``), all alternated round-robin in one process, median wall and process-CPU time;
each variant's result is checked against ``delta_scan`` on the DV table. Variants:

* ``delta_scan`` on the DV table (the target) and on the twin; DuckDB's ``read_parquet``
  over the DV table's files ignoring the DVs, and over the twin's files (floors).
* ``lakequery to_duckdb()`` as built (engine only: snapshot loaded before, relation rebuilt
  every time as a user's query would), and the same with keep masks switched off
  (``keep_masks.applicable`` patched to False): the anti-join on ``file * 2**32 + row``
  keys, i.e. the engine before keep masks.
* per-file anti-join: one ``read_parquet`` per DV file, ``UNION ALL``, each anti-joined on
  ``file_row_number`` alone with that file's deleted rows (no key arithmetic).
* positional join: one ``read_parquet`` per DV file ``POSITIONAL JOIN`` its keep mask,
  ``WHERE keep``; the mask registered as an Arrow table or as a NumPy array every time, or
  registered once before the runs (one SQL query per run: what the engine does minus
  building and binding its relation); and two files a branch (16 branches, their masks
  concatenated).
* ``get_bit`` on a per-file BIT mask (bit set = deleted) at ``file_row_number``: the mask
  from a registered table through a scalar subquery, or as a BLOB literal in the SQL.
* Arrow stream: lakequery's Arrow engine for the DV files (``scan(columns=...)`` with the
  two columns the query needs, ``to_arrow_reader()``), scanned by DuckDB.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.bench_latency import DUCKDB_CONFIG, delta_connection, delta_extension, dv_tables

AGG = "SELECT category, sum(value), count(*) FROM t GROUP BY category ORDER BY category"


def variants(dv: str, plain: str) -> dict[str, Callable[[], Any]]:
    import duckdb
    import numpy as np
    import pyarrow as pa

    import lakequery as lq
    from lakequery.engines import keep_masks
    from lakequery.engines.deletion import deleted_rows
    from udfs.dv_mask import keep_mask

    ext = delta_extension()
    dcon = delta_connection(ext)
    con = duckdb.connect(config=DUCKDB_CONFIG)
    con.execute("SET parquet_metadata_cache = true")
    snap = lq.DeltaTable(dv).snapshot()
    twin = lq.DeltaTable(plain).snapshot()
    plan = snap.scan().plan()
    storage = snap.storage
    deleted = deleted_rows(plan, storage)
    locs = plan.location_list
    paths = [storage.duckdb_path(p) for p in locs]
    counts = plan.files.column("num_records").to_pylist()
    twin_paths = [twin.storage.duckdb_path(p) for p in twin.scan().plan().location_list]

    def files(ps: list[str]) -> str:
        return "[" + ", ".join(f"'{p}'" for p in ps) + "]"

    def q(source: str, c: Any = con) -> Any:
        return c.sql(AGG.replace("FROM t", f"FROM {source}")).fetchall()

    def register(table: Any) -> str:
        name = f"_x_{uuid.uuid4().hex}"
        con.register(name, table)
        return name

    def per_file_anti() -> Any:
        parts = []
        for loc, path in zip(locs, paths, strict=True):
            rows = register(pa.table({"r": pa.array(deleted[loc], pa.int64())}))
            parts.append(
                f"SELECT d.category, d.value FROM read_parquet('{path}', file_row_number=true)"
                f" AS d ANTI JOIN {rows} AS x ON x.r = d.file_row_number"
            )
        return q("(" + " UNION ALL ".join(parts) + ")")

    def positional_arrow() -> Any:
        parts = []
        for loc, path, n in zip(locs, paths, counts, strict=True):
            keep = register(pa.table({"keep": keep_mask(deleted[loc], 0, n)}))
            parts.append(
                f"SELECT category, value FROM read_parquet('{path}') POSITIONAL JOIN {keep}"
                " WHERE keep"
            )
        return q("(" + " UNION ALL ".join(parts) + ")")

    def positional_numpy(per_branch: int) -> Callable[[], Any]:
        def run() -> Any:
            parts = []
            for i in range(0, len(locs), per_branch):
                mask = np.concatenate(
                    [
                        keep_mask(deleted[loc], 0, n)
                        for loc, n in zip(
                            locs[i : i + per_branch], counts[i : i + per_branch], strict=True
                        )
                    ]
                )
                keep = register({"keep": mask})
                parts.append(
                    f"SELECT category, value FROM read_parquet({files(paths[i : i + per_branch])})"
                    f" POSITIONAL JOIN {keep} WHERE keep"
                )
            return q("(" + " UNION ALL ".join(parts) + ")")

        return run

    once = [
        register({"keep": keep_mask(deleted[loc], 0, n)})
        for loc, n in zip(locs, counts, strict=True)
    ]

    def positional_registered_once() -> Any:
        parts = [
            f"SELECT category, value FROM read_parquet('{path}') POSITIONAL JOIN {keep} WHERE keep"
            for path, keep in zip(paths, once, strict=True)
        ]
        return q("(" + " UNION ALL ".join(parts) + ")")

    def bits(loc: str, n: int) -> bytes:
        gone = np.zeros(n, dtype=np.bool_)
        gone[deleted[loc]] = True
        return bytes(np.packbits(gone).tobytes())  # row 0 = get_bit index 0

    def get_bit_subquery() -> Any:
        masks = register(
            {
                "f": np.arange(len(locs), dtype=np.int64),
                "m": np.array(
                    [bits(loc, n) for loc, n in zip(locs, counts, strict=True)], dtype=object
                ),
            }
        )
        parts = [
            f"SELECT category, value FROM read_parquet('{path}', file_row_number=true) WHERE "
            f"get_bit((SELECT CAST(m AS BIT) FROM {masks} WHERE f = {i}), "
            "CAST(file_row_number AS INTEGER)) = 0"
            for i, path in enumerate(paths)
        ]
        return q("(" + " UNION ALL ".join(parts) + ")")

    def get_bit_literal() -> Any:
        parts = []
        for loc, path, n in zip(locs, paths, counts, strict=True):
            blob = "".join(f"\\x{b:02X}" for b in bits(loc, n))
            parts.append(
                f"SELECT category, value FROM read_parquet('{path}', file_row_number=true) WHERE "
                f"get_bit(CAST(CAST('{blob}' AS BLOB) AS BIT), CAST(file_row_number AS INTEGER)) = 0"
            )
        return q("(" + " UNION ALL ".join(parts) + ")")

    def anti_join_engine() -> Any:
        saved = keep_masks.applicable
        keep_masks.applicable = lambda *a, **k: False  # type: ignore[assignment]
        try:
            return snap.scan().to_duckdb(con).query("t", AGG).fetchall()
        finally:
            keep_masks.applicable = saved

    def arrow_stream() -> Any:
        reader = snap.scan(columns=["category", "value"]).to_arrow_reader()
        return con.from_arrow(reader).query("t", AGG).fetchall()

    return {
        "delta_scan, DV table (target)": lambda: q(f"delta_scan('{dv}')", dcon),
        "delta_scan, DV-free twin": lambda: q(f"delta_scan('{plain}')", dcon),
        "read_parquet, DV table's files, DVs ignored (floor)": lambda: q(
            f"read_parquet({files(paths)})"
        ),
        "read_parquet, twin's files (floor)": lambda: q(f"read_parquet({files(twin_paths)})"),
        "lakequery to_duckdb() as built": lambda: (
            snap.scan().to_duckdb(con).query("t", AGG).fetchall()
        ),
        "lakequery to_duckdb(), keep masks off: anti-join on file * 2^32 + row": anti_join_engine,
        "lakequery to_duckdb() on the DV-free twin": lambda: (
            twin.scan().to_duckdb(con).query("t", AGG).fetchall()
        ),
        "per-file read_parquet, anti-join on file_row_number": per_file_anti,
        "per-file POSITIONAL JOIN, Arrow keep mask": positional_arrow,
        "per-file POSITIONAL JOIN, NumPy keep mask": positional_numpy(1),
        "per-file POSITIONAL JOIN, NumPy masks registered once, one SQL query": (
            positional_registered_once
        ),
        "2 files a branch POSITIONAL JOIN, NumPy keep mask": positional_numpy(2),
        "per-file get_bit(BIT mask via scalar subquery, file_row_number)": get_bit_subquery,
        "per-file get_bit(BIT mask as SQL literal, file_row_number)": get_bit_literal,
        "Arrow stream of lakequery's Arrow engine, 2 columns": arrow_stream,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default all)")
    args = parser.parse_args()
    dv, plain = dv_tables(args.rows)
    runs = variants(dv, plain)
    expected = None
    for name, fn in runs.items():
        got = fn()
        if name.startswith("delta_scan, DV table"):
            expected = got
        if "ignored" in name or expected is None:
            continue
        ok = all(
            a[0] == b[0] and a[2] == b[2] and abs(a[1] - b[1]) <= 1e-9 * abs(b[1])
            for a, b in zip(got, expected, strict=True)
        )
        if not ok:
            raise AssertionError(f"{name}: {got} != {expected}")
    walls: dict[str, list[float]] = {k: [] for k in runs}
    cpus: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeat):
        for name, fn in runs.items():
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            walls[name].append(time.perf_counter() - w0)
            cpus[name].append(time.process_time() - c0)
    med = statistics.median
    target = next(iter(runs))
    tw, tc = med(walls[target]), med(cpus[target])
    import os

    print(
        f"\n{args.rows:,} rows, 32 files, ~1% deleted by DVs; median of {args.repeat}, "
        f"alternating; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
        "\n| variant | wall ms (median) | best ms | CPU ms | wall / delta_scan | CPU / delta_scan |"
        "\n|---|---:|---:|---:|---:|---:|"
    )
    for name in runs:
        w, c = med(walls[name]), med(cpus[name])
        print(
            f"| {name} | {w * 1e3:.1f} | {min(walls[name]) * 1e3:.1f} | {c * 1e3:.1f} "
            f"| {w / tw:.2f} | {c / tc:.2f} |"
        )


if __name__ == "__main__":
    main()
