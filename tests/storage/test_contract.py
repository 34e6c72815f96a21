"""The storage contract, checked against every backend with real components.

Backends: a local path, a ``file://`` URI, ``memory://`` and S3 (a real moto server on
127.0.0.1). Covers listing order and start keys, reads, missing objects, read-after-write
without stale caches, atomic put-if-absent (including races between threads and between
processes) and the DuckDB / Arrow / Polars bridges.
"""

from __future__ import annotations

import importlib
import io
import multiprocessing
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakequery.errors import ObjectNotFoundError, StorageError
from lakequery.storage import FileInfo, Storage, open_storage

BACKENDS = ["local", "file_uri", "memory", "s3"]
PROTOCOLS = {"local": "file", "file_uri": "file", "memory": "memory", "s3": "s3"}

#: A ``_delta_log`` with the awkward names of protocol §2.4 (sizes differ on purpose).
LOG_FILES: dict[str, bytes] = {
    "00000000000000000009.json": b'{"commitInfo":{"v":9}}\n',
    "00000000000000000010.checkpoint.parquet": b"PAR1" + b"c" * 40 + b"PAR1",
    "00000000000000000010.crc": b'{"tableSizeBytes":1}',
    "00000000000000000010.json": b'{"commitInfo":{"v":10}}\n',
    "00000000000000000011.00000000000000000014.compacted.json": b'{"add":{}}\n',
    "00000000000000000011.json": b'{"commitInfo":{"v":11}}\n',
    ".00000000000000000011.json.crc": b"hadoop-crc",
    "_last_checkpoint": b'{"version":10,"size":3}',
}
SIDECAR = "00000000000000000010.checkpoint.0000000001.0000000001.3a0d65cd.parquet"

PARQUET_TABLE = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})
NDJSON = b'{"add":{"path":"p1","size":10}}\n{"add":{"path":"p2","size":20}}\n'


