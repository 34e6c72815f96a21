"""Declarative feature gating (digest §5)."""

from __future__ import annotations

import pytest

from lakequery.errors import ProtocolError, UnsupportedFeatureError
from lakequery.protocol.features import FEATURES, Protocol, check_readable


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(1, 2),
        Protocol(2, 5),
        Protocol(2, 7, None, ("columnMapping",)),
        Protocol(3, 7, tuple(n for n, f in FEATURES.items() if f.kind == "reader-writer"), ()),
        Protocol(3, 7, (), ("someFutureWriterFeature",)),  # writer-only names never block reads
    ],
)
def test_readable(protocol: Protocol) -> None:
    check_readable(protocol)


def test_unknown_reader_feature_is_named() -> None:
    with pytest.raises(UnsupportedFeatureError) as err:
        check_readable(Protocol(3, 7, ("deletionVectors", "catalogManaged"), ("catalogManaged",)))
    assert err.value.feature == "catalogManaged"
    assert "catalogManaged" in str(err.value)


def test_unknown_reader_version() -> None:
    with pytest.raises(UnsupportedFeatureError) as err:
        check_readable(Protocol(99, 7))
    assert "99" in str(err.value)


def test_illegal_combinations() -> None:
    with pytest.raises(ProtocolError):
        check_readable(Protocol(3, 5, (), None))
    with pytest.raises(ProtocolError):
        check_readable(Protocol(3, 7, None, ()))
    # reader features are listed only under reader version 3 (digest 5.2)
    for legacy in (1, 2):
        with pytest.raises(ProtocolError, match="futureFeature"):
            check_readable(Protocol(legacy, 7, ("futureFeature",), ("futureFeature",)))
        with pytest.raises(ProtocolError, match="deletionVectors"):
            check_readable(Protocol(legacy, 7, ("deletionVectors",), ("deletionVectors",)))
        check_readable(Protocol(legacy, 7, (), ()))  # an empty list says nothing


def test_legacy_versions_imply_features() -> None:
    assert Protocol(2, 5).supports("columnMapping")
    assert Protocol(1, 4).supports("changeDataFeed")
    assert not Protocol(1, 2).supports("columnMapping")
    assert Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)).supports("deletionVectors")


def test_malformed_protocol_action() -> None:
    with pytest.raises(ProtocolError):
        Protocol.from_action({"minReaderVersion": "x"})
    p = Protocol.from_action(
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["v2Checkpoint"],
            "writerFeatures": ["v2Checkpoint"],
        }
    )
    assert p.to_action()["readerFeatures"] == ["v2Checkpoint"]
