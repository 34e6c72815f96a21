"""Helpers for the data file writer tests: table schemas, write states, metadata actions."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakequery.protocol.schema import from_arrow_schema, schema_to_json, type_to_json
from lakequery.writer.state import WriteState


def _with_mapping(t: Any, counter: list[int]) -> Any:
    if isinstance(t, dict) and t.get("type") == "struct":
        for f in t["fields"]:
            counter[0] += 1
            f["metadata"] = {
                **f.get("metadata", {}),
                "delta.columnMapping.id": counter[0],
                "delta.columnMapping.physicalName": f"col-{counter[0]}-{f['name']}",
            }
            f["type"] = _with_mapping(f["type"], counter)
    elif isinstance(t, dict) and t.get("type") == "array":
        t["elementType"] = _with_mapping(t["elementType"], counter)
    elif isinstance(t, dict) and t.get("type") == "map":
        t["valueType"] = _with_mapping(t["valueType"], counter)
    return t


def schema_json(
    schema: pa.Schema,
    *,
    mapping: bool = False,
    metadata: Mapping[str, Mapping[str, Any]] | None = None,
    not_null: Sequence[str] = (),
) -> str:
    """Delta schema JSON of an Arrow schema (optionally with column mapping metadata)."""
    doc = type_to_json(from_arrow_schema(schema))
    for f in doc["fields"]:
        f["metadata"] = dict((metadata or {}).get(f["name"], {}))
        if f["name"] in not_null:
            f["nullable"] = False
    if mapping:
        doc = _with_mapping(doc, [0])
    return json.dumps(doc)


def make_state(
    root: str,
    schema: pa.Schema | str,
    *,
    partition_by: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    mode: str = "none",
    **kwargs: Any,
) -> WriteState:
    text = schema if isinstance(schema, str) else schema_json(schema, mapping=mode != "none")
    return WriteState(
        root,
        text,
        partition_columns=tuple(partition_by),
        configuration=tuple(sorted((configuration or {}).items())),
        column_mapping_mode=mode,
        **kwargs,
    )


def metadata_for(state: WriteState) -> dict[str, Any]:
    return {
        "metaData": {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": state.schema_string,
            "partitionColumns": list(state.partition_columns),
            "configuration": state.properties(),
            "createdTime": 1_700_000_000_000,
        }
    }


def roundtrip_schema(schema: pa.Schema) -> str:
    return schema_to_json(from_arrow_schema(schema))
