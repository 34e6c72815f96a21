"""Progress reporting: callback values, and the bar drawn only on a terminal."""

from __future__ import annotations

import io
import re
import threading
from typing import Any

import pytest

from lakequery.commands.progress import Progress, ProgressReporter


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_only_on_a_terminal_without_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEQUERY_PROGRESS_DELAY", "0")
    tty = _Terminal()
    with ProgressReporter("OPTIMIZE", 4, 4096, stream=tty) as rep:
        rep.advance(2, 2048)
        rep.advance(2, 2048)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", tty.getvalue())
    assert "OPTIMIZE" in text and "4/4 files" in text and "4.0 KiB/4.0 KiB" in text
    plain = io.StringIO()
    with ProgressReporter("OPTIMIZE", 4, 4096, stream=plain) as rep:
        rep.advance(4, 4096)
    assert plain.getvalue() == ""
    seen: list[Progress] = []
    tty2 = _Terminal()
    with ProgressReporter("VACUUM", 1, 0, callback=seen.append, stream=tty2) as rep:
        rep.advance(1, 0)
    assert tty2.getvalue() == "" and seen[0].fraction == 1.0


def test_thread_safe_totals() -> None:
    seen: list[Progress] = []
    rep = ProgressReporter("OPTIMIZE", 400, 400, callback=seen.append)
    threads = [
        threading.Thread(target=lambda: [rep.advance(1, 1) for _ in range(100)]) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert rep.files_done == 400 and rep.bytes_done == 400
    assert max(p.files_done for p in seen) == 400


def test_quick_runs_draw_nothing_even_on_a_terminal() -> None:
    tty = _Terminal()
    with ProgressReporter("WRITE", 0, 0, stream=tty, unit="rows") as rep:
        rep.advance(100, 800)  # well inside the default delay
    assert tty.getvalue() == ""


def test_write_and_change_feed_report_progress(tmp_path: Any) -> None:
    import pyarrow as pa

    import lakequery as lq

    seen: list[Progress] = []
    batches = [pa.record_batch({"x": list(range(i * 10, i * 10 + 10))}) for i in range(3)]
    uri = str(tmp_path / "t")
    lq.write(
        uri, batches, progress=seen.append, configuration={"delta.enableChangeDataFeed": "true"}
    )
    assert [p.files_done for p in seen] == [10, 20, 30] and seen[-1].operation == "WRITE"
    lq.write(uri, pa.table({"x": [99]}), mode="append")
    read: list[Progress] = []
    scan = lq.DeltaTable(uri).changes(starting_version=0)
    assert scan.to_arrow_reader(progress=read.append).read_all().num_rows == 31
    assert read[-1].files_done == read[-1].files_total == scan.num_files == 2


def test_dml_reports_rows_written(tmp_path: Any) -> None:
    import pyarrow as pa

    import lakequery as lq

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": list(range(100)), "v": [0] * 100}))
    seen: list[Progress] = []
    dt = lq.DeltaTable(uri)
    dt.update("id < 10", set={"v": "1"}, copy_on_write=True, progress=seen.append)
    assert seen and seen[-1].operation == "UPDATE" and seen[-1].files_done == 100  # all rewritten
    merged: list[Progress] = []
    src = pa.table({"id": [5, 500], "v": [7, 7]})
    dt.merge(
        src, on="target.id = source.id"
    ).when_matched_update_all().when_not_matched_insert_all().execute(progress=merged.append)
    assert merged and merged[-1].operation == "MERGE" and merged[-1].files_done >= 2


def test_restore_and_checkpoint_report_progress(tmp_path: Any) -> None:
    import pyarrow as pa

    import lakequery as lq

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"x": [1]}))
    lq.write(uri, pa.table({"x": [2]}), mode="append")
    dt = lq.DeltaTable(uri)
    steps: list[Progress] = []
    dt.restore(version=0, progress=steps.append)
    assert [(p.operation, p.files_done, p.files_total) for p in steps] == [
        ("RESTORE", i, 4) for i in range(1, 5)
    ]
    written: list[Progress] = []
    info = dt.checkpoint(progress=written.append)
    assert written and written[-1].operation == "CHECKPOINT"
    assert written[-1].files_done == info.num_actions
