"""Crash a command at one file-system call on a local table, through Python's audit hooks.

Python raises an audit event before each ``open``, ``os.link``, ``os.remove`` (also
``os.unlink``), ``os.rename`` (also ``os.replace``) and ``os.scandir`` / ``os.listdir``. A
hook installed once per process counts the events whose path lies under the table of the
active :func:`crashing` block and raises :class:`Crash` (a ``BaseException``) at call
``k``, which aborts that call; from then on every call under the table raises too.

Calls made from C++ raise no audit event: the Parquet data files PyArrow writes and the
files DuckDB reads are not crash points here (the ``memory://`` suite covers them: every
path goes through fsspec's store there). Crashing "after" call ``k`` is crashing before
call ``k + 1``: bytes written into an open file are not calls of their own.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from crash_store import Crash

_EVENTS = {
    "open": "open",
    "os.link": "write",
    "os.remove": "delete",
    "os.rename": "write",
    "os.scandir": "list",
    "os.listdir": "list",
}


@dataclass
class LocalCrash:
    """The active plan: the table root, the call to crash at, what was seen."""

    root: str
    crash_at: int | None
    calls: int = 0
    dead: bool = False
    kinds: Counter[str] = field(default_factory=Counter)
    trace: list[tuple[str, str]] = field(default_factory=list)


_ACTIVE: list[LocalCrash] = []
_LOCK = threading.Lock()
_INSTALLED: list[bool] = []


def _kind(event: str, args: tuple[Any, ...]) -> tuple[str, str] | None:
    kind = _EVENTS.get(event)
    if kind is None or not args:
        return None
    path = args[1] if event in ("os.link", "os.rename") and len(args) > 1 else args[0]
    if not isinstance(path, (str, bytes)):
        return None
    text = path.decode() if isinstance(path, bytes) else path
    if kind == "open":
        mode = str(args[1]) if len(args) > 1 and args[1] is not None else "r"
        kind = "write" if any(c in mode for c in "wxa+") else "read"
    return kind, text


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _ACTIVE or event not in _EVENTS:
        return
    found = _kind(event, args)
    if found is None:
        return
    kind, path = found
    with _LOCK:
        if not _ACTIVE:
            return
        plan = _ACTIVE[0]
        if not path.startswith(plan.root):
            return
        if plan.dead:
            raise Crash(f"dead (at {kind} {path})")
        plan.calls += 1
        plan.kinds[kind] += 1
        plan.trace.append((kind, path))
        if plan.calls == plan.crash_at:
            plan.dead = True
            raise Crash(f"crash before call {plan.calls}: {kind} {path}")


@contextmanager
def crashing(root: str, crash_at: int | None = None) -> Iterator[LocalCrash]:
    """Count (and crash at call ``crash_at`` of) file-system calls under ``root``."""
    if not _INSTALLED:
        sys.addaudithook(_hook)  # cannot be removed: inert outside ``crashing``
        _INSTALLED.append(True)
    plan = LocalCrash(root.rstrip("/") + "/", crash_at)
    _ACTIVE.append(plan)
    try:
        yield plan
    finally:
        _ACTIVE.clear()
