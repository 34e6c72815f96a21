"""Helpers of the transaction tests: writer subprocesses and log/table verification."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import txn_worker

import lakequery as lq
from lakequery.storage import Storage, open_storage

WORKER = str(Path(__file__).with_name("txn_worker.py"))
COMMIT_NAME = re.compile(r"^(\d{20})\.json$")


@dataclass
class Worker:
    """A writer subprocess and the JSON lines it printed."""

    proc: subprocess.Popen[str]
    records: list[dict[str, Any]] = field(default_factory=list)
    stderr: str = ""

    def wait_ready(self, timeout: float = 120) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the child says it is ready
        if not line:
            _, err = self.proc.communicate(timeout=timeout)
            raise AssertionError(f"worker died before it was ready:\n{err}")
        assert json.loads(line) == {"ready": True}

    def finish(self, timeout: float = 120) -> list[dict[str, Any]]:
        out, self.stderr = self.proc.communicate(timeout=timeout)
        self.records = parse_lines(out)
        return self.records


def parse_lines(text: str) -> list[dict[str, Any]]:
    """JSON lines, ignoring a last line cut short by a kill."""
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def spawn(job: Mapping[str, Any]) -> Worker:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, WORKER, json.dumps(dict(job))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return Worker(proc)


def run_together(
    jobs: Sequence[Mapping[str, Any]], go: Path, before_go: Callable[[], Any] | None = None
) -> list[Worker]:
    """Starts the jobs, waits until every worker is ready, calls ``before_go``, then
    releases them all at once."""
    workers = [spawn({**job, "go": str(go)}) for job in jobs]
    try:
        for w in workers:
            w.wait_ready()
    except BaseException:
        for w in workers:
            w.proc.kill()
        raise
    if before_go is not None:
        before_go()
    go.write_text("go")
    return workers


def finish_all(workers: Sequence[Worker]) -> None:
    for w in workers:
        w.finish()
    for w in workers:
        assert w.proc.returncode == 0, w.stderr


def ids_table(writer: int, seq: int, rows: int) -> pa.Table:
    """The rows the worker writes for ``(writer, seq)`` (ids unique per write)."""
    table: pa.Table = txn_worker.ids_table(writer, seq, rows)
    return table


@dataclass
class LogCheck:
    """What the commit files of a table say."""

    versions: list[int]
    commits: list[list[dict[str, Any]]]

    @property
    def adds(self) -> list[dict[str, Any]]:
        return [a["add"] for c in self.commits for a in c if "add" in a]

    @property
    def removed(self) -> set[str]:
        return {unquote(a["remove"]["path"]) for c in self.commits for a in c if "remove" in a}

    def live_paths(self) -> list[str]:
        removed = self.removed
        return [unquote(a["path"]) for a in self.adds if unquote(a["path"]) not in removed]


def check_log(storage: Storage) -> LogCheck:
    """Asserts versions 0..V are contiguous and every commit file is complete NDJSON
    with ``commitInfo`` first; returns the parsed commits."""
    listed = storage.list_from(storage.join("_delta_log"), "")
    versions = sorted(int(m.group(1)) for f in listed if (m := COMMIT_NAME.match(f.name)))
    assert versions == list(range(len(versions))), f"versions not contiguous: {versions}"
    commits = []
    for v in versions:
        data = storage.read(storage.join("_delta_log", f"{v:020d}.json"))
        assert data.endswith(b"\n"), f"commit {v} is not complete: {data[-80:]!r}"
        actions = [json.loads(line) for line in data.splitlines()]
        assert actions and "commitInfo" in actions[0], f"commit {v} lacks commitInfo first"
        commits.append(actions)
    return LogCheck(versions, commits)


def lq_ids(uri: str, storage_options: Mapping[str, Any] | None = None) -> list[int]:
    snap = lq.DeltaTable(uri, storage_options=storage_options).snapshot()
    ids: list[int] = snap.scan(columns=["id"]).to_arrow().column("id").to_pylist()
    return sorted(ids)


def deltalake_ids(uri: str, storage_options: Mapping[str, Any] | None = None) -> list[int]:
    import deltalake

    from lakequery.storage.s3 import polars_options

    opts = polars_options(storage_options) if storage_options else None
    dt = deltalake.DeltaTable(uri, storage_options=opts)
    # deltalake's pyarrow reader refuses the deletionVectors reader feature (on by default
    # in lakequery's tables); its DataFusion QueryBuilder reads such tables.
    query = deltalake.QueryBuilder().register("t", dt)
    ids: list[int] = pa.table(query.execute("SELECT id FROM t")).column("id").to_pylist()
    return sorted(ids)


def assert_no_duplicates(ids: Sequence[int]) -> None:
    dup = [i for i, n in Counter(ids).items() if n > 1]
    assert not dup, f"duplicated ids: {dup[:10]}"


def open_table_storage(uri: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
    return open_storage(uri, storage_options)


def wait_until(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition never became true")
        time.sleep(0.01)
