"""Typed access to table properties (``metaData.configuration``, digest §18).

Example:
    >>> parse_interval_ms("interval 1 week")
    604800000
    >>> TableProperties({"delta.checkpointInterval": "5"}).checkpoint_interval
    5
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from lakequery.errors import LakeQueryError

_UNITS_MS = {
    "nanosecond": 1e-6,
    "microsecond": 1e-3,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(-?\d+)\s+([a-z]+?)s?\s*$", re.IGNORECASE)


class PropertyError(LakeQueryError, ValueError):
    """A table property holds a value lakequery cannot interpret."""


def parse_interval_ms(text: str) -> int:
    """Parses ``interval <n> <unit>`` (unit singular or plural) into milliseconds."""
    m = _INTERVAL.match(text)
    if not m or m.group(2).lower() not in _UNITS_MS:
        raise PropertyError(f"cannot parse interval {text!r}")
    return int(int(m.group(1)) * _UNITS_MS[m.group(2).lower()])


def parse_bool(text: str | None, default: bool = False) -> bool:
    """Parses a boolean property case-insensitively."""
    if text is None:
        return default
    return text.strip().lower() == "true"


#: Boolean-valued properties (``true`` / ``false``, any case).
BOOLEAN_PROPERTIES = frozenset(
    {
        "delta.appendOnly",
        "delta.enableChangeDataFeed",
        "delta.enableDeletionVectors",
        "delta.enableRowTracking",
        "delta.enableInCommitTimestamps",
        "delta.enableTypeWidening",
        "delta.enableExpiredLogCleanup",
        "delta.enableFullRetentionRollback",
        "delta.checkpoint.writeStatsAsJson",
        "delta.checkpoint.writeStatsAsStruct",
        "delta.randomizeFilePrefixes",
        "delta.autoOptimize.optimizeWrite",
        "delta.autoOptimize.autoCompact",
        "delta.tuneFileSizesForRewrites",
    }
)
#: Interval-valued properties (``interval 7 days``).
INTERVAL_PROPERTIES = frozenset(
    {
        "delta.logRetentionDuration",
        "delta.deletedFileRetentionDuration",
        "delta.checkpointRetentionDuration",
        "delta.setTransactionRetentionDuration",
    }
)
#: Integer-valued properties (positive, but ``delta.dataSkippingNumIndexedCols``).
INTEGER_PROPERTIES = frozenset(
    {
        "delta.checkpointInterval",
        "delta.dataSkippingNumIndexedCols",
        "delta.dataSkippingStringPrefixLength",
        "delta.randomPrefixLength",
    }
)
#: Byte-size properties (``134217728``, ``128mb``).
SIZE_PROPERTIES = frozenset({"delta.targetFileSize"})
#: Enumerated properties and their values (any case).
CHOICE_PROPERTIES: Mapping[str, tuple[str, ...]] = {
    "delta.checkpointPolicy": ("classic", "v2"),
    "delta.isolationLevel": ("Serializable", "WriteSerializable"),
    "delta.columnMapping.mode": ("none", "name", "id"),
    "delta.parquet.compression.codec": (
        "uncompressed",
        "none",
        "snappy",
        "gzip",
        "lz4",
        "lz4_raw",
        "zstd",
    ),
}


def property_value_problem(key: str, value: str) -> str | None:
    """Why ``value`` is not a valid value of the table property ``key`` (None: valid, or a
    key whose values lakequery does not check). ALTER and new tables refuse such values
    before anything is committed.

    Example:
        >>> property_value_problem("delta.checkpointInterval", "abc")
        "delta.checkpointInterval takes an integer, not 'abc'"
    """
    if key in BOOLEAN_PROPERTIES and value.strip().lower() not in ("true", "false"):
        return f"{key} takes 'true' or 'false', not {value!r}"
    if key in INTERVAL_PROPERTIES:
        try:
            if parse_interval_ms(value) < 0:
                return f"{key} must not be negative, not {value!r}"
        except PropertyError:
            return f"{key} takes an interval such as 'interval 7 days', not {value!r}"
    if key in SIZE_PROPERTIES:
        try:
            if _parse_size(value) <= 0:
                return f"{key} must be positive, not {value!r}"
        except PropertyError:
            return f"{key} takes a size such as '134217728' or '128mb', not {value!r}"
    if key in INTEGER_PROPERTIES:
        try:
            number = int(value)
        except ValueError:
            return f"{key} takes an integer, not {value!r}"
        if number <= 0 and key != "delta.dataSkippingNumIndexedCols":
            return f"{key} must be positive, not {value!r}"
    choices = CHOICE_PROPERTIES.get(key)
    if choices is not None and value.strip().lower() not in [c.lower() for c in choices]:
        return f"{key} takes one of {list(choices)}, not {value!r}"
    return None


@dataclass(frozen=True)
class TableProperties:
    """Typed view of a table's configuration map."""

    configuration: Mapping[str, str]

    def _get(self, key: str) -> str | None:
        return self.configuration.get(key)

    @property
    def checkpoint_interval(self) -> int:
        return int(self._get("delta.checkpointInterval") or 10)

    def retention_ms(self, key: str) -> int:
        """A retention VACUUM or log cleanup deletes by; a negative one (another writer's:
        lakequery refuses to set it, as Delta does) would put the cutoff in the future.

        Raises:
            PropertyError: the table holds a negative one.
        """
        ms = {
            "delta.deletedFileRetentionDuration": self.deleted_file_retention_ms,
            "delta.logRetentionDuration": self.log_retention_ms,
        }[key]
        if ms < 0:
            raise PropertyError(f"{key} must not be negative, not {self._get(key)!r}")
        return ms

    @property
    def deleted_file_retention_ms(self) -> int:
        return parse_interval_ms(
            self._get("delta.deletedFileRetentionDuration") or "interval 1 week"
        )

    @property
    def log_retention_ms(self) -> int:
        return parse_interval_ms(self._get("delta.logRetentionDuration") or "interval 30 days")

    @property
    def set_transaction_retention_ms(self) -> int | None:
        value = self._get("delta.setTransactionRetentionDuration")
        return parse_interval_ms(value) if value else None

    @property
    def column_mapping_mode(self) -> str:
        return (self._get("delta.columnMapping.mode") or "none").lower()

    @property
    def in_commit_timestamps(self) -> bool:
        return parse_bool(self._get("delta.enableInCommitTimestamps"))

    @property
    def ict_enablement_version(self) -> int | None:
        value = self._get("delta.inCommitTimestampEnablementVersion")
        return int(value) if value else None

    @property
    def ict_enablement_timestamp(self) -> int | None:
        value = self._get("delta.inCommitTimestampEnablementTimestamp")
        return int(value) if value else None

    @property
    def enable_deletion_vectors(self) -> bool:
        return parse_bool(self._get("delta.enableDeletionVectors"))

    @property
    def change_data_feed(self) -> bool:
        """``delta.enableChangeDataFeed`` (or its legacy name ``delta.enableChangeDataCapture``)."""
        return parse_bool(
            self._get("delta.enableChangeDataFeed") or self._get("delta.enableChangeDataCapture")
        )

    @property
    def string_prefix_length(self) -> int:
        return int(self._get("delta.dataSkippingStringPrefixLength") or 32)

    @property
    def checkpoint_write_stats_as_json(self) -> bool:
        """``delta.checkpoint.writeStatsAsJson`` (default true): ``add.stats`` in checkpoints."""
        return parse_bool(self._get("delta.checkpoint.writeStatsAsJson"), default=True)

    @property
    def checkpoint_write_stats_as_struct(self) -> bool:
        """``delta.checkpoint.writeStatsAsStruct``: ``stats_parsed`` and
        ``partitionValues_parsed`` in checkpoints. lakequery defaults to true, like the
        reference implementation (the protocol text says false, digest §19.3)."""
        return parse_bool(self._get("delta.checkpoint.writeStatsAsStruct"), default=True)

    @property
    def checkpoint_policy(self) -> str:
        """``delta.checkpointPolicy``: ``classic`` (default) or ``v2``."""
        return (self._get("delta.checkpointPolicy") or "classic").strip().lower()

    @property
    def num_indexed_cols(self) -> int:
        """``delta.dataSkippingNumIndexedCols``: leaf columns with statistics (-1: all)."""
        return int(self._get("delta.dataSkippingNumIndexedCols") or 32)

    @property
    def stats_columns(self) -> tuple[tuple[str, ...], ...] | None:
        """``delta.dataSkippingStatsColumns`` as column paths (None when unset).

        Names are comma separated; a name is a dotted path whose parts may be backtick
        quoted (a doubled backtick stands for one backtick).

        Example:
            >>> TableProperties({"delta.dataSkippingStatsColumns": "a, `b.c`.d"}).stats_columns
            (('a',), ('b.c', 'd'))
        """
        value = self._get("delta.dataSkippingStatsColumns")
        if value is None:
            return None
        return tuple(p for p in _split_column_list(value) if p)

    @property
    def target_file_size(self) -> int | None:
        """``delta.targetFileSize`` in bytes (None when unset)."""
        value = self._get("delta.targetFileSize")
        return _parse_size(value) if value else None

    @property
    def compression_codec(self) -> str | None:
        """``delta.parquet.compression.codec`` lower-cased (None when unset)."""
        value = self._get("delta.parquet.compression.codec")
        return value.strip().lower() if value and value.strip() else None

    @property
    def append_only(self) -> bool:
        return parse_bool(self._get("delta.appendOnly"))

    @property
    def isolation_level(self) -> str:
        """``delta.isolationLevel``; lakequery's default is ``WriteSerializable`` (digest
        §17.2 leaves it open; it is what real logs mostly record and lets blind appends
        run beside DML)."""
        return self._get("delta.isolationLevel") or "WriteSerializable"


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _parse_size(text: str) -> int:
    """Parses a byte size such as ``104857600``, ``128mb`` or ``1g``."""
    m = _SIZE.match(text)
    if not m:
        raise PropertyError(f"cannot parse size {text!r}")
    unit = (m.group(2) or "").lower()[:1]
    return int(m.group(1)) * _SIZE_UNITS[unit if unit != "b" else ""]


def _split_column_list(text: str) -> list[tuple[str, ...]]:
    """Splits ``a, `b.c`.d`` into ``[("a",), ("b.c", "d")]`` (backticks quote)."""
    out: list[tuple[str, ...]] = []
    parts: list[str] = []
    cur: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and text[i + 1 : i + 2] == "`":
                cur.append("`")
                i += 1
            else:
                quoted = not quoted
        elif not quoted and ch in ".,":
            parts.append("".join(cur).strip())
            cur = []
            if ch == ",":
                out.append(tuple(parts))
                parts = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur).strip())
    out.append(tuple(parts))
    return [p for p in out if any(p)]
