"""Streaming benchmarks (issue 13): how soon a follower sees a commit, and what
``Snapshot.update()`` costs on a big table against a fresh ``snapshot()``.

1. **Follow latency.** A producer process appends ``--commits`` one-row commits, one every
   ``--interval`` seconds, and records when each ``lq.write`` returned; a consumer process
   follows the table (``DeltaTable.stream(follow=True, poll_interval=...)``) and records
   when each row reached it. Latency = seen - committed (same machine clock), reported per
   poll interval as median / p95 / max; the expectation is "within the poll interval plus
   tens of milliseconds" (the mean wait for the next poll is half the interval).
2. **update() on a 200k-file table.** ``synth_log`` writes a checkpoint of ``--files``
   live files plus 20 commits; then, in one process: a fresh ``snapshot()`` (new
   ``DeltaTable``, the process's cached state of the table dropped first), ``update()`` when nothing changed, and ``update()`` after one more
   commit that adds a file; ``deltalake``'s ``update_incremental()`` is measured the same
   way where it exists. Medians of ``--repeat``.
3. **Spark micro-batch planning** (``--only spark``). The ``lakequery`` Spark source's
   driver-side work per micro-batch, driven as Spark's driver would (no session):
   ``latestOffset`` (where a rate-limited batch ends) and ``partitions`` (its read tasks),
   on a table of ``--spark-commits`` appends of 5 files, ``maxFilesPerTrigger=10``,
   starting at version 0. Medians over ``--repeat`` micro-batches.

CLI::

    python -m benchmarks.bench_streaming                         # both parts
    python -m benchmarks.bench_streaming --files 20000 --commits 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from benchmarks import synth_log

PRODUCER = textwrap.dedent(
    """
    import json, sys, time, pyarrow as pa, lakequery as lq
    uri, commits, interval, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    times = {}
    for i in range(commits):
        time.sleep(interval)
        lq.write(uri, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
        times[i] = time.time()
    open(out, "w").write(json.dumps(times))
    """
)

CONSUMER = textwrap.dedent(
    """
    import json, sys, time, lakequery as lq
    uri, commits, poll, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    dt = lq.DeltaTable(uri)
    start = list(dt.stream())[-1].offset  # past the empty first version
    seen = {}
    for batch in dt.stream(starting_offset=start, follow=True, poll_interval=poll):
        now = time.time()
        for i in batch.to_arrow()["id"].to_pylist():
            seen[i] = now
        if len(seen) >= commits:
            break
    open(out, "w").write(json.dumps(seen))
    """
)


def follow_latency(commits: int, interval: float, poll: float) -> dict[str, Any]:
    import pyarrow as pa

    import lakequery as lq

    work = Path(tempfile.mkdtemp(prefix="lq-follow-"))
    uri = str(work / "t")
    lq.write(uri, pa.table({"id": pa.array([-1], pa.int64())}))
    scripts = {}
    for name, code in (("producer", PRODUCER), ("consumer", CONSUMER)):
        scripts[name] = work / f"{name}.py"
        scripts[name].write_text(code)
    consumer = subprocess.Popen(
        [sys.executable, str(scripts["consumer"]), uri, str(commits), str(poll), str(work / "seen")]
    )
    time.sleep(2.0)  # the consumer is up and following before the first commit
    subprocess.run(
        [
            sys.executable,
            str(scripts["producer"]),
            uri,
            str(commits),
            str(interval),
            str(work / "done"),
        ],
        check=True,
    )
    consumer.wait(timeout=120)
    done = {int(k): v for k, v in json.loads((work / "done").read_text()).items()}
    seen = {int(k): v for k, v in json.loads((work / "seen").read_text()).items()}
    lat = sorted((seen[i] - done[i]) * 1000 for i in done)
    return {
        "poll_s": poll,
        "commits": commits,
        "median_ms": round(statistics.median(lat), 1),
        "p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 1),
        "max_ms": round(lat[-1], 1),
    }


def _median_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def _append_commit(root: Path, version: int) -> None:
    """One more commit that adds one (synthetic, never read) file."""
    add = {
        "add": {
            "path": f"date=2099-01-01/region=zz/extra-{version}.parquet",
            "partitionValues": {"date": "2099-01-01", "region": "zz"},
            "size": 1234,
            "modificationTime": int(time.time() * 1000),
            "dataChange": True,
            "stats": json.dumps({"numRecords": 10}),
        }
    }
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    path = root / "_delta_log" / f"{version:020d}.json"
    path.write_text(json.dumps(info) + "\n" + json.dumps(add) + "\n")


def update_cost(files: int, repeat: int) -> dict[str, Any]:
    import lakequery as lq
    from lakequery.log_update import forget

    root = Path(tempfile.mkdtemp(prefix="lq-update-")) / "t"
    synth_log.generate(root, "checkpoint", files)
    uri = str(root)

    def fresh_snapshot() -> None:
        dt = lq.DeltaTable(uri)
        forget(dt.storage)  # a replay, not this process's cached state
        dt.snapshot()

    fresh = _median_ms(fresh_snapshot, repeat)
    snap = lq.DeltaTable(uri).snapshot()
    unchanged = _median_ms(snap.update, repeat)
    changed = []
    for _ in range(repeat):
        base = lq.DeltaTable(uri).snapshot()
        _append_commit(root, base.version + 1)
        t0 = time.perf_counter()
        newer = base.update()
        changed.append((time.perf_counter() - t0) * 1000)
        assert newer.version == base.version + 1
        assert newer.num_files == base.num_files + 1
    out: dict[str, Any] = {
        "files": files,
        "fresh_snapshot_ms": fresh,
        "update_unchanged_ms": unchanged,
        "update_one_commit_ms": round(statistics.median(changed), 2),
    }
    try:
        import deltalake

        dl_fresh = _median_ms(lambda: deltalake.DeltaTable(uri), repeat)
        dl = deltalake.DeltaTable(uri)
        dl_same = _median_ms(dl.update_incremental, repeat)
        dl_changed = []
        for _ in range(repeat):
            dl = deltalake.DeltaTable(uri)
            _append_commit(root, dl.version() + 1)
            t0 = time.perf_counter()
            dl.update_incremental()
            dl_changed.append((time.perf_counter() - t0) * 1000)
        out |= {
            "deltalake_fresh_ms": dl_fresh,
            "deltalake_update_unchanged_ms": dl_same,
            "deltalake_update_one_commit_ms": round(statistics.median(dl_changed), 2),
        }
    except (ImportError, AttributeError) as exc:
        out["deltalake"] = f"not measured: {exc}"
    return out


def spark_planning(commits: int, repeat: int) -> dict[str, Any]:
    import pyarrow as pa

    import lakequery as lq
    from lakequery.spark.datasource_stream import (
        DeltaStreamReader,
        stream_read_options,
        stream_schema,
    )

    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "t")
        t = pa.table({"id": pa.array(range(50), pa.int64()), "k": pa.array([0, 1, 2, 3, 4] * 10)})
        lq.write(uri, t, partition_by=["k"])
        for _ in range(commits):
            lq.write(uri, t, mode="append")
        opts = stream_read_options(
            {"path": uri, "maxFilesPerTrigger": "10", "startingVersion": "0"}
        )
        reader = DeltaStreamReader(opts, stream_schema(opts), 2)
        start = reader.initialOffset()
        latest, parts = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            end = reader.latestOffset(start, None)
            t1 = time.perf_counter()
            reader.partitions(start, end)
            parts.append(time.perf_counter() - t1)
            latest.append(t1 - t0)
            start = end
    return {
        "commits": commits,
        "micro_batches": repeat,
        "latestOffset_ms": round(statistics.median(latest) * 1000, 1),
        "partitions_ms": round(statistics.median(parts) * 1000, 1),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--commits", type=int, default=40)
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--polls", default="0.05,0.25,1.0")
    ap.add_argument("--spark-commits", type=int, default=200)
    ap.add_argument("--only", choices=("follow", "update", "spark"))
    args = ap.parse_args(argv)
    if args.only == "spark":
        print(json.dumps(spark_planning(args.spark_commits, args.repeat), indent=2))
        return
    if args.only != "update":
        print("| poll interval (s) | commits | median latency | p95 | max |")
        print("|---:|---:|---:|---:|---:|")
        for poll in (float(p) for p in args.polls.split(",")):
            r = follow_latency(args.commits, args.interval, poll)
            print(
                f"| {poll} | {r['commits']} | {r['median_ms']} ms | {r['p95_ms']} ms | "
                f"{r['max_ms']} ms |",
                flush=True,
            )
    if args.only != "follow":
        print(json.dumps(update_cost(args.files, args.repeat), indent=2))


if __name__ == "__main__":
    main()