def _parquet_bytes(table: pa.Table = PARQUET_TABLE) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@pytest.fixture
def race_helper(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The lean worker module for process races, importable by child processes too."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    return importlib.import_module("race_helper")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def table_uri(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "local":
        return str(tmp_path / "table")
    if backend == "file_uri":
        return (tmp_path / "table").as_uri()
    if backend == "memory":
        return str(request.getfixturevalue("memory_table_uri"))
    return str(request.getfixturevalue("s3_table_uri"))


@pytest.fixture
def options(backend: str, request: pytest.FixtureRequest) -> dict[str, Any] | None:
    if backend == "s3":
        opts: dict[str, Any] = request.getfixturevalue("s3_storage_options")
        return opts
    return None


@pytest.fixture
def storage(table_uri: str, options: dict[str, Any] | None) -> Storage:
    return open_storage(table_uri, options)


def _names(infos: list[FileInfo]) -> list[str]:
    return [f.name for f in infos]


# --- locations ---------------------------------------------------------------------------------


def test_root_protocol_and_join(
    backend: str, storage: Storage, table_uri: str, options: Any, tmp_path: Path
) -> None:
    expected_root = str(tmp_path / "table") if backend in ("local", "file_uri") else table_uri
    assert storage.root == expected_root
    assert storage.protocol == PROTOCOLS[backend]
    assert storage.join("_delta_log", "x.json") == expected_root + "/_delta_log/x.json"
    assert storage.join() == expected_root
    assert open_storage(table_uri + "/", options).root == expected_root


# --- listing ---------------------------------------------------------------------------------


def _write_log(storage: Storage) -> str:
    log = storage.join("_delta_log")
    for name in sorted(LOG_FILES, reverse=True):  # write out of order on purpose
        assert storage.put_if_absent(f"{log}/{name}", LOG_FILES[name])
    storage.put(f"{log}/_sidecars/{SIDECAR}", b"sidecar")
    return log


def test_list_from_orders_by_name_and_starts_at_key(storage: Storage) -> None:
    before_ms = time.time() * 1000 - 5_000
    log = _write_log(storage)
    after_ms = time.time() * 1000 + 5_000

    everything = storage.list_from(log, "")
    assert _names(everything) == sorted(LOG_FILES)
    assert everything[0].name == ".00000000000000000011.json.crc"
    assert "_sidecars" not in _names(everything)
    for info in everything:
        assert info.path == storage.join("_delta_log", info.name)
        assert info.size == len(LOG_FILES[info.name])
        assert storage.read(info.path) == LOG_FILES[info.name]
        assert before_ms <= info.modified_ms <= after_ms

    assert _names(storage.list_from(log, "00000000000000000010.")) == [
        "00000000000000000010.checkpoint.parquet",
        "00000000000000000010.crc",
        "00000000000000000010.json",
        "00000000000000000011.00000000000000000014.compacted.json",
        "00000000000000000011.json",
        "_last_checkpoint",
    ]
    # the start key itself is included
    assert _names(storage.list_from(log, "00000000000000000010.json"))[0] == (
        "00000000000000000010.json"
    )
    assert _names(storage.list_from(log, "00000000000000000012")) == ["_last_checkpoint"]
    assert storage.list_from(log, "~") == []
    assert _names(storage.list_from(storage.join("_delta_log", "_sidecars"), "")) == [SIDECAR]


def test_list_from_missing_directory_is_empty(storage: Storage) -> None:
    assert storage.list_from(storage.join("_delta_log"), "") == []
    assert storage.list_from(storage.join("no", "such", "dir"), "0") == []


def test_listing_sees_writes_and_deletes_immediately(
    storage: Storage, table_uri: str, options: Any
) -> None:
    reader = open_storage(table_uri, options)  # a second client, as another process would be
    log = storage.join("_delta_log")
    names = [f"{v:020d}.json" for v in range(3)]
    assert reader.list_from(log, "") == []
    for i, name in enumerate(names):
        assert storage.put_if_absent(f"{log}/{name}", b"{}\n")
        assert _names(reader.list_from(log, "")) == names[: i + 1]
        assert _names(reader.list_from(log, name)) == [name]
        assert reader.exists(f"{log}/{name}")
    storage.delete(f"{log}/{names[0]}")
    assert _names(reader.list_from(log, "")) == names[1:]
    assert not reader.exists(f"{log}/{names[0]}")


# --- reading -----------------------------------------------------------------------------------


def test_read_read_range_and_read_many(storage: Storage) -> None:
    data = bytes(range(256)) * 40
    blob = storage.join("data", "blob.bin")
    storage.put(blob, data)
    assert storage.read(blob) == data
    assert storage.size(blob) == len(data)
    assert storage.read_range(blob, 100, 1000) == data[100:1100]
    assert storage.read_range(blob, len(data) - 10, 10) == data[-10:]
    assert storage.read_range(blob, 5, 0) == b""
    with pytest.raises(StorageError) as past_end:
        storage.read_range(blob, len(data) - 5, 10)
    assert not isinstance(past_end.value, ObjectNotFoundError)
    assert past_end.value.uri == blob
    with pytest.raises(ValueError):
        storage.read_range(blob, -1, 2)

    others = {
        storage.join("data", f"f{i}.bin"): f"content {i}".encode() * (i + 1) for i in range(5)
    }
    for path, content in others.items():
        storage.put(path, content)
    order = [*reversed(list(others)), blob, next(iter(others))]
    assert storage.read_many(order) == [others.get(p, data) for p in order]
    assert storage.read_many([]) == []


def test_map_io_keeps_order_in_turn_and_on_threads(storage: Storage) -> None:
    """Up to ``serial_io`` calls run in turn, more on a thread pool: the same results in
    the items' order either way, and a failure of any call reaches the caller."""
    paths = [storage.join("data", f"m{i}.bin") for i in range(storage.serial_io + 5)]
    for i, path in enumerate(paths):
        storage.put(path, b"x" * i)
    for n in (0, 1, storage.serial_io, len(paths)):
        assert storage.map_io(storage.size, paths[:n]) == list(range(n))
    missing = storage.join("data", "missing.bin")
    for items in ([missing], [*paths, missing]):
        with pytest.raises(ObjectNotFoundError):
            storage.map_io(storage.size, items)


def test_missing_object_raises_object_not_found(storage: Storage) -> None:
    path = storage.join("_delta_log", "00000000000000000099.json")
    present = storage.join("present.bin")
    storage.put(present, b"here")
    calls: list[Callable[[], object]] = [
        lambda: storage.read(path),
        lambda: storage.size(path),
        lambda: storage.read_range(path, 0, 1),
        lambda: storage.read_range(path, 0, 0),
        lambda: storage.read_many([present, path]),
    ]
    for call in calls:
        with pytest.raises(ObjectNotFoundError) as info:
            call()
        assert isinstance(info.value, FileNotFoundError)
        assert isinstance(info.value, StorageError)
        assert info.value.uri == path
        assert path in str(info.value)
    assert not storage.exists(path)
    storage.delete(path)  # deleting a missing object is not an error
    assert storage.read(present) == b"here"


def test_read_after_write_and_overwrite(storage: Storage) -> None:
    path = storage.join("_delta_log", "_last_checkpoint")
    storage.put(path, b"one")
    assert storage.read(path) == b"one"
    storage.put(path, b"second")
    assert storage.read(path) == b"second"
    assert storage.size(path) == 6
    assert storage.exists(path)
    assert _names(storage.list_from(storage.join("_delta_log"), "")) == ["_last_checkpoint"]
    storage.delete(path)
    assert not storage.exists(path)
    with pytest.raises(ObjectNotFoundError):
        storage.read(path)


# --- put_if_absent -------------------------------------------------------------------------------


def test_put_if_absent_creates_once_and_never_overwrites(storage: Storage) -> None:
    log = storage.join("_delta_log")
    commit = f"{log}/00000000000000000000.json"
    assert not storage.exists(commit)
    assert storage.put_if_absent(commit, b"first\n") is True
    assert storage.read(commit) == b"first\n"
    assert storage.put_if_absent(commit, b"second, longer payload\n") is False
    assert storage.read(commit) == b"first\n"
    empty = f"{log}/00000000000000000001.json"
    assert storage.put_if_absent(empty, b"") is True
    assert storage.size(empty) == 0
    # no temporary files are left behind, not even hidden ones
    assert _names(storage.list_from(log, "")) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]


