"""The options of the ``lakequery`` Spark data source, parsed and checked.

Spark hands a Python data source its options as strings in a case-insensitive map (the
keys arrive lower-cased), so names are matched case-insensitively and values are parsed
here: integers, booleans (``true``/``false``) and JSON objects (``storage_options``,
``configuration``, whose keys keep their case). An unknown option is an error naming it
rather than silently ignored: a misspelt ``versionAsOf`` would otherwise read the latest
version.

Example:
    >>> opts = read_options({"path": "/t", "versionasof": "3"})
    >>> opts.uri, opts.version
    ('/t', 3)
    >>> write_options({"path": "/t", "partitionBy": "a, b"}, overwrite=False).partition_by
    ('a', 'b')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakequery.writer.api import SchemaMode, WriteMode

#: The name the data source is registered under (``spark.read.format("lakequery")``).
SOURCE_NAME = "lakequery"

#: Default upper bound of the bytes one read task gets (Spark's own default for files).
DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024

#: Delta table properties a write may set as ``.option("delta.<name>", ...)``, by their
#: lower-cased key (Spark lower-cases option keys; the log needs the exact spelling).
#: Other properties go through the ``configuration`` JSON option, which keeps case.
TABLE_PROPERTIES: dict[str, str] = {
    key.lower(): key
    for key in (
        "delta.appendOnly",
        "delta.checkpointInterval",
        "delta.checkpointPolicy",
        "delta.checkpoint.writeStatsAsJson",
        "delta.checkpoint.writeStatsAsStruct",
        "delta.columnMapping.mode",
        "delta.dataSkippingNumIndexedCols",
        "delta.dataSkippingStatsColumns",
        "delta.deletedFileRetentionDuration",
        "delta.enableChangeDataFeed",
        "delta.enableDeletionVectors",
        "delta.enableExpiredLogCleanup",
        "delta.enableInCommitTimestamps",
        "delta.enableRowTracking",
        "delta.enableTypeWidening",
        "delta.isolationLevel",
        "delta.logRetentionDuration",
        "delta.parquet.compression.codec",
        "delta.setTransactionRetentionDuration",
        "delta.targetFileSize",
    )
}

_COMMON = ("path", "storage_options")
_READ = {
    name.lower(): name
    for name in (
        *_COMMON,
        "versionAsOf",
        "timestampAsOf",
        "readChangeFeed",
        "startingVersion",
        "endingVersion",
        "startingTimestamp",
        "endingTimestamp",
        "maxPartitionBytes",
    )
}
_WRITE = {
    name.lower(): name
    for name in (
        *_COMMON,
        "partitionBy",
        "replaceWhere",
        "mergeSchema",
        "overwriteSchema",
        "txnAppId",
        "txnVersion",
        "configuration",
        "targetFileSize",
    )
}


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _check_known(opts: Mapping[str, str], known: Mapping[str, str], what: str) -> None:
    unknown = sorted(
        k for k in opts if k not in known and not (what == "write" and k.startswith("delta."))
    )
    if unknown:
        raise ValueError(
            f"unknown option(s) {unknown} for a {SOURCE_NAME} {what} "
            f"(known: {', '.join(known.values())}; names are case-insensitive)"
        )


def _int(opts: Mapping[str, str], key: str, name: str) -> int | None:
    text = opts.get(key)
    if text is None or not text.strip():
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"option {name} must be an integer, not {text!r}") from None


def _bool(opts: Mapping[str, str], key: str, name: str) -> bool:
    text = (opts.get(key) or "false").strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"option {name} must be 'true' or 'false', not {opts.get(key)!r}")
    return text == "true"


def _json_object(opts: Mapping[str, str], key: str, name: str) -> dict[str, Any] | None:
    text = opts.get(key)
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"option {name} must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"option {name} must be a JSON object, not {type(value).__name__}")
    return value


def _path(opts: Mapping[str, str]) -> str:
    uri = (opts.get("path") or "").strip()
    if not uri:
        raise ValueError(
            f"the {SOURCE_NAME} data source needs the table URI: .load(uri) / .save(uri)"
        )
    return uri


@dataclass(frozen=True)
class ReadOptions:
    """What to read: a version of the table, or its change data feed.

    Attributes:
        uri: The table location (``load(uri)``).
        storage_options: s3fs arguments (``storage_options`` JSON option).
        version: ``versionAsOf``.
        timestamp: ``timestampAsOf`` (ISO-8601; naive times are UTC).
        change_feed: ``readChangeFeed``.
        starting_version: ``startingVersion`` (change feed).
        ending_version: ``endingVersion`` (change feed).
        starting_timestamp: ``startingTimestamp`` (change feed).
        ending_timestamp: ``endingTimestamp`` (change feed).
        max_partition_bytes: ``maxPartitionBytes``: upper bound of a read task's bytes.
    """

    uri: str
    storage_options: dict[str, Any] | None = None
    version: int | None = None
    timestamp: str | None = None
    change_feed: bool = False
    starting_version: int | None = None
    ending_version: int | None = None
    starting_timestamp: str | None = None
    ending_timestamp: str | None = None
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES


def read_options(options: Mapping[str, str]) -> ReadOptions:
    """Parses a read's options (see :class:`ReadOptions`).

    Raises:
        ValueError: An unknown option, a malformed value or a contradictory combination.
    """
    opts = _lowered(options)
    _check_known(opts, _READ, "read")
    out = ReadOptions(
        uri=_path(opts),
        storage_options=_json_object(opts, "storage_options", "storage_options"),
        version=_int(opts, "versionasof", "versionAsOf"),
        timestamp=(opts.get("timestampasof") or "").strip() or None,
        change_feed=_bool(opts, "readchangefeed", "readChangeFeed"),
        starting_version=_int(opts, "startingversion", "startingVersion"),
        ending_version=_int(opts, "endingversion", "endingVersion"),
        starting_timestamp=(opts.get("startingtimestamp") or "").strip() or None,
        ending_timestamp=(opts.get("endingtimestamp") or "").strip() or None,
        max_partition_bytes=_int(opts, "maxpartitionbytes", "maxPartitionBytes")
        or DEFAULT_MAX_PARTITION_BYTES,
    )
    if out.version is not None and out.timestamp is not None:
        raise ValueError("pass versionAsOf or timestampAsOf, not both")
    feed = (out.starting_version, out.ending_version, out.starting_timestamp, out.ending_timestamp)
    if out.change_feed:
        if out.version is not None or out.timestamp is not None:
            raise ValueError(
                "readChangeFeed takes startingVersion/startingTimestamp and "
                "endingVersion/endingTimestamp, not versionAsOf/timestampAsOf"
            )
        if out.starting_version is None and out.starting_timestamp is None:
            raise ValueError("readChangeFeed needs startingVersion or startingTimestamp")
    elif any(v is not None for v in feed):
        raise ValueError(
            "startingVersion/endingVersion/startingTimestamp/endingTimestamp need "
            "readChangeFeed=true"
        )
    if out.max_partition_bytes <= 0:
        raise ValueError("maxPartitionBytes must be positive")
    return out


@dataclass(frozen=True)
class WriteOptions:
    """A write's options, in :func:`lakequery.write`'s terms.

    Attributes:
        uri: The table location (``save(uri)``).
        mode: ``append`` or ``overwrite`` (the only modes Spark lets a Python data
            source use).
        partition_by: ``partitionBy`` (comma-separated).
        predicate: ``replaceWhere``.
        schema_mode: ``merge`` (``mergeSchema``) or ``overwrite`` (``overwriteSchema``).
        configuration: table properties: the ``configuration`` JSON option plus the
            ``delta.*`` options of :data:`TABLE_PROPERTIES`.
        target_file_size: ``targetFileSize`` (bytes).
        storage_options: s3fs arguments (``storage_options`` JSON option).
        app_id: ``txnAppId``.
        app_version: ``txnVersion``.
    """

    uri: str
    mode: WriteMode
    partition_by: tuple[str, ...] | None = None
    predicate: str | None = None
    schema_mode: SchemaMode | None = None
    configuration: dict[str, str] | None = None
    target_file_size: int | None = None
    storage_options: dict[str, Any] | None = None
    app_id: str | None = None
    app_version: int | None = None


def _configuration(opts: Mapping[str, str]) -> dict[str, str] | None:
    config = {
        str(k): str(v)
        for k, v in (_json_object(opts, "configuration", "configuration") or {}).items()
    }
    for key, value in opts.items():
        if not key.startswith("delta."):
            continue
        name = TABLE_PROPERTIES.get(key)
        if name is None:
            raise ValueError(
                f"option {key!r}: Spark lower-cases option names, so only these table "
                f"properties can be options: {sorted(TABLE_PROPERTIES.values())}; pass "
                "others in the 'configuration' option as a JSON object"
            )
        config[name] = value
    return config or None


def write_options(options: Mapping[str, str], *, overwrite: bool) -> WriteOptions:
    """Parses a write's options (see :class:`WriteOptions`).

    Raises:
        ValueError: An unknown option, a malformed value or a contradictory combination.
    """
    opts = _lowered(options)
    _check_known(opts, _WRITE, "write")
    mode: WriteMode = "overwrite" if overwrite else "append"
    parts = opts.get("partitionby")
    partition_by = (
        tuple(p.strip() for p in parts.split(",") if p.strip()) if parts is not None else None
    )
    merge = _bool(opts, "mergeschema", "mergeSchema")
    predicate = (opts.get("replacewhere") or "").strip() or None
    # as in Delta, overwriteSchema has no effect beside replaceWhere (the kept rows keep
    # the schema), and wins over mergeSchema otherwise
    replace_schema = _bool(opts, "overwriteschema", "overwriteSchema") and predicate is None
    schema_mode: SchemaMode | None = None
    if replace_schema and overwrite:
        schema_mode = "overwrite"
    elif replace_schema:
        raise ValueError("overwriteSchema=true needs mode('overwrite')")
    elif merge:
        schema_mode = "merge"
    if predicate is not None and not overwrite:
        raise ValueError("replaceWhere needs mode('overwrite')")
    app_id = (opts.get("txnappid") or "").strip() or None
    app_version = _int(opts, "txnversion", "txnVersion")
    if (app_id is None) != (app_version is None):
        raise ValueError("pass txnAppId and txnVersion together")
    return WriteOptions(
        uri=_path(opts),
        mode=mode,
        partition_by=partition_by,
        predicate=predicate,
        schema_mode=schema_mode,
        configuration=_configuration(opts),
        target_file_size=_int(opts, "targetfilesize", "targetFileSize"),
        storage_options=_json_object(opts, "storage_options", "storage_options"),
        app_id=app_id,
        app_version=app_version,
    )


__all__ = [
    "DEFAULT_MAX_PARTITION_BYTES",
    "SOURCE_NAME",
    "TABLE_PROPERTIES",
    "ReadOptions",
    "WriteOptions",
    "read_options",
    "write_options",
]
