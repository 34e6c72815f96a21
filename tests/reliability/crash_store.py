"""Crash a command at one storage call: a wrapper around fsspec's process-wide memory store.

Every byte a ``memory://`` table reads or writes goes through ``MemoryFileSystem.store``,
whichever path it takes (the storage methods, PyArrow's handler, DuckDB's bridge). While
:func:`crashing` is active the store is replaced by :class:`CrashingStore`, which counts
each call (``read`` = a lookup of an object, ``write`` = storing one, ``delete``) and, at
call ``k``, raises :class:`Crash` right before or right after performing it. From then on
every call raises :class:`Crash` too: the process is dead, nothing it does afterwards
reaches the store, whatever the library catches. ``Crash`` is a ``BaseException`` so that
no ``except Exception`` in the library swallows it where it is raised directly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fsspec.implementations.memory import MemoryFileSystem


class Crash(BaseException):
    """The simulated death of the process."""


class CrashingStore(dict[str, Any]):
    """A copy of the memory store that counts calls and crashes at call ``crash_at``."""

    def __init__(self, items: dict[str, Any], crash_at: int | None, when: str) -> None:
        super().__init__(items)
        self.crash_at = crash_at
        self.when = when
        self.calls = 0
        self.kinds: Counter[str] = Counter()
        self.trace: list[tuple[str, str]] = []
        self.dead = False

    def _step(self, kind: str, key: str) -> bool:
        """Count one call; raise when dead or crashing before it. True: crash after it."""
        if self.dead:
            raise Crash(f"dead (at {kind} {key})")
        self.calls += 1
        self.kinds[kind] += 1
        self.trace.append((kind, key))
        if self.calls == self.crash_at:
            self.dead = True
            if self.when == "before":
                raise Crash(f"crash before call {self.calls}: {kind} {key}")
            return True
        return False

    def __getitem__(self, key: str) -> Any:
        after = self._step("read", key)
        value = super().__getitem__(key)
        if after:
            raise Crash(f"crash after call {self.calls}: read {key}")
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        after = self._step("write", key)
        super().__setitem__(key, value)
        if after:
            raise Crash(f"crash after call {self.calls}: write {key}")

    def __delitem__(self, key: str) -> None:
        after = self._step("delete", key)
        super().__delitem__(key)
        if after:
            raise Crash(f"crash after call {self.calls}: delete {key}")

    def pop(self, key: str, *default: Any) -> Any:
        after = self._step("delete", key)
        value = super().pop(key, *default)
        if after:
            raise Crash(f"crash after call {self.calls}: delete {key}")
        return value


@contextmanager
def crashing(crash_at: int | None = None, when: str = "before") -> Iterator[CrashingStore]:
    """Run the block on a :class:`CrashingStore`; its content becomes the store afterwards
    (a crashed process leaves what it stored)."""
    real = MemoryFileSystem.store
    store = CrashingStore(dict(real), crash_at, when)
    MemoryFileSystem.store = store
    try:
        yield store
    finally:
        MemoryFileSystem.store = real
        real.clear()
        real.update(dict(store.items()))


@dataclass(frozen=True)
class Saved:
    """One saved object: its bytes and its timestamps (VACUUM compares them)."""

    data: bytes
    created: Any
    modified: Any


def table_files(name: str) -> dict[str, Saved]:
    """The objects of ``memory://name`` (keys relative to it), saved."""
    prefix = f"/{name}/"
    return {
        k[len(prefix) :]: Saved(bytes(v.getbuffer()), v.created, v.modified)
        for k, v in MemoryFileSystem.store.items()
        if k.startswith(prefix)
    }


def copy_table(files: dict[str, Saved], name: str, *, age: timedelta = timedelta(0)) -> str:
    """Write ``files`` under ``memory://name`` with their timestamps moved ``age`` into the
    past (expired log cleanup only deletes commits from before yesterday); return the URI."""
    fs = MemoryFileSystem()
    for rel, saved in files.items():
        path = f"/{name}/{rel}"
        fs.pipe_file(path, saved.data)
        fs.store[path].created = saved.created - age
        fs.store[path].modified = saved.modified - age
    return f"memory://{name}"


def drop_table(name: str) -> None:
    fs = MemoryFileSystem()
    if fs.exists(f"/{name}"):
        fs.rm(f"/{name}", recursive=True)