def _assert_single_winner(
    storage: Storage, commit: str, results: dict[int, bool], payload: Callable[[int], bytes]
) -> None:
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1, f"winners: {winners}"
    assert storage.read(commit) == payload(winners[0])
    assert _names(storage.list_from(storage.join("_delta_log"), "")) == [commit.rsplit("/")[-1]]


def test_put_if_absent_race_between_threads(
    table_uri: str, options: Any, race_helper: ModuleType
) -> None:
    writers = 12
    clients = [open_storage(table_uri, options) for _ in range(writers)]
    commit = clients[0].join("_delta_log", race_helper.RACE_COMMIT)
    barrier = threading.Barrier(writers)
    results: dict[int, bool] = {}
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            assert not clients[index].exists(commit)  # also warms up the client
            barrier.wait(timeout=60)
            results[index] = clients[index].put_if_absent(commit, race_helper.payload(index))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert len(results) == writers
    _assert_single_winner(clients[0], commit, results, race_helper.payload)


@pytest.mark.parametrize("uri_form", ["path", "file_uri"])
def test_put_if_absent_race_between_processes(
    tmp_path: Path, uri_form: str, race_helper: ModuleType
) -> None:
    writers = 6
    root = tmp_path / "table"
    uri = str(root) if uri_form == "path" else root.as_uri()
    # forkserver: children fork from a clean single-threaded server that preloaded the
    # worker module, so they start fast and never inherit this process's threads
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["__main__", "lakequery.storage", race_helper.__name__])
    barrier = ctx.Barrier(writers)
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=race_helper.race_worker, args=(uri, i, barrier, queue))
        for i in range(writers)
    ]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in range(writers))
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    storage = open_storage(uri)
    commit = storage.join("_delta_log", race_helper.RACE_COMMIT)
    _assert_single_winner(storage, commit, results, race_helper.payload)


