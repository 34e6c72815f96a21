"""Failures the store keeps up are ``StorageError`` naming the object, never something else.

Each test makes one kind of request fail on every attempt (retries off or few), through
the fault proxy, and checks the error type, the object it names and that nothing wrong
was returned or committed. Before the fixes these surfaced as ``CorruptLogError`` (a
transient GET of a commit), as a missing data file (a failed HEAD behind PyArrow's
``isfile``), as raw ``duckdb.Error`` or as bare ``OSError``.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import ProxiedTable
from fault_proxy import FaultPlan, Rule

import lakequery as lq
from lakequery.errors import CorruptLogError, ObjectNotFoundError, StorageError

PARQUET = r"/part-[^/]*\.parquet$"


def _table(p: ProxiedTable) -> None:
    lq.write(p.uri, pa.table({"id": [1, 2, 3]}), storage_options=p.options)
    lq.write(p.uri, pa.table({"id": [4, 5]}), mode="append", storage_options=p.options)


def _fail(p: ProxiedTable, kind: str, regex: str, fault: str = "error503") -> None:
    p.proxy.configure(FaultPlan(rules=[Rule(kind, regex, fault, count=10_000)]))


def test_commit_read_failure_is_not_a_corrupt_log(proxied: ProxiedTable) -> None:
    _table(proxied)
    _fail(proxied, "GET", r"_delta_log/0{20}\.json$")
    with pytest.raises(StorageError) as info:
        lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0)).snapshot()
    assert not isinstance(info.value, CorruptLogError)
    assert info.value.uri.endswith("_delta_log/00000000000000000000.json"), info.value.uri


def test_failed_head_of_a_data_file_is_not_a_missing_file(proxied: ProxiedTable) -> None:
    _table(proxied)
    snap = lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0)).snapshot()
    _fail(proxied, "HEAD", PARQUET)
    with pytest.raises(StorageError) as info:
        snap.scan().to_arrow()  # the PyArrow engine
    assert not isinstance(info.value, (ObjectNotFoundError, FileNotFoundError))
    assert info.value.uri.endswith(".parquet"), info.value.uri


@pytest.mark.parametrize("fault", ["error500", "drop_before", "truncate"])
def test_data_file_read_failure_names_the_file(proxied: ProxiedTable, fault: str) -> None:
    _table(proxied)
    dt = lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0))
    dt.snapshot()
    _fail(proxied, "GET", PARQUET, fault)
    with pytest.raises(StorageError) as info:
        dt.delete("id = 2")  # reads the data files through DuckDB
    assert info.value.uri.startswith(proxied.uri), info.value.uri
    proxied.proxy.quiet()
    assert dt.snapshot().version == 1  # nothing committed


def test_truncated_bodies_are_retried_into_the_right_rows(proxied: ProxiedTable) -> None:
    _table(proxied)
    opts = proxied.with_retries(2)
    proxied.proxy.configure(
        FaultPlan(
            rules=[Rule("GET", PARQUET, "truncate", count=2), Rule("GET", r"\.json$", "truncate")]
        )
    )
    rows = lq.DeltaTable(proxied.uri, storage_options=opts).snapshot().scan().to_arrow()
    assert sorted(rows.column("id").to_pylist()) == [1, 2, 3, 4, 5]
    assert sum(n for (_, f), n in proxied.proxy.injected.items() if f == "truncate") == 3


def test_truncated_bodies_never_give_rows_when_retries_run_out(proxied: ProxiedTable) -> None:
    _table(proxied)
    snap = lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0)).snapshot()
    _fail(proxied, "GET", PARQUET, "truncate")
    with pytest.raises(StorageError):
        snap.scan().to_arrow()


def test_data_file_write_failure_commits_nothing(proxied: ProxiedTable) -> None:
    _table(proxied)
    _fail(proxied, "PUT", PARQUET, "error500")
    with pytest.raises(StorageError) as info:
        lq.write(
            proxied.uri,
            pa.table({"id": [9]}),
            mode="append",
            storage_options=proxied.with_retries(1),
        )
    assert info.value.uri.startswith(proxied.uri), info.value.uri
    proxied.proxy.quiet()
    snap = lq.DeltaTable(proxied.uri, storage_options=proxied.options).snapshot()
    assert snap.version == 1
    assert sorted(snap.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 5]


def _commit(version: int) -> str:
    return rf"_delta_log/{version:020d}\.json$"


def test_a_failed_commit_is_named_not_the_first_one(proxied: ProxiedTable) -> None:
    _table(proxied)
    lq.write(proxied.uri, pa.table({"id": [6]}), mode="append", storage_options=proxied.options)
    _fail(proxied, "GET", _commit(2))
    with pytest.raises(StorageError) as info:
        lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0)).snapshot()
    assert not info.value.uri.endswith("00000000000000000000.json"), info.value.uri


@pytest.mark.parametrize("what", ["changes", "stream", "history", "commit_info"])
def test_commit_reads_beyond_replay_raise_storage_errors(proxied: ProxiedTable, what: str) -> None:
    """The change feed, streams, history and commit infos read commits too: a failed GET
    is a StorageError there, not a corrupt log, a missing commit or a raw engine error."""
    conf = {"delta.enableChangeDataFeed": "true"}
    lq.write(
        proxied.uri, pa.table({"id": [1, 2]}), configuration=conf, storage_options=proxied.options
    )
    lq.write(proxied.uri, pa.table({"id": [3]}), mode="append", storage_options=proxied.options)
    dt = lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0))
    snap = dt.snapshot()
    _fail(proxied, "GET", _commit(1))
    with pytest.raises(StorageError) as info:
        if what == "changes":
            dt.changes(starting_version=0).to_arrow()
        elif what == "stream":
            list(dt.stream(starting_version=0))
        elif what == "history":
            dt.history()
        else:
            assert snap.commit_info is not None
    assert not isinstance(info.value, (CorruptLogError, ObjectNotFoundError))


def test_a_failed_deletion_vector_read_is_a_storage_error(proxied: ProxiedTable) -> None:
    conf = {"delta.enableDeletionVectors": "true"}
    data = pa.table({"id": list(range(3000))})
    lq.write(proxied.uri, data, configuration=conf, storage_options=proxied.options)
    dt = lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0))
    dt.delete("id % 7 = 0")  # a DV big enough for a file of its own
    snap = dt.snapshot()
    _fail(proxied, "GET", r"/deletion_vector_[^/]*\.bin$")
    with pytest.raises(StorageError):
        snap.scan().to_arrow()
    proxied.proxy.quiet()
    assert snap.scan().to_arrow().num_rows == 3000 - 429


def test_vacuums_pass_over_recent_commits_raises_storage_errors(proxied: ProxiedTable) -> None:
    """VACUUM of a change-data-feed table reads the commits inside the retention for the
    change files they keep; the log itself loads from a checkpoint."""
    import time

    conf = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "false"}
    data = pa.table({"id": list(range(100)), "v": list(range(100))})
    lq.write(proxied.uri, data, configuration=conf, storage_options=proxied.options)
    dt = lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0))
    dt.update("id < 10", set={"v": "v + 1"})  # removes a file, writes change data
    time.sleep(2.5)
    dt.update("id < 10", set={"v": "v + 1"})  # version 2: inside the retention below
    dt.checkpoint()
    _fail(proxied, "GET", _commit(2))
    with pytest.raises(StorageError) as info:
        lq.DeltaTable(proxied.uri, storage_options=proxied.with_retries(0)).vacuum(
            retention_hours=2 / 3600, enforce_retention=False
        )
    assert info.value.uri.endswith(f"{2:020d}.json"), info.value.uri
