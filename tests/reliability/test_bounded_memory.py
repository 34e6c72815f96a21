"""Hostile inputs never take unbounded memory (issue 18, item 4).

Each case mutates a copy of a small table (partitioned, on-disk DVs, a checkpoint) so that
a number inside the input claims far more than the input holds: a DV ``sizeInBytes`` of
2**31-1 or a cardinality of 2**40, a DV bitmap claiming 2**32 buckets, a few kilobytes of run
containers holding 2**32 rows, a ``_last_checkpoint`` claiming a huge size and part
count, a checkpoint named as one part of 2**31, a commit with one 64 MiB line, JSON
nested 100,000 deep. The table is then read (Arrow and DuckDB engines) in a child process
whose address space is capped at its size after imports plus :data:`HEADROOM`, with
``tracemalloc`` measuring the peak of Python and NumPy allocations. The read must return
the true rows or raise a :class:`~lakequery.LakeQueryError` naming the file, within the cap
and with a Python peak below :data:`PYTHON_PEAK` (plus the bytes the case added): never a
``MemoryError``, another exception or a dead child.

Polars is left out of the capped child: its allocator aborts the process on a failed
allocation rather than raising, whatever the input.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

import lakequery as lq

#: Address space the child may add after its imports: a normal read of the test table
#: peaks near 2.1 GiB above them (allocators reserve arenas); a claimed 2**32 positions
#: (32 GiB) or 2**40 bytes cannot fit.
HEADROOM = 4 << 30
#: Peak of Python and NumPy allocations (tracemalloc) a read may reach, on top of the
#: bytes a case added to the table.
PYTHON_PEAK = 64 << 20
PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376

CHILD = r"""
import json, resource, sys, tracemalloc
import duckdb, pyarrow, lakequery as lq

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

cap = status("VmSize") + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
tracemalloc.start()
out = {}
try:
    scan = lq.DeltaTable(sys.argv[1]).snapshot().scan()
    via_arrow = sorted(scan.to_arrow().column("id").to_pylist())
    via_duckdb = sorted(scan.to_duckdb().to_arrow_table().column("id").to_pylist())
    out["rows"] = via_arrow if via_arrow == via_duckdb else ["engines disagree"]
except lq.LakeQueryError as exc:
    out["error"] = type(exc).__name__
    out["message"] = str(exc)[:2000]
