"""Crash every command before each of its Python-level file-system calls on a local table.

The local counterpart of ``test_crash_points`` (``memory://``), with the calls counted by
:mod:`crash_local` (audit hooks): opening files for reading or writing, hard links and
renames (commits, ``_last_checkpoint``, checkpoints), deletes (VACUUM, log cleanup) and
directory listings. A crash after call ``k`` is a crash before call ``k + 1``, and a crash
after the last call leaves the command's result. After each crash the same checks as on
``memory://`` run, once per distinct state (number of writes and deletes done);
``LAKEQUERY_SOAK=1`` checks every crash point.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path

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
from crash_local import crashing
from crash_store import Crash

import lakequery as lq

SOAK = os.environ.get("LAKEQUERY_SOAK") == "1"
#: Seconds the copies' files are aged by, so that expired log cleanup has work.
AGE_S = 3 * 86_400


@pytest.fixture(scope="module")
def start(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Rows, dict[int, Rows]]:
    root = tmp_path_factory.mktemp("crash-local") / "start"
    uri = str(root)
    rows: Rows = []
    versions: dict[int, Rows] = {}
    for cmd in (CREATE, APPEND, OPTIMIZE, START_DELETE, START_UPDATE):
        cmd.run(uri, None)
        rows = cmd.expect(rows)
        versions[lq.DeltaTable(uri).snapshot().version] = rows
    return root, rows, versions


def _copy(src: Path, dst: Path) -> str:
    shutil.copytree(src, dst)
    now = time.time()
    for p in dst.rglob("*"):
        if p.is_file():
            st = p.stat()
            os.utime(p, (now - AGE_S, st.st_mtime - AGE_S))
    return str(dst)


COMMANDS = [
    APPEND,
    OVERWRITE,
    DELETE,
    UPDATE,
    MERGE,
    OPTIMIZE,
    VACUUM,
    "restore",
    CHECKPOINT,
    CLEANUP,
]
NAMES = [c if isinstance(c, str) else c.name for c in COMMANDS]


@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=NAMES)
def test_crash_before_every_file_call(
    start: tuple[Path, Rows, dict[int, Rows]], tmp_path: Path, index: int
) -> None:
    root, rows, versions = start
    item = COMMANDS[index]
    first = min(versions)
    cmd = restore_to(first, versions[first]) if item == "restore" else item
    assert isinstance(cmd, Command)
    before, after = rows, cmd.expect(rows)
    counting = _copy(root, tmp_path / "count")
    with crashing(counting) as plan:
        cmd.run(counting, None)
    assert read_rows(counting) == after
    trace = plan.trace
    done = [0]
    for kind, _ in trace:
        done.append(done[-1] + (kind in ("write", "delete")))
    checked: set[int] = set()
    outcomes: Counter[str] = Counter()
    for k in range(1, len(trace) + 2):  # k = len(trace) + 1: after the last call
        uri = _copy(root, tmp_path / f"crash-{k}")
        with crashing(uri, k) as crash:
            try:
                cmd.run(uri, None)
            except Crash:
                pass
            except Exception:  # the crash, wrapped by an engine: the table is dead
                assert crash.dead, f"{cmd.name} failed before crash point {k}"
        state = done[min(k, len(trace) + 1) - 1] if crash.dead else done[-1]
        outcomes["crashed" if crash.dead else "finished"] += 1
        if SOAK or state not in checked:
            what = trace[k - 1][0] if k <= len(trace) else "end"
            check_after_crash(uri, before, after, f"{cmd.name} crashed before call {k} ({what})")
            outcomes["verified"] += 1
            checked.add(state)
        shutil.rmtree(uri, ignore_errors=True)
    kinds = Counter(kind for kind, _ in trace)
    reliability_figures.add(
        "local_crash_points",
        {
            f"{cmd.name}:calls": len(trace),
            **{f"{cmd.name}:{k}": n for k, n in kinds.items()},
            f"{cmd.name}:crash_points": len(trace) + 1,
            f"{cmd.name}:states_verified": outcomes["verified"],
        },
    )
