"""Worker for the multi-process put_if_absent race (kept lean: children import it)."""

from __future__ import annotations

from typing import Any

from lakequery.storage import open_storage

RACE_COMMIT = "00000000000000000007.json"


def payload(index: int) -> bytes:
    """A distinct ~80 KB commit payload per writer, so partial content would show."""
    return f'{{"commitInfo":{{"writer":{index}}}}}\n'.encode() * 2500


def race_worker(uri: str, index: int, barrier: Any, queue: Any) -> None:
    """Open the table in this process, wait for all writers, then try to commit."""
    storage = open_storage(uri)
    commit = storage.join("_delta_log", RACE_COMMIT)
    data = payload(index)
    barrier.wait(timeout=60)
    queue.put((index, storage.put_if_absent(commit, data)))