except BaseException as exc:
    out["other"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
out["python_peak"] = tracemalloc.get_traced_memory()[1]
print(json.dumps(out))
"""


def read_in_capped_child(root: Path) -> dict[str, Any]:
    env = {**os.environ, "POLARS_MAX_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(HEADROOM)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, f"child died ({done.returncode}): {done.stderr[-2000:]}"
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def build(root: Path) -> list[int]:
    n = 2000
    data = pa.table({"id": pa.array(range(n), pa.int64()), "p": [i % 2 for i in range(n)]})
    uri = str(root)
    lq.write(uri, data, partition_by=["p"], configuration={"delta.enableDeletionVectors": "true"})
    lq.DeltaTable(uri).delete("id % 5 = 0")  # version 1: on-disk DVs
    lq.DeltaTable(uri).checkpoint()
    more = pa.table({"id": pa.array(range(n, n + 10), pa.int64()), "p": [0] * 10})
    lq.write(uri, more, mode="append")  # version 2
    return [i for i in range(n + 10) if i >= n or i % 5]


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    root = tmp_path_factory.mktemp("memory") / "t"
    return root, build(root)


# --- mutations ---------------------------------------------------------------------------------


def commit_path(root: Path, version: int) -> Path:
    return root / "_delta_log" / f"{version:020d}.json"


def rewrite_commit(root: Path, version: int, change: Callable[[dict[str, Any]], None]) -> None:
    path = commit_path(root, version)
    actions = [json.loads(line) for line in path.read_text().splitlines()]
    for action in actions:
        change(action)
    path.write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def without_checkpoint(root: Path) -> None:
    """Drops the checkpoint so that the DV descriptors come from commit 1."""
    for p in (root / "_delta_log").glob("*.checkpoint.parquet"):
        p.unlink()
    (root / "_delta_log" / "_last_checkpoint").unlink()


def change_dvs(root: Path, change: Callable[[dict[str, Any], dict[str, Any]], None]) -> None:
    """Applies ``change(add, deletionVector)`` to every on-disk DV of commit 1."""
    without_checkpoint(root)

    def each(action: dict[str, Any]) -> None:
        dv = (action.get("add") or {}).get("deletionVector")
        if dv and dv["storageType"] == "u":
            change(action["add"], dv)

    rewrite_commit(root, 1, each)


def dv_file(root: Path) -> Path:
    return next(root.glob("deletion_vector_*.bin"))


def replace_dv_payload(root: Path, payload: bytes, cardinality: int, records: int | None) -> None:
    """Writes ``payload`` as a valid DV file record (size, CRC) and points every on-disk
    descriptor at it with ``cardinality``; ``records`` replaces ``numRecords`` (None:
    drops the stats)."""
    record = struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    dv_file(root).write_bytes(b"\x01" + record)

    def change(add: dict[str, Any], dv: dict[str, Any]) -> None:
        dv.update(offset=1, sizeInBytes=len(payload), cardinality=cardinality)
        if records is None:
            add.pop("stats", None)
        else:
            stats = json.loads(add["stats"])
            stats["numRecords"] = records
            add["stats"] = json.dumps(stats)

    change_dvs(root, change)


def deep_json_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def case_dv_size(root: Path) -> None:
    # the largest the log's INT field holds (2**40 is NULL after replay: "no sizeInBytes")
    change_dvs(root, lambda add, dv: dv.update(sizeInBytes=(1 << 31) - 1))


def case_dv_cardinality(root: Path) -> None:
    change_dvs(root, lambda add, dv: dv.update(cardinality=1 << 40))


def case_dv_cardinality_and_records(root: Path) -> None:
    def change(add: dict[str, Any], dv: dict[str, Any]) -> None:
        dv.update(cardinality=1 << 40)
        stats = json.loads(add["stats"])
        stats["numRecords"] = 1 << 41
        add["stats"] = json.dumps(stats)

    change_dvs(root, change)


def case_portable_buckets(root: Path) -> None:
    payload = struct.pack("<I", PORTABLE_MAGIC) + struct.pack("<Q", 1 << 32) + b"\x00" * 64
    replace_dv_payload(root, payload, 200, 1000)


def case_native_buckets(root: Path) -> None:
    payload = struct.pack(">I", NATIVE_MAGIC) + struct.pack(">I", (1 << 32) - 1) + b"\x00" * 64
    replace_dv_payload(root, payload, 200, 1000)


def billions_of_rows() -> bytes:
    bm = BitMap64()
    bm.add_range(0, 1 << 32)
    return struct.pack("<I", PORTABLE_MAGIC) + bm.serialize()


def case_dense_dv_lying_records(root: Path) -> None:
    replace_dv_payload(root, billions_of_rows(), 1 << 32, 1 << 33)


def case_dense_dv_without_stats(root: Path) -> None:
    replace_dv_payload(root, billions_of_rows(), 1 << 32, None)


def case_last_checkpoint_claims(root: Path) -> None:
    path = root / "_delta_log" / "_last_checkpoint"
    hint = json.loads(path.read_text())
    hint.update(size=1 << 62, parts=1 << 31, sizeInBytes=1 << 62, numOfAddFiles=1 << 62)
    hint.pop("checksum", None)
    path.write_text(json.dumps(hint))


def case_checkpoint_parts(root: Path) -> None:
    log = root / "_delta_log"
    (ckpt,) = log.glob("*.checkpoint.parquet")
    ckpt.rename(log / f"{1:020d}.checkpoint.{1:010d}.{(1 << 31) - 1:010d}.parquet")
    hint = json.loads((log / "_last_checkpoint").read_text())
    hint.update(parts=(1 << 31) - 1)
    hint.pop("checksum", None)
    (log / "_last_checkpoint").write_text(json.dumps(hint))


BIG_LINE = 64 << 20


def case_enormous_line(root: Path) -> None:
    def change(action: dict[str, Any]) -> None:
        if "commitInfo" in action:
            action["commitInfo"]["userMetadata"] = "x" * BIG_LINE

    rewrite_commit(root, 2, change)


DEPTH = 100_000


def case_nested_commit(root: Path) -> None:
    path = commit_path(root, 2)
    lines = path.read_text().splitlines()
    lines.insert(1, '{"commitInfo": {"deep": ' + deep_json_text(DEPTH) + "}}")
    path.write_text("\n".join(lines) + "\n")


def case_nested_stats(root: Path) -> None:
    def change(action: dict[str, Any]) -> None:
        if "add" in action:
            action["add"]["stats"] = (
                '{"numRecords": 10, "minValues": ' + deep_json_text(DEPTH) + "}"
            )

    rewrite_commit(root, 2, change)


def case_nested_last_checkpoint(root: Path) -> None:
    path = root / "_delta_log" / "_last_checkpoint"
    path.write_text('{"version": 1, "size": 3, "x": ' + deep_json_text(DEPTH) + "}")


CASES: dict[str, tuple[Callable[[Path], None], str | None, int]] = {
    # name: (mutation, expected error class or None for the true rows, bytes added)
    "DV sizeInBytes 2**31-1": (case_dv_size, "DeletionVectorError", 0),
    "DV cardinality 2**40": (case_dv_cardinality, "DeletionVectorError", 0),
    "DV cardinality 2**40, numRecords 2**41": (
        case_dv_cardinality_and_records,
        "DeletionVectorError",
        0,
    ),
    "DV bitmap claims 2**32 buckets (portable)": (
        case_portable_buckets,
        "DeletionVectorError",
        0,
    ),
    "DV bitmap claims 2**32-1 buckets (native)": (case_native_buckets, "DeletionVectorError", 0),
    "DV of 2**32 rows in run containers, numRecords 2**33": (
        case_dense_dv_lying_records,
        "DeletionVectorError",
        0,
    ),
    "DV of 2**32 rows in run containers, no stats": (
        case_dense_dv_without_stats,
        "DeletionVectorError",
        0,
    ),
    "_last_checkpoint claims size and parts 2**62/2**31": (case_last_checkpoint_claims, None, 0),
    "checkpoint named part 1 of 2**31-1": (case_checkpoint_parts, None, 0),
    # DuckDB's JSON reader refuses objects over 16 MiB: a CorruptLogError naming the commit
    "commit with one 64 MiB line": (case_enormous_line, "CorruptLogError", BIG_LINE),
    "commit with JSON nested 100,000 deep": (case_nested_commit, None, 2 * DEPTH),
    "add.stats nested 100,000 deep": (case_nested_stats, "any", 2 * DEPTH),
    "_last_checkpoint nested 100,000 deep": (case_nested_last_checkpoint, None, 2 * DEPTH),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_claims_take_bounded_memory(
    genuine: tuple[Path, list[int]], tmp_path: Path, name: str
) -> None:
    mutate, expected, added = CASES[name]
    root = tmp_path / "t"
    shutil.copytree(genuine[0], root)
    mutate(root)
    out = read_in_capped_child(root)
    assert "other" not in out, f"{name}: {out['other']}"
    assert out["python_peak"] < PYTHON_PEAK + 4 * added, out["python_peak"]
    if "rows" in out:
        assert expected in (None, "any"), f"{name}: read rows, expected {expected}"
        assert out["rows"] == genuine[1]
    else:
        assert expected is not None, f"{name}: {out['error']}: {out['message']}"
        if expected != "any":
            assert out["error"] == expected, out["message"]
        assert str(root) in out["message"] or "part-" in out["message"], out["message"]


def test_the_dense_dv_really_holds_billions_of_rows_in_kilobytes() -> None:
    """The run-container payload of the cases above is small and genuine: what must not
    be expanded is real, not an artefact of a broken file."""
    payload = billions_of_rows()
    assert len(payload) < 1 << 20
    assert len(BitMap64.deserialize(payload[4:])) == 1 << 32


def test_a_capped_child_reads_the_genuine_table(genuine: tuple[Path, list[int]]) -> None:
    out = read_in_capped_child(genuine[0])
    assert out.get("rows") == genuine[1], out
    assert out["python_peak"] < PYTHON_PEAK
    assert pq.read_metadata(next((genuine[0] / "p=0").glob("*.parquet"))).num_rows > 0


def lower_num_records(root: Path) -> None:
    """numRecords of every file with an on-disk DV set to 500: at or above its DV's
    cardinality (200), below its largest deleted position (~995)."""

    def change(add: dict[str, Any], dv: dict[str, Any]) -> None:
        stats = json.loads(add["stats"])
        stats["numRecords"] = 500
        add["stats"] = json.dumps(stats)

    change_dvs(root, change)


@pytest.mark.parametrize("engine", ["arrow", "duckdb", "polars"])
def test_a_dv_deleting_rows_past_num_records_is_refused(
    genuine: tuple[Path, list[int]], tmp_path: Path, engine: str
) -> None:
    root = tmp_path / "t"
    shutil.copytree(genuine[0], root)
    lower_num_records(root)
    scan = lq.DeltaTable(str(root)).snapshot().scan()
    read = {
        "arrow": scan.to_arrow,
        "duckdb": lambda: scan.to_duckdb().to_arrow_table(),
        "polars": lambda: scan.to_polars().collect(),
    }[engine]
    with pytest.raises(lq.DeletionVectorError, match="whose numRecords is 500") as info:
        read()
    assert info.value.data_file.startswith("p=")


@pytest.mark.slow
def test_the_spark_reader_refuses_a_dv_deleting_rows_past_num_records(
    spark: Any, genuine: tuple[Path, list[int]], tmp_path: Path
) -> None:
    from lakequery.spark import read

    root = tmp_path / "t"
    shutil.copytree(genuine[0], root)
    lower_num_records(root)
    with pytest.raises(lq.DeletionVectorError, match="whose numRecords is 500"):
        read(spark, str(root)).collect()
