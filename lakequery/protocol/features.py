"""Declarative protocol and table-feature gating (digest §5, §14).

One table says, for every feature name lakequery knows, whether it can read and write
tables that carry it. :func:`check_readable` is the only gate the read path calls; it
refuses an unsupported reader version or reader feature with an error naming it.

Example:
    >>> from lakequery.protocol.features import Protocol, check_readable
    >>> check_readable(Protocol(1, 2))
    >>> check_readable(Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakequery.errors import ProtocolError, UnsupportedFeatureError


@dataclass(frozen=True)
class FeatureSupport:
    """What lakequery does with one table feature."""

    kind: str  # "reader-writer" | "writer"
    read: bool  # lakequery reads tables that list it
    write: bool  # lakequery writes tables that list it
    note: str = ""


#: Every table feature lakequery knows. ``read=True`` on a reader-writer feature means the
#: read path implements its reader obligations; writer-only features never block reads.
FEATURES: Mapping[str, FeatureSupport] = {
    "appendOnly": FeatureSupport("writer", True, False),
    "invariants": FeatureSupport("writer", True, False),
    "checkConstraints": FeatureSupport("writer", True, False),
    "changeDataFeed": FeatureSupport("writer", True, False),
    "generatedColumns": FeatureSupport("writer", True, False),
    "identityColumns": FeatureSupport("writer", True, False),
    "columnMapping": FeatureSupport("reader-writer", True, False, "name and id modes"),
    "deletionVectors": FeatureSupport("reader-writer", True, False, "on-disk and inline DVs"),
    "timestampNtz": FeatureSupport("reader-writer", True, False),
    "v2Checkpoint": FeatureSupport("reader-writer", True, False, "UUID-named and sidecars"),
    "typeWidening": FeatureSupport("reader-writer", True, False, "older files cast up"),
    "typeWidening-preview": FeatureSupport("reader-writer", True, False),
    "vacuumProtocolCheck": FeatureSupport("reader-writer", True, False),
    "inCommitTimestamp": FeatureSupport("writer", True, False),
    "rowTracking": FeatureSupport("writer", True, False),
    "domainMetadata": FeatureSupport("writer", True, False),
    "clustering": FeatureSupport("writer", True, False),
    "icebergCompatV1": FeatureSupport("writer", True, False),
    "icebergCompatV2": FeatureSupport("writer", True, False),
    "allowColumnDefaults": FeatureSupport("writer", True, False),
    "checkpointProtection": FeatureSupport("writer", True, False),
    "variantType": FeatureSupport("reader-writer", True, False, "unshredded, as a struct"),
    "variantType-preview": FeatureSupport("reader-writer", True, False),
    "geospatial": FeatureSupport("reader-writer", True, False, "geometry/geography as WKB"),
}

#: Legacy reader versions and what they imply (digest §5.1).
LEGACY_READER_FEATURES: Mapping[int, tuple[str, ...]] = {1: (), 2: ("columnMapping",)}
#: Legacy writer versions and the features they imply.
_WRITER_VERSION_ADDS: tuple[tuple[str, ...], ...] = (
    (),  # 1
    ("appendOnly", "invariants"),  # 2
    ("checkConstraints",),  # 3
    ("changeDataFeed", "generatedColumns"),  # 4
    ("columnMapping",),  # 5
    ("identityColumns",),  # 6
)
LEGACY_WRITER_FEATURES: Mapping[int, tuple[str, ...]] = {
    v: tuple(f for adds in _WRITER_VERSION_ADDS[:v] for f in adds) for v in range(1, 7)
}


@dataclass(frozen=True)
class Protocol:
    """The table's ``protocol`` action."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @classmethod
    def from_action(cls, action: Mapping[str, Any]) -> Protocol:
        """Builds a Protocol from the JSON/Arrow form of a ``protocol`` action."""
        rf = action.get("readerFeatures")
        wf = action.get("writerFeatures")
        try:
            return cls(
                int(action["minReaderVersion"]),
                int(action["minWriterVersion"]),
                tuple(rf) if rf is not None else None,
                tuple(wf) if wf is not None else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed protocol action {dict(action)!r}") from exc

    def effective_reader_features(self) -> frozenset[str]:
        """Reader features in force: the list for version 3, else the legacy implication."""
        if self.min_reader_version == 3:
            return frozenset(self.reader_features or ())
        return frozenset(LEGACY_READER_FEATURES.get(self.min_reader_version, ()))

    def effective_writer_features(self) -> frozenset[str]:
        """Writer features in force: the list for version 7, else the legacy implication."""
        if self.min_writer_version == 7:
            return frozenset(self.writer_features or ())
        return frozenset(LEGACY_WRITER_FEATURES.get(self.min_writer_version, ()))

    def supports(self, feature: str) -> bool:
        """True when the protocol lists (or implies) ``feature`` for readers or writers."""
        return feature in self.effective_reader_features() or (
            feature in self.effective_writer_features()
        )

    def to_action(self) -> dict[str, Any]:
        """The JSON form of the action."""
        out: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            out["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            out["writerFeatures"] = list(self.writer_features)
        return out


def check_readable(protocol: Protocol) -> None:
    """Refuses a protocol lakequery cannot read, naming the version or feature at fault.

    Raises:
        UnsupportedFeatureError: an unknown reader version or an unsupported reader feature.
        ProtocolError: an illegal combination (reader 3 without writer 7, features listed
            with a legacy version).
    """
    rv, wv = protocol.min_reader_version, protocol.min_writer_version
    if rv not in (1, 2, 3):
        raise UnsupportedFeatureError(
            f"minReaderVersion={rv}", detail="lakequery reads reader versions 1, 2 and 3"
        )
    if rv == 3 and wv != 7:
        raise ProtocolError(f"reader version 3 requires writer version 7, found {wv}")
    if rv == 3 and protocol.reader_features is None:
        raise ProtocolError("reader version 3 without readerFeatures")
    for name in sorted(protocol.effective_reader_features()):
        support = FEATURES.get(name)
        if support is None or not support.read:
            raise UnsupportedFeatureError(name, operation="read")
