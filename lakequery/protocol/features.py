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
from typing import Any, NamedTuple

from lakequery.errors import ProtocolError, UnsupportedFeatureError
from lakequery.protocol.schema import StructType, iter_fields, primitive_types


class FeatureSupport(NamedTuple):
    """What lakequery does with one table feature."""

    kind: str  # "reader-writer" | "writer"
    read: bool  # lakequery reads tables that list it
    write: bool  # lakequery writes tables that list it
    note: str = ""


#: Every table feature lakequery knows. ``read=True`` on a reader-writer feature means the
#: read path implements its reader obligations; writer-only features never block reads.
FEATURES: Mapping[str, FeatureSupport] = {
    "appendOnly": FeatureSupport("writer", True, True),
    "invariants": FeatureSupport("writer", True, True, "checked on every written row"),
    "checkConstraints": FeatureSupport("writer", True, True, "checked on every written row"),
    "changeDataFeed": FeatureSupport("writer", True, True),
    "generatedColumns": FeatureSupport("writer", True, True, "computed or checked"),
    "identityColumns": FeatureSupport("writer", True, True, "values generated, mark kept"),
    "columnMapping": FeatureSupport("reader-writer", True, True, "name and id modes"),
    "deletionVectors": FeatureSupport("reader-writer", True, True, "on-disk and inline DVs"),
    "timestampNtz": FeatureSupport("reader-writer", True, True),
    "v2Checkpoint": FeatureSupport("reader-writer", True, True, "UUID-named and sidecars"),
    "typeWidening": FeatureSupport("reader-writer", True, True, "older files cast up"),
    "typeWidening-preview": FeatureSupport("reader-writer", True, True),
    "vacuumProtocolCheck": FeatureSupport("reader-writer", True, True),
    "inCommitTimestamp": FeatureSupport("writer", True, True, "monotonic ICT in commitInfo"),
    "rowTracking": FeatureSupport("writer", True, True, "baseRowId and high-water mark"),
    "domainMetadata": FeatureSupport("writer", True, True, "domains preserved"),
    "clustering": FeatureSupport("writer", True, True, "delta.clustering domain, Hilbert OPTIMIZE"),
    "liquid": FeatureSupport("writer", True, True, "Databricks preview name of clustering"),
    "icebergCompatV1": FeatureSupport("writer", True, False, "writable while not enabled"),
    "icebergCompatV2": FeatureSupport("writer", True, False, "writable while not enabled"),
    "allowColumnDefaults": FeatureSupport("writer", True, False, "writable while no default"),
    "checkpointProtection": FeatureSupport("writer", True, True),
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

    def effective_features(self) -> frozenset[str]:
        """Every feature in force, for readers or writers."""
        return self.effective_reader_features() | self.effective_writer_features()

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
    if rv < 3 and protocol.reader_features:  # (an empty list says nothing: tolerated)
        raise ProtocolError(
            f"readerFeatures {sorted(protocol.reader_features)} with reader version {rv}: "
            "features are listed only under reader version 3"
        )
    for name in sorted(protocol.effective_reader_features()):
        support = FEATURES.get(name)
        if support is None or not support.read:
            raise UnsupportedFeatureError(name, operation="read")


# --- writing -------------------------------------------------------------------------------------

#: Features whose writer duties lakequery does not implement, but which only bind while
#: active (digest §5.2: a supported-but-inactive feature only obliges writers to check its
#: condition). Each maps to the test of that condition on (schema fields' metadata, config).
_INACTIVE_OK: Mapping[str, str] = {
    "icebergCompatV1": "delta.enableIcebergCompatV1=true",
    "icebergCompatV2": "delta.enableIcebergCompatV2=true",
    "allowColumnDefaults": "a column with a CURRENT_DEFAULT",
    "variantType": "a variant column",
    "variantType-preview": "a variant column",
    "geospatial": "a geometry or geography column",
}


def _active(
    name: str,
    field_metadata: list[Mapping[str, Any]],
    type_names: set[str],
    configuration: Mapping[str, str],
) -> bool:
    if name in ("icebergCompatV1", "icebergCompatV2"):
        key = f"delta.enable{name[0].upper()}{name[1:]}"
        return (configuration.get(key) or "").strip().lower() == "true"
    if name == "allowColumnDefaults":
        return any("CURRENT_DEFAULT" in m for m in field_metadata)
    if name.startswith("variantType"):
        return "variant" in type_names
    if name == "geospatial":
        return any(t.startswith(("geometry", "geography")) for t in type_names)
    return True


def check_writable(
    protocol: Protocol,
    *,
    field_metadata: list[Mapping[str, Any]] = [],  # noqa: B006 - read only
    type_names: set[str] | frozenset[str] = frozenset(),
    configuration: Mapping[str, str] | None = None,
) -> None:
    """Refuses to write a table whose protocol lakequery cannot honour (digest §5.2: every
    reader AND writer feature must be implemented), naming the feature.

    Args:
        protocol: the table's protocol.
        field_metadata: the column metadata maps of every (nested) schema field.
        type_names: the primitive type names used by the schema.
        configuration: the table properties.

    Raises:
        UnsupportedFeatureError: a feature lakequery does not implement for writing.

    Example:
        >>> check_writable(Protocol(1, 2))
        >>> check_writable(Protocol(1, 7, None, ("clustering", "domainMetadata")))
        >>> check_writable(Protocol(1, 7, None, ("futureFeature",)))
        Traceback (most recent call last):
        ...
        lakequery.errors.UnsupportedFeatureError: table feature 'futureFeature' is not supported for write by lakequery
    """
    check_readable(protocol)
    wv = protocol.min_writer_version
    if wv not in range(1, 8):
        raise UnsupportedFeatureError(
            f"minWriterVersion={wv}", operation="write", detail="lakequery writes versions 1-7"
        )
    config = configuration or {}
    names = protocol.effective_features()
    for name in sorted(names):
        support = FEATURES.get(name)
        if support is not None and support.write:
            continue
        if name in _INACTIVE_OK and not _active(name, field_metadata, set(type_names), config):
            continue
        detail = f"the table uses it ({_INACTIVE_OK[name]})" if name in _INACTIVE_OK else ""
        raise UnsupportedFeatureError(name, operation="write", detail=detail)
    # Identity metadata binds writers even when the protocol omits the feature (tables
    # written by old reference-impl. versions): the writer honours it either way.


#: Table features lakequery may add to a new table, with the property that turns each on.
_ENABLING_PROPERTIES: Mapping[str, str] = {
    "delta.appendOnly": "appendOnly",
    "delta.enableChangeDataFeed": "changeDataFeed",
    "delta.enableDeletionVectors": "deletionVectors",
    "delta.enableInCommitTimestamps": "inCommitTimestamp",
    "delta.enableRowTracking": "rowTracking",
    "delta.enableTypeWidening": "typeWidening",
}
#: Features that are legacy (expressible without table features) and their writer version.
_LEGACY_WRITER_VERSION: Mapping[str, int] = {
    "appendOnly": 2,
    "invariants": 2,
    "checkConstraints": 3,
    "changeDataFeed": 4,
    "generatedColumns": 4,
    "columnMapping": 5,
    "identityColumns": 6,
}
_READER_WRITER = frozenset(n for n, s in FEATURES.items() if s.kind == "reader-writer")
_DEPENDS: Mapping[str, tuple[str, ...]] = {
    "rowTracking": ("domainMetadata",),
    "clustering": ("domainMetadata",),
}


def features_in_use(
    configuration: Mapping[str, str],
    *,
    field_metadata: list[Mapping[str, Any]] = [],  # noqa: B006 - read only
    type_names: set[str] | frozenset[str] = frozenset(),
) -> set[str]:
    """The table features a table with this schema and configuration needs (no more)."""
    used: set[str] = set()
    for key, feature in _ENABLING_PROPERTIES.items():
        if (configuration.get(key) or "").strip().lower() == "true":
            used.add(feature)
    if any(k.startswith("delta.constraints.") for k in configuration):
        used.add("checkConstraints")
    if (configuration.get("delta.columnMapping.mode") or "none").lower() != "none":
        used.add("columnMapping")
    if (configuration.get("delta.checkpointPolicy") or "classic").lower() == "v2":
        used.add("v2Checkpoint")
    if any("delta.invariants" in m for m in field_metadata):
        used.add("invariants")
    if any("delta.generationExpression" in m for m in field_metadata):
        used.add("generatedColumns")
    if any("delta.identity.start" in m for m in field_metadata):
        used.add("identityColumns")
    if "timestamp_ntz" in type_names:
        used.add("timestampNtz")
    for key, value in configuration.items():  # delta.feature.<name> = supported
        if key.startswith("delta.feature.") and value.strip().lower() in ("supported", "enabled"):
            used.add(key.removeprefix("delta.feature."))
    for feature in list(used):
        used.update(_DEPENDS.get(feature, ()))
    return used


def protocol_for(features: set[str]) -> Protocol:
    """The smallest protocol that supports ``features``: legacy versions when they
    suffice, table features (reader 3 only for reader-writer features) otherwise.

    Example:
        >>> protocol_for(set())
        Protocol(min_reader_version=1, min_writer_version=1, reader_features=None, writer_features=None)
        >>> protocol_for({"checkConstraints"}).min_writer_version
        3
        >>> p = protocol_for({"deletionVectors"})
        >>> p.min_reader_version, p.reader_features, p.writer_features
        (3, ('deletionVectors',), ('deletionVectors',))
    """
    for name in features:
        support = FEATURES.get(name)
        if support is None or not support.write:
            raise UnsupportedFeatureError(name, operation="write")
    if all(f in _LEGACY_WRITER_VERSION for f in features):
        writer = max((_LEGACY_WRITER_VERSION[f] for f in features), default=1)
        # A legacy writer version implies every feature below it; that is not inflation
        # of duties lakequery cannot meet (all legacy features are implemented).
        reader = 2 if "columnMapping" in features else 1
        return Protocol(reader, writer)
    reader_features = tuple(sorted(f for f in features if f in _READER_WRITER))
    writer_features = tuple(sorted(features))
    if reader_features:
        return Protocol(3, 7, reader_features, writer_features)
    if "columnMapping" in features:
        return Protocol(2, 7, None, writer_features)
    return Protocol(1, 7, None, writer_features)


def upgraded_protocol(current: Protocol, needed: set[str]) -> Protocol | None:
    """The protocol ``current`` with the features ``needed`` added, and the features they
    depend on (``clustering`` and ``rowTracking`` need ``domainMetadata``), or None when
    it already supports them all. Features the old versions imply are kept (digest
    §5.2), and neither version ever goes down.

    Example:
        >>> upgraded_protocol(Protocol(1, 2), {"appendOnly"}) is None
        True
        >>> preview = Protocol(3, 7, ("typeWidening-preview",), ("typeWidening-preview",))
        >>> upgraded_protocol(preview, {"typeWidening"}) is None
        True
        >>> upgraded_protocol(Protocol(1, 2), {"changeDataFeed"})
        Protocol(min_reader_version=1, min_writer_version=4, reader_features=None, writer_features=None)
        >>> p = upgraded_protocol(Protocol(1, 2), {"deletionVectors"})
        >>> p.min_reader_version, p.reader_features, p.writer_features
        (3, ('deletionVectors',), ('appendOnly', 'deletionVectors', 'invariants'))
        >>> upgraded_protocol(Protocol(1, 2), {"clustering"}).writer_features
        ('appendOnly', 'clustering', 'domainMetadata', 'invariants')
        >>> upgraded_protocol(Protocol(1, 7, None, ("invariants",)), {"appendOnly"})
        Protocol(min_reader_version=1, min_writer_version=7, reader_features=None, writer_features=('appendOnly', 'invariants'))
    """
    needed = set(needed).union(*(_DEPENDS.get(f, ()) for f in needed))
    # A preview spelling (``typeWidening-preview``) has the same semantics (digest §5.2).
    missing = {
        f for f in needed if not current.supports(f) and not current.supports(f"{f}-preview")
    }
    if not missing:
        return None
    features = set(current.effective_features()) | missing
    proto = protocol_for(features)
    reader = max(proto.min_reader_version, current.min_reader_version)
    writer = max(proto.min_writer_version, current.min_writer_version)
    if writer < 7:
        return Protocol(reader, writer)
    # table features (the current protocol's, or the new ones'): every feature is listed,
    # also when legacy versions would have sufficed for them (digest §5.2)
    readers = tuple(sorted(f for f in features if f in _READER_WRITER)) if reader == 3 else None
    return Protocol(reader, writer, readers, tuple(sorted(features)))


def _schema_usage(schema: StructType) -> tuple[list[Mapping[str, Any]], set[str]]:
    """The metadata maps and primitive type names of every (nested) field."""
    fields = [f for _, f in iter_fields(schema)]
    # array elements and map keys/values too: array<timestamp_ntz> needs timestampNtz
    return [f.metadata for f in fields], {p.name for p in primitive_types(schema)}


def check_table_writable(
    protocol: Protocol, schema: StructType, configuration: Mapping[str, str]
) -> None:
    """:func:`check_writable` for a table with this schema and configuration."""
    metadata, names = _schema_usage(schema)
    check_writable(protocol, field_metadata=metadata, type_names=names, configuration=configuration)


def table_features_in_use(schema: StructType, configuration: Mapping[str, str]) -> set[str]:
    """:func:`features_in_use` for a table with this schema and configuration."""
    metadata, names = _schema_usage(schema)
    return features_in_use(configuration, field_metadata=metadata, type_names=names)
