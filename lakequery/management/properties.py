"""SET / UNSET TBLPROPERTIES (planner, pure), the one place table properties change.

A property that turns a table feature on (``delta.enableChangeDataFeed``,
``delta.enableDeletionVectors``, ``delta.enableRowTracking``,
``delta.enableInCommitTimestamps``, ``delta.enableTypeWidening``, ``delta.appendOnly``,
``delta.checkpointPolicy=v2``, ``delta.columnMapping.mode=name``) upgrades the protocol
in the same commit, adding only the features the new configuration uses (digest §5.2);
``delta.feature.<name>=supported`` adds a feature without turning it on and is not
stored, as in Spark.

Decisions (the issue leaves them open):

* Unknown ``delta.*`` keys are refused (a typo would otherwise be stored and silently
  do nothing) unless ``raise_if_not_exists=False``, deltalake's switch; other keys are
  user properties and stored as given.
* Keys the protocol reserves for writers (``delta.columnMapping.maxColumnId``, the row
  tracking column names, the in-commit-timestamp enablement keys,
  ``delta.rowTrackingSuspended``) are refused, as are ``delta.constraints.*`` (use
  ``add_constraint``/``drop_constraint``, which check the rows) and the IcebergCompat,
  UniForm and variant-shredding switches lakequery cannot honour when writing.
* Boolean, interval, integer and enumerated values are validated before anything is
  committed.
* Enabling row tracking on a table whose files lack ``baseRowId`` backfills them: the
  same commit re-adds those files (``dataChange=false``), which assigns their row ids.
  The commit conflicts with concurrent appends (whose files would lack row ids) and is
  planned again.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> from lakequery.management.change import commit_change
    >>> uri = "memory://properties-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1]}), configuration={"delta.enableDeletionVectors": "false"})
    >>> dt = lq.DeltaTable(uri)
    >>> r = commit_change(dt, lambda s: plan_properties(s, {"delta.enableChangeDataFeed": "true"}))
    >>> p = dt.snapshot().protocol
    >>> "changeDataFeed" in r.features_added, p.min_reader_version, p.min_writer_version
    (True, 1, 4)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from lakequery.errors import AlterTableError
from lakequery.management.change import AlterChange
from lakequery.management.columns import MODE_KEY, with_name_mapping
from lakequery.protocol.features import FEATURES, table_features_in_use, upgraded_protocol
from lakequery.protocol.properties import (
    BOOLEAN_PROPERTIES,
    CHOICE_PROPERTIES,
    INTEGER_PROPERTIES,
    INTERVAL_PROPERTIES,
    SIZE_PROPERTIES,
    property_value_problem,
)
from lakequery.protocol.row_tracking_enablement import (
    ENABLE_KEY as ROW_TRACKING_KEY,
)
from lakequery.protocol.row_tracking_enablement import (
    ROW_COMMIT_VERSION_COLUMN_KEY,
    ROW_ID_COLUMN_KEY,
    files_to_backfill,
    with_row_tracking_columns,
)
from lakequery.protocol.schema import StructType, schema_to_json
from lakequery.snapshot import Snapshot

FEATURE_PREFIX = "delta.feature."
CONSTRAINT_PREFIX = "delta.constraints."

_FREE = frozenset({"delta.dataSkippingStatsColumns", "delta.parquet.format.version"})
#: Every user-settable ``delta.*`` key lakequery knows (digest §18).
KNOWN_PROPERTIES = (
    BOOLEAN_PROPERTIES
    | INTERVAL_PROPERTIES
    | INTEGER_PROPERTIES
    | SIZE_PROPERTIES
    | frozenset(CHOICE_PROPERTIES)
    | _FREE
)
#: Keys only writers set.
_RESERVED = frozenset(
    {
        "delta.columnMapping.maxColumnId",
        ROW_ID_COLUMN_KEY,
        ROW_COMMIT_VERSION_COLUMN_KEY,
        "delta.rowTrackingSuspended",
        "delta.inCommitTimestampEnablementVersion",
        "delta.inCommitTimestampEnablementTimestamp",
        "delta.requireCheckpointProtectionBeforeVersion",
        "delta.minReaderVersion",
        "delta.minWriterVersion",
    }
)
#: Switches of features lakequery cannot write under.
_UNSUPPORTED = frozenset(
    {
        "delta.enableIcebergCompatV1",
        "delta.enableIcebergCompatV2",
        "delta.enableIcebergCompatV3",
        "delta.universalFormat.enabledFormats",
        "delta.enableVariantShredding",
        "delta.enableMaterializePartitionColumnsFeature",
    }
)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def canonical_feature(name: str) -> str:
    """The protocol name of a table feature, from it or deltalake's spelling
    (``"ChangeDataFeed"``, ``"TimestampWithoutTimezone"``), case-insensitively.

    Example:
        >>> canonical_feature("DeletionVectors"), canonical_feature("timestampwithouttimezone")
        ('deletionVectors', 'timestampNtz')
    """
    lowered = name.strip().lower()
    if lowered == "timestampwithouttimezone":
        return "timestampNtz"
    for known in FEATURES:
        if known.lower() == lowered:
            return known
    return name.strip()


def plan_properties(
    snapshot: Snapshot,
    set_properties: Mapping[str, Any] | None = None,
    unset: Iterable[str] = (),
    *,
    add_features: Iterable[str] = (),
    raise_if_not_exists: bool = True,
    operation: str | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> AlterChange:
    """SET TBLPROPERTIES ``set_properties`` / UNSET TBLPROPERTIES ``unset``, and the
    protocol the result needs (plus ``add_features``, supported but not turned on).

    Raises:
        AlterTableError: a key or value refused (see the module doc), or a key to unset
            that is not set (with ``raise_if_not_exists``).
        UnsupportedFeatureError: a feature lakequery cannot write under.
    """
    to_set = {str(k): _text(v) for k, v in (set_properties or {}).items()}
    to_unset = [str(k) for k in unset]
    op = operation or ("UNSET TBLPROPERTIES" if to_unset and not to_set else "SET TBLPROPERTIES")
    uri = snapshot.table_uri

    def fail(reason: str) -> AlterTableError:
        return AlterTableError(uri, op, reason)

    meta = snapshot.metadata
    config = dict(meta.configuration)
    features = {canonical_feature(f) for f in add_features}
    for key in to_unset:
        if key.lower().startswith(CONSTRAINT_PREFIX):
            raise fail(f"{key!r} is a constraint: use drop_constraint")
        if key in _RESERVED:
            raise fail(f"{key!r} is maintained by writers and cannot be unset")
        if key == MODE_KEY and snapshot.column_mapping_mode != "none":
            raise fail("column mapping cannot be turned off (files use physical names)")
        if key not in config:
            if raise_if_not_exists:
                raise fail(f"property {key!r} is not set (pass raise_if_not_exists=False)")
            continue
        del config[key]
    for key, value in to_set.items():
        if key.startswith(FEATURE_PREFIX):
            if value.strip().lower() not in ("supported", "enabled"):
                raise fail(f"{key} takes 'supported', not {value!r}")
            features.add(canonical_feature(key.removeprefix(FEATURE_PREFIX)))
            continue
        if key.lower().startswith(CONSTRAINT_PREFIX):
            raise fail(f"{key!r} is a constraint: use add_constraint (it checks the rows)")
        if key in _RESERVED:
            raise fail(f"{key!r} is maintained by writers and cannot be set")
        if key == "delta.enableChangeDataCapture":
            raise fail(f"{key!r} is a legacy alias: set delta.enableChangeDataFeed")
        if key in _UNSUPPORTED:
            raise fail(f"{key!r} needs a table feature lakequery cannot write under")
        if key.startswith("delta.") and key not in KNOWN_PROPERTIES and raise_if_not_exists:
            raise fail(
                f"unknown table property {key!r} (known delta.* keys: digest §18; pass "
                "raise_if_not_exists=False to store it anyway)"
            )
        problem = property_value_problem(key, value)
        if problem:
            raise fail(problem)
        config[key] = value
    for name in sorted(features):
        if name not in FEATURES:
            raise fail(f"unknown table feature {name!r}")
    if "clustering" in features and meta.partition_columns:
        raise fail("a partitioned table cannot be clustered (digest §14)")
    schema = meta.schema
    wanted_mode = (config.get(MODE_KEY) or "none").strip().lower()
    if snapshot.column_mapping_mode == "none" and wanted_mode != "none":
        schema = with_name_mapping(schema, config, snapshot, op)
    elif wanted_mode != snapshot.column_mapping_mode and MODE_KEY in to_set:
        raise fail(
            f"column mapping mode {snapshot.column_mapping_mode!r} cannot change to {wanted_mode!r}"
        )
    backfill = files_to_backfill(snapshot, config)  # files without row ids get them now
    config = with_row_tracking_columns(config)
    turning_on_rows = (config.get(ROW_TRACKING_KEY) or "").lower() == "true" and (
        meta.configuration.get(ROW_TRACKING_KEY) or ""
    ).lower() != "true"
    _check_clustering_stats(snapshot, schema, config, fail)
    needed = table_features_in_use(schema, config) | features
    protocol = upgraded_protocol(snapshot.protocol, needed)
    new_meta = replace(meta, schema_string=schema_to_json(schema), configuration=config)
    params = dict(parameters) if parameters is not None else {}
    if parameters is None:
        if to_set:
            params["properties"] = to_set
        if to_unset:
            params["propertyKeys"] = to_unset
            params["ifExists"] = not raise_if_not_exists
    return AlterChange(
        op,
        params,
        new_meta,
        protocol,
        reads_whole_table=turning_on_rows and not snapshot.protocol.supports("rowTracking"),
        backfill=backfill,
    )


def _check_clustering_stats(
    snapshot: Snapshot,
    schema: StructType,
    config: dict[str, str],
    fail: Callable[[str], AlterTableError],
) -> None:
    """Refuses statistics settings that leave a clustering column without statistics
    (writers must collect them for every file, digest §14; Spark refuses too), as
    ``alter.cluster_by`` refuses such a column."""
    from lakequery.clustering.domain import clustering_stats_problem

    problem = clustering_stats_problem(snapshot, schema, config)
    if problem:
        raise fail(problem)


def plan_table_info(
    snapshot: Snapshot, *, name: str | None = None, description: str | None = None
) -> AlterChange:
    """The table's ``metaData.name`` / ``description`` (deltalake's ``set_table_name`` /
    ``set_table_description``); None leaves a field as it is."""
    op = "UPDATE TABLE METADATA"
    meta = snapshot.metadata
    for label, value in (("name", name), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise AlterTableError(snapshot.table_uri, op, f"{label} must be a string")
    new_meta = replace(
        meta,
        name=meta.name if name is None else name,
        description=meta.description if description is None else description,
    )
    params = {k: v for k, v in (("name", name), ("description", description)) if v is not None}
    return AlterChange(op, {"metadataUpdate": params}, new_meta)
