"""Many transactions try to commit the SAME version at once (threads and processes).

Exactly one ``try_commit`` may report ``committed=True``; the commit file must hold
exactly the bytes that winner sent, and readers polling the file during the race must
only ever see nothing or the complete winner's content. Also: a commit whose response
is lost (the PUT landed, the caller was told it did not) is recognised by its txnId and
never committed twice.
"""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from txn_worker import fake_adds
from txnkit import check_log, finish_all, ids_table, open_table_storage, run_together

import lakequery as lq
from lakequery.errors import ObjectNotFoundError
from lakequery.storage import Storage
from lakequery.txn import Transaction, commit_path

#: Add actions per commit: ~90 KB commits, so a torn write would show.
FILES = 400


@pytest.fixture(params=["local", "memory", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any] | None]:
    if request.param == "local":
        return str(tmp_path / "table"), None
    if request.param == "memory":
        return str(request.getfixturevalue("memory_table_uri")), None
    uri: str = request.getfixturevalue("s3_table_uri")
    opts: dict[str, Any] = request.getfixturevalue("s3_storage_options")
    return uri, opts


class Poller:
    """Reads one file over and over in a thread, keeping every distinct content seen."""

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage, self.path = storage, path
        self.seen: set[bytes] = set()
        self.reads = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.seen.add(self.storage.read(self.path))
                self.reads += 1
            except ObjectNotFoundError:
                pass
            except BaseException as exc:
                self.errors.append(exc)
                return
            time.sleep(0.002)  # leave CPU to the writers (and the in-process moto server)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.seen.add(self.storage.read(self.path))


def _assert_one_winner(
    storage: Storage, version: int, results: list[tuple[bool, bytes, str]], poller: Poller
) -> None:
    winners = [(data, txn_id) for committed, data, txn_id in results if committed]
    assert len(winners) == 1, f"{len(winners)} winners of version {version}"
    data, txn_id = winners[0]
    assert storage.read(commit_path(storage, version)) == data
    assert not poller.errors, poller.errors
    assert poller.seen == {data}, "a reader saw content other than the complete winner's"
    log = check_log(storage)
    assert log.versions == list(range(version + 1))
    assert log.commits[version][0]["commitInfo"]["txnId"] == txn_id


def test_threads_race_for_one_version(target: tuple[str, dict[str, Any] | None]) -> None:
    uri, opts = target
    lq.write(uri, ids_table(0, 0, 3), storage_options=opts)
    writers = 8
    tables = [lq.DeltaTable(uri, storage_options=opts) for _ in range(writers)]
    txns = []
    for i, dt in enumerate(tables):
        txn = Transaction(dt.storage, dt.snapshot(), operation="WRITE")
        txn.add_files(fake_adds(i, FILES))
        txns.append(txn)
    sent: dict[int, bytes] = {}
    for i, dt in enumerate(tables):
        put = dt.storage.put_if_absent

        def recording(path: str, data: bytes, i: int = i, put: Any = put) -> bool:
            sent[i] = data
            return bool(put(path, data))

        dt.storage.put_if_absent = recording  # type: ignore[method-assign]
    storage = open_table_storage(uri, opts)
    poller = Poller(storage, commit_path(storage, 1))
    barrier = threading.Barrier(writers)
    outcomes: dict[int, bool] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            outcomes[i] = txns[i].try_commit(1).committed
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    poller.stop()
    assert not errors, errors
    results = [(outcomes[i], sent[i], txns[i].txn_id) for i in range(writers)]
    _assert_one_winner(storage, 1, results, poller)


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_processes_race_for_one_version(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    opts: dict[str, Any] | None = None
    uri = str(tmp_path / "table")
    if backend == "s3":
        uri = request.getfixturevalue("s3_table_uri")
        opts = request.getfixturevalue("s3_storage_options")
    lq.write(uri, ids_table(0, 0, 3), storage_options=opts)
    storage = open_table_storage(uri, opts)
    pollers: list[Poller] = []
    jobs = [
        {"job": "try_commit", "uri": uri, "storage_options": opts, "writer": w}
        | {"version": 1, "files": FILES}
        for w in range(4 if backend == "s3" else 6)
    ]
    start_poller = lambda: pollers.append(Poller(storage, commit_path(storage, 1)))  # noqa: E731
    workers = run_together(jobs, tmp_path / "go", before_go=start_poller)
    finish_all(workers)
    poller = pollers[0]
    poller.stop()
    records = [r for w in workers for r in w.records]
    assert len(records) == len(workers)
    results = [(r["committed"], base64.b64decode(r["data"]), r["txn_id"]) for r in records]
    _assert_one_winner(storage, 1, results, poller)


class _LostResponse:
    """Delegates to a real storage, but the first commit PUT is sent twice, like a
    client that retried a request whose response was lost: the object is created by the
    first send and the retry is told it already exists."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        created = self._storage.put_if_absent(path, data)
        if created and not self.lost and path.endswith(".json"):
            self.lost += 1
            return self._storage.put_if_absent(path, data)  # the retry: False
        return created


def test_lost_commit_response_is_recognised(target: tuple[str, dict[str, Any] | None]) -> None:
    uri, opts = target
    lq.write(uri, ids_table(0, 0, 3), storage_options=opts)
    dt = lq.DeltaTable(uri, storage_options=opts)
    storage = _LostResponse(dt.storage)
    txn = Transaction(storage, dt.snapshot(), operation="WRITE")  # type: ignore[arg-type]
    txn.add_files(fake_adds(1, 2))
    result = txn.commit()
    assert storage.lost == 1
    assert result.version == 1
    log = check_log(dt.storage)
    assert log.versions == [0, 1], "the transaction committed twice"
    assert log.commits[1][0]["commitInfo"]["txnId"] == txn.txn_id


def test_lost_response_when_creating_the_table(target: tuple[str, dict[str, Any] | None]) -> None:
    uri, opts = target
    lq.write(uri, ids_table(0, 0, 3), storage_options=opts)  # to borrow its protocol/metadata
    source = lq.DeltaTable(uri, storage_options=opts).snapshot()
    new_uri = uri + "-created"
    storage = _LostResponse(lq.DeltaTable(new_uri, storage_options=opts).storage)
    txn = Transaction(storage, None, operation="CREATE TABLE")  # type: ignore[arg-type]
    txn.set_protocol(source.protocol)
    txn.set_metadata(source.metadata)
    result = txn.commit()  # its own version 0 landed: not "table already exists"
    assert storage.lost == 1
    assert result.version == 0
    log = check_log(storage._storage)
    assert log.versions == [0]
    assert log.commits[0][0]["commitInfo"]["txnId"] == txn.txn_id
