"""The conflict rules of digest §17.4, one winner at a time (pure, no files)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakequery.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    DomainMetadataConflictError,
    MetadataChangedError,
    ProtocolChangedError,
    UnsupportedFeatureError,
)
from lakequery.protocol.conflicts import Footprint, WinningCommit, check_winner, partition_part
from lakequery.protocol.features import Protocol, check_writable
from lakequery.protocol.schema import PrimitiveType

URI = "memory://conflicts"
SPECS = [("day", "day", PrimitiveType("string")), ("n", "n", PrimitiveType("integer"))]


def _add(path: str, day: str | None = "a", n: str | None = "1", change: bool = True) -> Any:
    return {
        "add": {
            "path": path,
            "partitionValues": {"day": day, "n": n},
            "size": 1,
            "modificationTime": 0,
            "dataChange": change,
        }
    }


def _winner(*actions: Any, blind: bool | None = None, version: int = 1) -> WinningCommit:
    lines = list(actions)
    if blind is not None:
        lines.insert(0, {"commitInfo": {"isBlindAppend": blind}})
    data = "\n".join(json.dumps(a) for a in lines).encode()
    return WinningCommit.from_bytes(version, data)


def _check(own: Footprint, winner: WinningCommit) -> None:
    check_winner(own, winner, uri=URI, partition_specs=SPECS)


def test_blind_appends_never_conflict() -> None:
    own = Footprint(0, blind_append=True)
    _check(own, _winner(_add("x"), blind=True))
    _check(own, _winner(_add("x"), blind=False))


def test_dml_vs_blind_append_depends_on_isolation_level() -> None:
    reads = dict(read_predicates=("day = 'a'",), read_files=frozenset({"old"}))
    winner = _winner(_add("new", day="a"), blind=True)
    _check(Footprint(0, isolation_level="WriteSerializable", **reads), winner)
    with pytest.raises(ConcurrentAppendError) as err:
        _check(Footprint(0, isolation_level="Serializable", **reads), winner)
    assert err.value.winning_version == 1 and "new" in str(err.value)


def test_non_blind_append_into_read_partition_conflicts() -> None:
    own = Footprint(0, read_predicates=("day = 'a' AND x > 3",))
    with pytest.raises(ConcurrentAppendError):
        _check(own, _winner(_add("p", day="a"), blind=False))
    _check(own, _winner(_add("p", day="b"), blind=False))  # another partition: fine


def test_predicate_without_partition_part_reads_everything() -> None:
    own = Footprint(0, read_predicates=("x > 3",))
    with pytest.raises(ConcurrentAppendError):
        _check(own, _winner(_add("p", day="zzz"), blind=False))


def test_null_partition_value_does_not_match_equality() -> None:
    own = Footprint(0, read_predicates=("n = 1",))
    _check(own, _winner(_add("p", n=None), blind=False))
    with pytest.raises(ConcurrentAppendError):
        _check(Footprint(0, read_predicates=("n IS NULL",)), _winner(_add("p", n=None)))


def test_missing_commit_info_counts_as_not_blind() -> None:
    with pytest.raises(ConcurrentAppendError):
        _check(Footprint(0, read_whole_table=True), _winner(_add("p")))


def test_optimize_vs_append_and_vs_delete() -> None:
    optimize = Footprint(
        0,
        isolation_level="SnapshotIsolation",
        read_files=frozenset({"small1", "small2"}),
        removed_files=frozenset({"small1", "small2"}),
    )
    _check(optimize, _winner(_add("new"), blind=False))  # appends do not matter
    remove = {"remove": {"path": "small2", "dataChange": True}}
    with pytest.raises(ConcurrentDeleteReadError):
        _check(optimize, _winner(remove))


def test_delete_delete() -> None:
    own = Footprint(0, removed_files=frozenset({"f%20x"}))
    with pytest.raises(ConcurrentDeleteDeleteError):
        _check(own, _winner({"remove": {"path": "f%2520x", "dataChange": True}}))


def test_whole_table_read_conflicts_with_any_remove() -> None:
    own = Footprint(0, read_whole_table=True)
    with pytest.raises(ConcurrentDeleteReadError):
        _check(own, _winner({"remove": {"path": "anything", "dataChange": True}}))


def test_metadata_and_protocol_changes() -> None:
    meta = {"metaData": {"id": "x", "schemaString": "{}", "partitionColumns": []}}
    with pytest.raises(MetadataChangedError):
        _check(Footprint(0, blind_append=True), _winner(meta))
    proto = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    _check(Footprint(0, blind_append=True), _winner(proto))
    with pytest.raises(ProtocolChangedError):
        _check(Footprint(0, changes_protocol=True), _winner(proto))


def test_winner_protocol_lakequery_cannot_write() -> None:
    proto = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["x"]}}
    with pytest.raises(UnsupportedFeatureError):
        check_winner(
            Footprint(0, blind_append=True),
            _winner(proto),
            uri=URI,
            check_protocol=lambda a: check_writable(Protocol.from_action(a)),
        )


def test_txn_app_ids_and_domains() -> None:
    txn = {"txn": {"appId": "stream-1", "version": 5}}
    with pytest.raises(ConcurrentTransactionError):
        _check(Footprint(0, blind_append=True, read_app_ids=frozenset({"stream-1"})), _winner(txn))
    _check(Footprint(0, blind_append=True, read_app_ids=frozenset({"other"})), _winner(txn))
    dom = {"domainMetadata": {"domain": "com.x", "configuration": "{}", "removed": False}}
    with pytest.raises(DomainMetadataConflictError):
        _check(Footprint(0, blind_append=True, domains=frozenset({"com.x"})), _winner(dom))
    rt = {"domainMetadata": {"domain": "delta.rowTracking", "configuration": "{}"}}
    _check(Footprint(0, blind_append=True, domains=frozenset({"delta.rowTracking"})), _winner(rt))


def test_partition_part_keeps_only_partition_conjuncts() -> None:
    assert partition_part("x > 1", ["day"]) is None
    part = partition_part("x > 1 AND DAY = 'a' AND n < 3", ["day", "n"])
    assert part is not None
    assert partition_part("x > 1 OR day = 'a'", ["day"]) is None
