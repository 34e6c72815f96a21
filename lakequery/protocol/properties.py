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


@dataclass(frozen=True)
class TableProperties:
    """Typed view of a table's configuration map."""

    configuration: Mapping[str, str]

    def _get(self, key: str) -> str | None:
        return self.configuration.get(key)

    @property
    def checkpoint_interval(self) -> int:
        return int(self._get("delta.checkpointInterval") or 10)

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
    def string_prefix_length(self) -> int:
        return int(self._get("delta.dataSkippingStringPrefixLength") or 32)
