"""The table's ``metaData`` action as a value, with its parsed schema."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakequery.cached import cached_property
from lakequery.protocol.schema import StructType, parse_schema, to_arrow_schema


def _as_dict(value: Any) -> dict[str, str]:
    """DuckDB returns MAP values as dicts (or key/value lists in older versions)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        if set(value) == {"key", "value"} and isinstance(value["key"], list):
            return {str(k): v for k, v in zip(value["key"], value["value"], strict=True)}
        return {str(k): v for k, v in value.items()}
    return {str(k): v for k, v in value}


@dataclass(frozen=True)
class Metadata:
    """Table metadata: id, schema, partition columns and configuration (digest §4.1)."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"
    format_options: Mapping[str, str] = field(default_factory=dict)
    created_time: int | None = None

    @classmethod
    def from_action(cls, action: Mapping[str, Any]) -> Metadata:
        fmt = action.get("format") or {}
        return cls(
            id=str(action.get("id")),
            schema_string=str(action.get("schemaString")),
            partition_columns=tuple(action.get("partitionColumns") or ()),
            configuration=_as_dict(action.get("configuration")),
            name=action.get("name"),
            description=action.get("description"),
            format_provider=str(fmt.get("provider") or "parquet"),
            format_options=_as_dict(fmt.get("options")),
            created_time=action.get("createdTime"),
        )

    @cached_property
    def schema(self) -> StructType:
        """The Delta schema (logical names, column metadata kept)."""
        return parse_schema(self.schema_string)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The logical Arrow schema of the table."""
        return to_arrow_schema(self.schema)

    def to_action(self) -> dict[str, Any]:
        """The JSON form of the action."""
        out: dict[str, Any] = {
            "id": self.id,
            "format": {"provider": self.format_provider, "options": dict(self.format_options)},
            "schemaString": self.schema_string,
            "partitionColumns": list(self.partition_columns),
            "configuration": dict(self.configuration),
        }
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        if self.created_time is not None:
            out["createdTime"] = self.created_time
        return out
