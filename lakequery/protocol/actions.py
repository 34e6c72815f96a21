"""Column types of the log actions as lakequery reads them (digest §4, §7.3).

One canonical shape per action, written as DuckDB type strings: JSON commits are parsed
straight into it, and checkpoint Parquet columns are projected onto it (fields a
checkpoint lacks become NULL). Everything downstream sees only this shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

DV_FIELDS: tuple[tuple[str, str], ...] = (
    ("storageType", "VARCHAR"),
    ("pathOrInlineDv", "VARCHAR"),
    ("offset", "INTEGER"),
    ("sizeInBytes", "INTEGER"),
    ("cardinality", "BIGINT"),
)

_MAP = "MAP(VARCHAR, VARCHAR)"


def _struct(fields: tuple[tuple[str, str], ...]) -> str:
    return "STRUCT(" + ", ".join(f'"{n}" {t}' for n, t in fields) + ")"


DV_TYPE = _struct(DV_FIELDS)

ADD_FIELDS: tuple[tuple[str, str], ...] = (
    ("path", "VARCHAR"),
    ("partitionValues", _MAP),
    ("size", "BIGINT"),
    ("modificationTime", "BIGINT"),
    ("dataChange", "BOOLEAN"),
    ("stats", "VARCHAR"),
    ("tags", _MAP),
    ("deletionVector", DV_TYPE),
    ("baseRowId", "BIGINT"),
    ("defaultRowCommitVersion", "BIGINT"),
    ("clusteringProvider", "VARCHAR"),
)

REMOVE_FIELDS: tuple[tuple[str, str], ...] = (
    ("path", "VARCHAR"),
    ("deletionTimestamp", "BIGINT"),
    ("dataChange", "BOOLEAN"),
    ("extendedFileMetadata", "BOOLEAN"),
    ("partitionValues", _MAP),
    ("size", "BIGINT"),
    ("deletionVector", DV_TYPE),
    ("baseRowId", "BIGINT"),
    ("defaultRowCommitVersion", "BIGINT"),
)

METADATA_FIELDS: tuple[tuple[str, str], ...] = (
    ("id", "VARCHAR"),
    ("name", "VARCHAR"),
    ("description", "VARCHAR"),
    ("format", f"STRUCT(provider VARCHAR, options {_MAP})"),
    ("schemaString", "VARCHAR"),
    ("partitionColumns", "VARCHAR[]"),
    ("configuration", _MAP),
    ("createdTime", "BIGINT"),
)

PROTOCOL_FIELDS: tuple[tuple[str, str], ...] = (
    ("minReaderVersion", "INTEGER"),
    ("minWriterVersion", "INTEGER"),
    ("readerFeatures", "VARCHAR[]"),
    ("writerFeatures", "VARCHAR[]"),
)

TXN_FIELDS: tuple[tuple[str, str], ...] = (
    ("appId", "VARCHAR"),
    ("version", "BIGINT"),
    ("lastUpdated", "BIGINT"),
)

DOMAIN_FIELDS: tuple[tuple[str, str], ...] = (
    ("domain", "VARCHAR"),
    ("configuration", "VARCHAR"),
    ("removed", "BOOLEAN"),
)

SIDECAR_FIELDS: tuple[tuple[str, str], ...] = (
    ("path", "VARCHAR"),
    ("sizeInBytes", "BIGINT"),
    ("modificationTime", "BIGINT"),
)

CHECKPOINT_METADATA_FIELDS: tuple[tuple[str, str], ...] = (("version", "BIGINT"),)

#: Action name -> its fields, in the order of the canonical relation's columns.
ACTIONS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "add": ADD_FIELDS,
    "remove": REMOVE_FIELDS,
    "metaData": METADATA_FIELDS,
    "protocol": PROTOCOL_FIELDS,
    "txn": TXN_FIELDS,
    "domainMetadata": DOMAIN_FIELDS,
    "checkpointMetadata": CHECKPOINT_METADATA_FIELDS,
    "sidecar": SIDECAR_FIELDS,
}

#: Non-file actions: small, fetched into Python after replay.
NON_FILE_ACTIONS = ("metaData", "protocol", "txn", "domainMetadata")


def action_type(name: str) -> str:
    """The DuckDB type of one action column."""
    return _struct(ACTIONS[name])


def _structure(fields: tuple[tuple[str, str], ...]) -> dict[str, object]:
    return {n: _structure(DV_FIELDS) if t == DV_TYPE else t for n, t in fields}


_SLIM_FIELDS = (("path", "VARCHAR"), ("deletionVector", DV_TYPE))


def json_structure(*, slim: bool = False) -> str:
    """The structure argument of DuckDB's ``from_json`` that parses one log line into the
    canonical action columns (unknown actions and fields are ignored). ``slim`` keeps only
    what identifies a file action: ``add``/``remove`` path and deletion vector."""
    if slim:
        return json.dumps({name: _structure(_SLIM_FIELDS) for name in ("add", "remove")})
    return json.dumps({name: _structure(fields) for name, fields in ACTIONS.items()})


def remove_of(add: Mapping[str, object], now_ms: int) -> dict[str, object]:
    """The extended ``remove`` action (digest §4.4) that retires a live ``add`` (JSON form).

    Example:
        >>> remove_of({"path": "a.parquet", "size": 3, "partitionValues": {},
        ...            "stats": '{"numRecords":1}'}, 5)["deletionTimestamp"]
        5
    """
    out: dict[str, object] = {
        "path": add["path"],
        "deletionTimestamp": now_ms,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": dict(add.get("partitionValues") or {}),  # type: ignore[call-overload]
        "size": add.get("size"),
    }
    for key in ("deletionVector", "baseRowId", "defaultRowCommitVersion", "stats", "tags"):
        if add.get(key) is not None:
            out[key] = add[key]
    return out


def total_records(adds: Iterable[Mapping[str, Any]]) -> int:
    """The sum of ``stats.numRecords`` over ``add`` actions (JSON form) that have stats."""
    return sum(int(json.loads(a["stats"]).get("numRecords") or 0) for a in adds if a.get("stats"))
