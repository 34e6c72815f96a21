"""Enabling and dropping table features (planners, pure; digest §5.2).

``enable_feature`` turns a feature on: for features with a switch it sets the property
(``changeDataFeed`` -> ``delta.enableChangeDataFeed=true``, ``columnMapping`` ->
``delta.columnMapping.mode=name``, ``v2Checkpoint`` -> ``delta.checkpointPolicy=v2``...)
and upgrades the protocol in the same commit; features without a switch
(``domainMetadata``, ``vacuumProtocolCheck``, ``timestampNtz``...) are added to the
protocol. ``add_feature`` (deltalake's name) only adds protocol support, like Spark's
``delta.feature.<name>=supported``.

``drop_feature`` removes a *writer* feature from the protocol when the table no longer
uses it: ``appendOnly``, ``changeDataFeed``, ``checkConstraints``, ``invariants``,
``generatedColumns`` and ``inCommitTimestamp`` (whose enablement keys go too). A feature
still in use is refused with what to remove first (decision: lakequery does not turn a
feature off implicitly). Reader-writer features (deletion vectors, column mapping, type
widening, v2 checkpoints...) need the history truncation of Spark's ``DROP FEATURE ...
TRUNCATE HISTORY`` so that old readers never meet their traces; lakequery refuses those,
and the writer features whose removal needs data work (``rowTracking``,
``domainMetadata``, ``clustering``, ``identityColumns``...).

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> from lakequery.management.change import commit_change
    >>> uri = "memory://features-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1]}))
    >>> dt = lq.DeltaTable(uri)
    >>> commit_change(dt, lambda s: plan_enable_features(s, ["inCommitTimestamp"])).features_added
    ('inCommitTimestamp',)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from lakequery.errors import AlterTableError, UnsupportedFeatureError
from lakequery.management.change import AlterChange
from lakequery.management.properties import canonical_feature, plan_properties
from lakequery.protocol.features import FEATURES, Protocol, protocol_for
from lakequery.protocol.properties import parse_bool
from lakequery.protocol.schema import iter_fields
from lakequery.snapshot import Snapshot

#: Features with a switch: the property and value that turn each on.
ENABLING: Mapping[str, tuple[str, str]] = {
    "appendOnly": ("delta.appendOnly", "true"),
    "changeDataFeed": ("delta.enableChangeDataFeed", "true"),
    "deletionVectors": ("delta.enableDeletionVectors", "true"),
    "columnMapping": ("delta.columnMapping.mode", "name"),
    "rowTracking": ("delta.enableRowTracking", "true"),
    "inCommitTimestamp": ("delta.enableInCommitTimestamps", "true"),
    "typeWidening": ("delta.enableTypeWidening", "true"),
    "v2Checkpoint": ("delta.checkpointPolicy", "v2"),
}
_ICT_KEYS = (
    "delta.inCommitTimestampEnablementVersion",
    "delta.inCommitTimestampEnablementTimestamp",
)
#: Writer features ``drop_feature`` removes, each with the test of "still in use".
DROPPABLE = (
    "appendOnly",
    "changeDataFeed",
    "checkConstraints",
    "invariants",
    "generatedColumns",
    "inCommitTimestamp",
)


def _names(features: str | Iterable[str]) -> list[str]:
    items = [features] if isinstance(features, str) else list(features)
    return [canonical_feature(f) for f in items]


def plan_enable_features(snapshot: Snapshot, features: str | Iterable[str]) -> AlterChange:
    """Turns ``features`` on (switch property and protocol) in one commit.

    Raises:
        AlterTableError: an unknown feature, or one that cannot be enabled here (row
            tracking on files without row ids).
        UnsupportedFeatureError: a feature lakequery cannot write under.
    """
    names = _names(features)
    if not names:
        raise AlterTableError(snapshot.table_uri, "SET TBLPROPERTIES", "no features given")
    props = {ENABLING[n][0]: ENABLING[n][1] for n in names if n in ENABLING}
    if snapshot.column_mapping_mode != "none":  # on already ('id' mode stays 'id')
        props.pop(ENABLING["columnMapping"][0], None)
    rest = [n for n in names if n not in ENABLING]
    params = {"properties": {**props, **{f"delta.feature.{n}": "supported" for n in rest}}}
    return plan_properties(snapshot, props, add_features=rest, parameters=params)


def plan_add_features(snapshot: Snapshot, features: str | Iterable[str]) -> AlterChange:
    """Adds protocol support for ``features`` without turning them on."""
    names = _names(features)
    params = {"properties": {f"delta.feature.{n}": "supported" for n in names}}
    return plan_properties(snapshot, add_features=names, parameters=params)


def _in_use(snapshot: Snapshot, feature: str) -> str | None:
    """What still uses ``feature`` (None: nothing)."""
    config = snapshot.metadata.configuration
    if feature == "appendOnly" and parse_bool(config.get("delta.appendOnly")):
        return "delta.appendOnly=true (unset it first)"
    if feature == "changeDataFeed" and (
        parse_bool(config.get("delta.enableChangeDataFeed"))
        or parse_bool(config.get("delta.enableChangeDataCapture"))
    ):
        return "delta.enableChangeDataFeed=true (unset it first)"
    if feature == "inCommitTimestamp" and parse_bool(config.get("delta.enableInCommitTimestamps")):
        return "delta.enableInCommitTimestamps=true (unset it first)"
    if feature == "checkConstraints":
        names = sorted(k for k in config if k.lower().startswith("delta.constraints."))
        if names:
            return f"constraint(s) {names} (drop them first)"
    key = {"invariants": "delta.invariants", "generatedColumns": "delta.generationExpression"}
    if feature in key:
        cols = [
            ".".join(p)
            for p, f in iter_fields(snapshot.metadata.schema)
            if key[feature] in f.metadata
        ]
        if cols:
            return f"column(s) {cols} ({key[feature]})"
    return None


def _without(current: Protocol, feature: str) -> Protocol:
    """``current`` minus ``feature``: the legacy versions when they still say exactly
    what remains, else a table-features protocol listing it."""
    remaining = current.effective_features() - {feature}
    try:
        legacy = protocol_for(set(remaining))
    except UnsupportedFeatureError:  # e.g. an inactive identityColumns: keep listing it
        legacy = None
    if legacy is not None and not legacy.supports(feature):
        return legacy
    listed = tuple(sorted(remaining))
    readers = tuple(sorted(f for f in remaining if FEATURES[f].kind == "reader-writer"))
    if readers == ("columnMapping",) and current.min_reader_version == 2:
        return Protocol(2, 7, None, listed)  # reader 2 already says column mapping
    if readers:
        return Protocol(3, 7, readers, listed)
    return Protocol(2 if "columnMapping" in remaining else 1, 7, None, listed)


def plan_drop_feature(snapshot: Snapshot, feature: str) -> AlterChange:
    """DROP FEATURE ``feature`` (writer features only; see the module doc).

    Raises:
        AlterTableError: the protocol does not list it, the table still uses it, or
            lakequery cannot drop it.
    """
    op = "DROP FEATURE"
    name = canonical_feature(feature)

    def fail(reason: str) -> AlterTableError:
        return AlterTableError(snapshot.table_uri, op, f"feature {name!r}: {reason}")

    if name not in FEATURES:
        raise fail("unknown table feature")
    if not snapshot.protocol.supports(name):
        raise fail("the table's protocol does not list it")
    if FEATURES[name].kind == "reader-writer":
        raise fail(
            "a reader-writer feature can only be dropped with history truncation "
            "(Spark's ALTER TABLE DROP FEATURE ... TRUNCATE HISTORY), which lakequery does not do"
        )
    if name not in DROPPABLE:
        raise fail(f"lakequery drops only {list(DROPPABLE)}")
    use = _in_use(snapshot, name)
    if use is not None:
        raise fail(f"still in use: {use}")
    unset = [k for k in _ICT_KEYS if k in snapshot.metadata.configuration]
    change = plan_properties(
        snapshot,
        operation=op,
        parameters={"featureName": name, "truncateHistory": False},
    )
    if name == "inCommitTimestamp" and unset:
        config = {k: v for k, v in change.metadata.configuration.items() if k not in _ICT_KEYS}
        change = _with_config(change, config)
    return AlterChange(
        change.operation, change.parameters, change.metadata, _without(snapshot.protocol, name)
    )


def _with_config(change: AlterChange, config: dict[str, str]) -> AlterChange:
    return replace(change, metadata=replace(change.metadata, configuration=config))
