"""Crash every command right before and right after each of its storage calls.

For each command a ``memory://`` table is brought to a starting state (several versions,
deletion vectors, a checkpoint every 3 commits) and the command is run once on a copy to
enumerate its storage calls. Then, for every call ``k`` and both sides of it, a fresh copy
runs the command under :func:`crash_store.crashing` and dies there. Afterwards:

* the table reads exactly as before the command or exactly as after it;
* the next writer (an append) succeeds and its rows are there with all the others;
* VACUUM (retention 0, not enforced) leaves no file that the latest version does not
  reference, and the table still reads the same.

A read changes nothing in the store, so the crash points between two writes leave the
same state; by default the command is crashed at every call, and the checks above run once
per distinct state (number of writes and deletes that completed). ``LAKEQUERY_SOAK=1``
checks every crash point.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

import pytest
import reliability_figures
from commands import (
    APPEND,
    CHECKPOINT,
    CLEANUP,
    CREATE,
    DELETE,
    MERGE,
    OPTIMIZE,
    OVERWRITE,
    START_DELETE,
    START_UPDATE,
    UPDATE,
    VACUUM,
    Command,
    Rows,
    check_after_crash,
    read_rows,
    restore_to,
)
from crash_store import Crash, Saved, copy_table, crashing, drop_table, table_files

import lakequery as lq

SOAK = os.environ.get("LAKEQUERY_SOAK") == "1"
#: The starting state's files are this old, so that expired log cleanup has work.
AGE = timedelta(days=3)


@dataclass
class Start:
    """A starting state: the table's files and its rows at each version."""

    files: dict[str, Saved]
    rows: Rows
    versions: dict[int, Rows]


def _build_start() -> Start:
    name = f"crash-start-{uuid.uuid4().hex}"
    uri = f"memory://{name}"
    versions: dict[int, Rows] = {}
    rows: Rows = []
    for cmd in (CREATE, APPEND, OPTIMIZE, START_DELETE, START_UPDATE):
        cmd.run(uri, None)
        rows = cmd.expect(rows)
        versions[lq.DeltaTable(uri).snapshot().version] = rows
    assert read_rows(uri) == rows
    files = table_files(name)
    drop_table(name)
    return Start(files, rows, versions)


@pytest.fixture(scope="module")
def start() -> Start:
    return _build_start()


def _commands(start: Start) -> list[Command]:
    first = min(start.versions)
    return [
        APPEND,
        OVERWRITE,
        DELETE,
        UPDATE,
        MERGE,
        OPTIMIZE,
        VACUUM,
        restore_to(first, start.versions[first]),
        CHECKPOINT,
        CLEANUP,
    ]


COMMAND_NAMES = [
    "append",
    "overwrite_where",
    "delete",
    "update",
    "merge",
    "optimize",
    "vacuum",
    "restore",
    "checkpoint",
    "log_cleanup",
]


def _calls(start: Start, cmd: Command) -> list[tuple[str, str]]:
    name = f"crash-count-{uuid.uuid4().hex}"
    uri = copy_table(start.files, name, age=AGE)
    try:
        with crashing() as store:
            cmd.run(uri, None)
        assert read_rows(uri) == cmd.expect(start.rows)
        return store.trace
    finally:
        drop_table(name)


@pytest.mark.parametrize("index", range(len(COMMAND_NAMES)), ids=COMMAND_NAMES)
def test_crash_at_every_storage_call(start: Start, index: int) -> None:
    cmd = _commands(start)[index]
    assert cmd.name == COMMAND_NAMES[index]
    trace = _calls(start, cmd)
    before, after = start.rows, cmd.expect(start.rows)
    mutations_done = [0]
    for kind, _ in trace:
        mutations_done.append(mutations_done[-1] + (kind != "read"))
    checked: set[int] = set()
    outcomes: Counter[str] = Counter()
    for k in range(1, len(trace) + 1):
        for when in ("before", "after"):
            state = mutations_done[k - 1] if when == "before" else mutations_done[k]
            name = f"crash-{cmd.name}-{k}-{when}-{uuid.uuid4().hex[:8]}"
            uri = copy_table(start.files, name, age=AGE)
            try:
                with crashing(k, when) as store:
                    try:
                        cmd.run(uri, None)
                    except Crash:
                        pass
                    except Exception:  # the crash, wrapped by an engine: the store is dead
                        assert store.dead, f"{cmd.name} failed before crash point {k}"
                if store.dead:
                    outcomes["crashed"] += 1
                else:  # parallel reads vary in number: this run finished in fewer calls
                    outcomes["finished_first"] += 1
                    state = mutations_done[-1]
                if SOAK or state not in checked:
                    label = f"{cmd.name} crashed {when} call {k} ({trace[k - 1][0]})"
                    check_after_crash(uri, before, after, label)
                    outcomes["verified"] += 1
                    checked.add(state)
            finally:
                drop_table(name)
    kinds = Counter(kind for kind, _ in trace)
    reliability_figures.add(
        "crash_points",
        {
            f"{cmd.name}:calls": len(trace),
            f"{cmd.name}:reads": kinds["read"],
            f"{cmd.name}:writes": kinds["write"],
            f"{cmd.name}:deletes": kinds["delete"],
            f"{cmd.name}:crash_points": outcomes["crashed"],
            f"{cmd.name}:states_verified": outcomes["verified"],
        },
    )
