"""A small local demo table and the ``make demo`` walkthrough.

``example_table()`` builds (once) a partitioned Delta table of three versions under the
system temp folder, with plain PyArrow and hand-written commits at fixed times, so that
examples in the docs (time travel by timestamp included) run anywhere.
``python -m lakequery.demo`` shows SQL in DuckDB, a Polars LazyFrame and time travel on
it, then writes a table of its own with ``lq.write`` (create, append, replace a
partition) and reads it back with both engines.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {}},
        {"name": "kind", "type": "string", "nullable": True, "metadata": {}},
        {"name": "amount", "type": "double", "nullable": True, "metadata": {}},
    ],
}


def _batch(start: int, n: int) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    kinds = pa.array([("click", "view", "buy")[i % 3] for i in range(start, start + n)])
    amount = pc.multiply(pc.cast(ids, pa.float64()), pa.scalar(1.5))
    return pa.table({"id": ids, "kind": kinds, "amount": amount})


def _add_action(root: Path, start: int, day: dt.date) -> dict[str, object]:
    """Writes ten rows (ids ``start..start+9``) for one day and returns their add action."""
    table = _batch(start, 10)
    rel = f"day={day.isoformat()}/part-00000-{uuid.uuid4()}.c000.zstd.parquet"
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")
    stats = {
        "numRecords": table.num_rows,
        "minValues": {
            "id": pc.min(table["id"]).as_py(),
            "kind": pc.min(table["kind"]).as_py(),
            "amount": pc.min(table["amount"]).as_py(),
        },
        "maxValues": {
            "id": pc.max(table["id"]).as_py(),
            "kind": pc.max(table["kind"]).as_py(),
            "amount": pc.max(table["amount"]).as_py(),
        },
        "nullCount": {"id": 0, "kind": 0, "amount": 0},
    }
    return {
        "add": {
            "path": rel,
            "partitionValues": {"day": day.isoformat()},
            "size": path.stat().st_size,
            "modificationTime": int(path.stat().st_mtime * 1000),
            "dataChange": True,
            "stats": json.dumps(stats),
        }
    }


def _commit(root: Path, version: int, actions: list[dict[str, object]], ts: int) -> None:
    info = {
        "commitInfo": {
            "timestamp": ts,
            "operation": "WRITE",
            "engineInfo": "lakequery-demo",
            "operationParameters": {"mode": "Append" if version else "ErrorIfExists"},
        }
    }
    lines = [json.dumps(a) for a in [info, *actions]]
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    target = log / f"{version:020d}.json"
    tmp = log / f".{version:020d}.json.{uuid.uuid4().hex}.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, target)
    os.utime(target, (ts / 1000, ts / 1000))


def build_example_table(root: Path) -> Path:
    """Writes the three-version demo table at ``root`` (which must not hold a table)."""
    base = dt.date(2026, 11, 1)
    t0 = 1_793_000_000_000  # 2026-10-26, commits an hour apart
    meta: dict[str, object] = {
        "metaData": {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(_SCHEMA),
            "partitionColumns": ["day"],
            "configuration": {},
            "createdTime": t0,
        }
    }
    proto: dict[str, object] = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    day = [base + dt.timedelta(days=i) for i in range(4)]
    _commit(root, 0, [proto, meta, _add_action(root, 0, day[0]), _add_action(root, 10, day[1])], t0)
    _commit(root, 1, [_add_action(root, 20, day[2])], t0 + 3_600_000)
    _commit(root, 2, [_add_action(root, 30, day[3])], t0 + 7_200_000)
    return root


def example_table() -> str:
    """The path of the demo table, built on first use under the temp folder."""
    root = Path(tempfile.gettempdir()) / "lakequery-demo" / "events"
    if not (root / "_delta_log" / f"{2:020d}.json").exists():
        root = Path(tempfile.mkdtemp(prefix="lakequery-demo-")) / "events"
        build_example_table(root)
        final = Path(tempfile.gettempdir()) / "lakequery-demo"
        final.mkdir(exist_ok=True)
        try:
            os.replace(root, final / "events")
            root = final / "events"
        except OSError:
            pass  # another process won the race; use ours
    return str(root)


def main() -> None:
    """The ``make demo`` walkthrough."""
    import lakequery as lq

    path = example_table()
    dt_ = lq.DeltaTable(path)
    snap = dt_.snapshot()
    print(
        f"table {path}: version {snap.version}, {snap.num_files} files, "
        f"partitioned by {snap.partition_columns}"
    )
    print("\n-- DuckDB: SQL over the table (native Parquet reader)")
    print(
        lq.sql(
            "SELECT day, kind, count(*) AS n, sum(amount) AS total FROM events "
            "GROUP BY ALL ORDER BY ALL",
            events=snap,
        )
    )
    scan = snap.scan(
        columns=["id", "kind", "amount"], filter="day >= DATE '2026-11-03' AND kind = 'buy'"
    )
    plan = scan.plan()
    print(
        f"\n-- Polars LazyFrame with pushdown ({plan.num_files} of {plan.total_files} files read)"
    )
    import polars as pl

    print(scan.to_polars().group_by("kind").agg(pl.col("amount").sum()).collect())
    print("\n-- Time travel")
    for v in range(snap.version + 1):
        rows = dt_.snapshot(version=v).scan().to_arrow().num_rows
        print(f"version {v}: {rows} rows")
    first = dt_.history()[-1].timestamp
    print(f"as_of {first.isoformat()}: version {dt_.snapshot(as_of=first).version}")
    for entry in dt_.history():
        print(
            f"  v{entry.version} {entry.timestamp:%Y-%m-%d %H:%M} {entry.operation} {entry.parameters}"
        )
    _write_demo()
    print(
        "\n-- The command line: try\n"
        f'.venv/bin/lakequery sql "SELECT kind, count(*) AS n FROM events GROUP BY kind" '
        f"-t events={path}"
    )


def _write_demo() -> None:
    """Create, append to and partly overwrite a new table, then query it."""
    import lakequery as lq

    uri = str(Path(tempfile.mkdtemp(prefix="lakequery-demo-write-")) / "sales")
    print(f"\n-- Writing {uri}")
    day = pa.array([dt.date(2026, 11, 1), dt.date(2026, 11, 1), dt.date(2026, 11, 2)])
    first = pa.table({"day": day, "store": ["a", "b", "a"], "units": [3, 5, 7]})
    steps = [
        ("create", lq.write(uri, first, partition_by=["day"])),
        ("append", lq.write(uri, first.slice(2), mode="append")),
        (
            "replace 2026-11-02",
            lq.write(
                uri,
                pa.table({"day": day.take([2]), "store": ["c"], "units": [1]}),
                mode="overwrite",
                predicate="day = DATE '2026-11-02'",
            ),
        ),
    ]
    for label, result in steps:
        print(f"  {label}: version {result.version}, {result.num_rows} rows written")
    snap = lq.DeltaTable(uri).snapshot()
    print(
        lq.sql("SELECT day, sum(units) AS units FROM sales GROUP BY day ORDER BY day", sales=snap)
    )
    import polars as pl

    print(
        snap.scan().to_polars().group_by("store").agg(pl.col("units").sum()).sort("store").collect()
    )


if __name__ == "__main__":
    main()
