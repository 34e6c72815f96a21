"""Progress of long maintenance runs: a callback and, interactively, a bar on stderr.

A command creates a :class:`ProgressReporter` with the totals it planned and calls
:meth:`ProgressReporter.advance` as files finish (from any thread). The user's
``progress=`` callback receives a :class:`Progress` value each time; without a callback
a one-line bar is drawn when stderr is a terminal.

Example:
    >>> seen = []
    >>> with ProgressReporter("OPTIMIZE", 2, 300, callback=seen.append) as rep:
    ...     rep.advance(1, 100)
    ...     rep.advance(1, 200)
    >>> [(p.files_done, p.bytes_done) for p in seen]
    [(1, 100), (2, 300)]
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TextIO


@dataclass(frozen=True)
class Progress:
    """Where a maintenance run stands.

    Attributes:
        operation: ``OPTIMIZE``, ``VACUUM`` ...
        files_done: input files processed so far.
        files_total: input files planned.
        bytes_done: input bytes processed so far.
        bytes_total: input bytes planned.
        elapsed_s: seconds since the run started.
    """

    operation: str
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    elapsed_s: float

    @property
    def fraction(self) -> float:
        """Share of the bytes (or files, when sizes are unknown) done, 0..1."""
        if self.bytes_total:
            return min(1.0, self.bytes_done / self.bytes_total)
        return min(1.0, self.files_done / self.files_total) if self.files_total else 1.0


ProgressCallback = Callable[[Progress], None]


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{n} B"  # pragma: no cover


class ProgressReporter:
    """Thread-safe progress accounting for one run.

    Args:
        operation: name shown and passed on.
        files_total: planned input files.
        bytes_total: planned input bytes.
        callback: receives a :class:`Progress` after every advance.
        bar: draw a bar on ``stream``; default: only when no callback is given and the
            stream is a terminal.
        stream: where the bar goes (stderr).
    """

    def __init__(
        self,
        operation: str,
        files_total: int,
        bytes_total: int,
        *,
        callback: ProgressCallback | None = None,
        bar: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.operation = operation
        self.files_total = files_total
        self.bytes_total = bytes_total
        self.callback = callback
        self.stream = stream or sys.stderr
        if bar is None:
            isatty = getattr(self.stream, "isatty", None)
            bar = callback is None and bool(isatty and isatty())
        self.bar = bar
        self.files_done = 0
        self.bytes_done = 0
        self._start = time.monotonic()
        self._lock = threading.Lock()

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def snapshot(self) -> Progress:
        return Progress(
            self.operation,
            self.files_done,
            self.files_total,
            self.bytes_done,
            self.bytes_total,
            time.monotonic() - self._start,
        )

    def advance(self, files: int, nbytes: int) -> None:
        """Records ``files`` more input files (``nbytes`` bytes) as done."""
        with self._lock:
            self.files_done += files
            self.bytes_done += nbytes
            state = self.snapshot()
            if self.bar:
                self._draw(state)
        if self.callback is not None:
            self.callback(state)

    def _draw(self, p: Progress) -> None:
        width = 30
        filled = round(p.fraction * width)
        line = (
            f"\r{p.operation} [{'#' * filled}{'.' * (width - filled)}] "
            f"{p.files_done}/{p.files_total} files, "
            f"{_human(p.bytes_done)}/{_human(p.bytes_total)}, {p.elapsed_s:.0f}s"
        )
        self.stream.write(line)
        self.stream.flush()

    def close(self) -> None:
        """Ends the bar's line."""
        if self.bar and self.files_total:
            self.stream.write("\n")
            self.stream.flush()


__all__ = ["Progress", "ProgressCallback", "ProgressReporter"]
