"""Progress of long runs: a callback and, interactively, a bar drawn by rich.

A command creates a :class:`ProgressReporter` with the totals it planned and calls
:meth:`ProgressReporter.advance` as work finishes (from any thread). The user's
``progress=`` callback receives a :class:`Progress` value each time. Without a callback a
bar is drawn where a person is watching: on a terminal's stderr, or in a Jupyter cell
(rich's live display, which needs ``ipywidgets`` there: the ``notebook`` extra). Anywhere
else (pipes, logs, CI) nothing is drawn.

Decisions: rich is imported only when a bar is drawn, so scripts and imports never pay
for it; one reporter class serves every command, the CLI and notebooks. A bar appears
only once a run has lasted :data:`BAR_DELAY_S` seconds (``LAKEQUERY_PROGRESS_DELAY``
overrides it): quick commands print nothing. Who reports: writes and DML rewrites (rows
written), OPTIMIZE and VACUUM (files and bytes), change-feed reads (files and bytes),
checkpoints (actions written) and RESTORE (its four steps: read, compare, check files,
commit); Spark jobs show Spark's own console progress.

Example:
    >>> seen = []
    >>> with ProgressReporter("OPTIMIZE", 2, 300, callback=seen.append) as rep:
    ...     rep.advance(1, 100)
    ...     rep.advance(1, 200)
    >>> [(p.files_done, p.bytes_done) for p in seen]
    [(1, 100), (2, 300)]
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import pyarrow as pa


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

#: Seconds a run lasts before its bar is drawn.
BAR_DELAY_S = 0.5


def _bar_delay() -> float:
    try:
        return float(os.environ.get("LAKEQUERY_PROGRESS_DELAY", BAR_DELAY_S))
    except ValueError:
        return BAR_DELAY_S


def _in_jupyter() -> bool:
    """True inside a Jupyter kernel (a ZMQ-backed IPython shell), without importing IPython."""
    shell_mod = sys.modules.get("IPython")
    if shell_mod is None:
        return False
    get_ipython = getattr(shell_mod, "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def _interactive(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) or (stream is sys.stderr and _in_jupyter())


class ProgressReporter:
    """Thread-safe progress accounting for one run.

    Args:
        operation: name shown and passed on.
        files_total: planned input files (or other units: see ``unit``).
        bytes_total: planned input bytes; 0 when unknown.
        callback: receives a :class:`Progress` after every advance.
        bar: draw a bar; default: only when no callback is given and someone is watching
            (``stream`` is a terminal, or the code runs in a Jupyter kernel).
        stream: where the bar goes (stderr).
        unit: what ``files`` counts, shown next to the counts.
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
        unit: str = "files",
    ) -> None:
        self.operation = operation
        self.files_total = files_total
        self.bytes_total = bytes_total
        self.callback = callback
        self.stream = stream or sys.stderr
        self.unit = unit
        if bar is None:
            bar = callback is None and _interactive(self.stream)
        self.bar = bar
        self.files_done = 0
        self.bytes_done = 0
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._live: Any = None
        self._task: Any = None
        self._delay = _bar_delay()

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _open_bar(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichProgress

        by_bytes = self.bytes_total > 0
        columns: list[Any] = [
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(self.unit),
        ]
        if by_bytes:
            columns.append(TextColumn("{task.fields[size]}"))
        columns.append(TimeElapsedColumn())
        console = Console(file=self.stream, force_jupyter=None)
        self._live = RichProgress(*columns, console=console, transient=False)
        self._live.start()
        self._task = self._live.add_task(
            self.operation, total=self.files_total or None, size=self._size()
        )

    def _size(self) -> str:
        from lakequery.display.facts import format_bytes  # only when a bar is drawn

        return f"{format_bytes(self.bytes_done)}/{format_bytes(self.bytes_total)}"

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
            if self.bar and self._live is None and state.elapsed_s >= self._delay:
                self._open_bar()
            if self._live is not None:
                self._live.update(self._task, completed=state.files_done, size=self._size())
        if self.callback is not None:
            self.callback(state)

    def close(self) -> None:
        """Draws the final state and ends the bar."""
        with self._lock:
            live, self._live = self._live, None
        if live is not None:
            live.update(self._task, completed=self.files_done, size=self._size())
            live.stop()


def counted(reader: pa.RecordBatchReader, reporter: ProgressReporter) -> pa.RecordBatchReader:
    """``reader``'s batches, each reported (rows, bytes) to ``reporter`` as it passes."""
    import pyarrow as pa

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield batch
            reporter.advance(batch.num_rows, batch.nbytes)

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


__all__ = ["Progress", "ProgressCallback", "ProgressReporter", "counted"]