# --- engine bridges ----------------------------------------------------------------------------


def _write_engine_files(storage: Storage) -> tuple[str, str]:
    parquet_path = storage.join("part-00000.snappy.parquet")
    storage.put(parquet_path, _parquet_bytes())
    json_path = storage.join("_delta_log", "00000000000000000000.json")
    assert storage.put_if_absent(json_path, NDJSON)
    return parquet_path, json_path


def test_duckdb_reads_parquet_and_ndjson(backend: str, storage: Storage) -> None:
    parquet_path, json_path = _write_engine_files(storage)
    con = duckdb.connect()
    try:
        storage.register_duckdb(con)
        storage.register_duckdb(con)  # idempotent
        rows = con.execute(
            "SELECT id, name FROM read_parquet(?) ORDER BY id", [storage.duckdb_path(parquet_path)]
        ).fetchall()
        assert rows == [(1, "a"), (2, "b"), (3, "c")]
        adds = con.execute(
            'SELECT "add".path, "add".size FROM read_json(?, format=\'newline_delimited\') '
            "ORDER BY 2",
            [storage.duckdb_path(json_path)],
        ).fetchall()
        assert adds == [("p1", 10), ("p2", 20)]
        if backend == "s3":
            # DuckDB read through the registered fsspec filesystem, not httpfs
            assert not storage.duckdb_path(parquet_path).startswith("s3://")
            loaded = con.execute(
                "SELECT count(*) FROM duckdb_extensions() "
                "WHERE extension_name = 'httpfs' AND loaded"
            ).fetchone()
            assert loaded == (0,)
    finally:
        con.close()


def test_duckdb_connection_shared_by_several_storages(
    tmp_path: Path,
    memory_table_uri: str,
    s3_table_uri: str,
    s3_storage_options: dict[str, Any],
) -> None:
    other_options = {**s3_storage_options, "default_block_size": 2**20}
    storages = [
        open_storage(str(tmp_path / "t")),
        open_storage(memory_table_uri),
        open_storage(s3_table_uri, s3_storage_options),
        open_storage(s3_table_uri + "_other", other_options),
    ]
    con = duckdb.connect()
    try:
        paths = []
        for i, st in enumerate(storages):
            path = st.join("part.parquet")
            st.put(path, _parquet_bytes(pa.table({"id": [i]})))
            st.register_duckdb(con)
            paths.append(st.duckdb_path(path))
        assert len(set(paths)) == len(paths)
        assert paths[2].split("://")[0] != paths[3].split("://")[0]  # separate registrations
        for i, path in enumerate(paths):
            assert con.execute("SELECT id FROM read_parquet(?)", [path]).fetchall() == [(i,)]
    finally:
        con.close()


def test_arrow_filesystem_reads_parquet(storage: Storage) -> None:
    parquet_path, _ = _write_engine_files(storage)
    fs, to_fs = storage.arrow_filesystem()
    assert pq.read_table(to_fs(parquet_path), filesystem=fs).equals(PARQUET_TABLE)
    assert fs.get_file_info(to_fs(parquet_path)).size == storage.size(parquet_path)


def test_polars_scan_parquet(backend: str, storage: Storage) -> None:
    parquet_path, _ = _write_engine_files(storage)
    if backend == "memory":
        with pytest.raises(NotImplementedError):
            storage.polars_source([parquet_path])
        return
    paths, polars_options = storage.polars_source([parquet_path])
    frame = pl.scan_parquet(paths, storage_options=polars_options).collect()
    assert frame.sort("id").to_dicts() == PARQUET_TABLE.to_pylist()
