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


# --------------------------------------------------------------------------------------------
# end-to-end helpers: reading a table back with lakequery and with deltalake
# --------------------------------------------------------------------------------------------


def normalize(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> list[Any]:
    """Rows as sortable, comparable tuples of ``(column, value)`` (NaN made comparable).

    Order-insensitive: the result is sorted. ``columns`` restricts (and orders) the
    columns compared; by default each row's own keys, sorted.
    """
    import math

    out = []
    for row in rows:
        names = columns if columns is not None else sorted(row)
        items = []
        for name in names:
            value = row.get(name)
            if isinstance(value, float) and math.isnan(value):
                value = "<NaN>"
            items.append((name, value))
        out.append(tuple(items))
    return sorted(out, key=repr)


def lq_rows(uri: str, version: int | None = None) -> list[dict[str, Any]]:
    """The rows lakequery reads at ``version`` (latest by default)."""
    import lakequery

    snap = lakequery.DeltaTable(uri).snapshot(version=version)
    rows: list[dict[str, Any]] = snap.scan().to_arrow().to_pylist()
    return rows


def dl_table(uri: str, version: int | None = None) -> pa.Table:
    """The table the ``deltalake`` package reads at ``version``.

    ``to_pyarrow_table`` refuses reader features it does not know (deletion vectors)
    and ignores column mapping; the DataFusion-based ``QueryBuilder`` handles both, so
    it is used for tables with reader features or column mapping.
    """
    import deltalake

    dt = deltalake.DeltaTable(uri, version=version)
    proto = dt.protocol()
    mapping = dt.metadata().configuration.get("delta.columnMapping.mode", "none") != "none"
    if proto.min_reader_version >= 2 or mapping:
        query = deltalake.QueryBuilder().register("t", dt)
        return without_views(pa.table(query.execute("SELECT * FROM t")))
    return dt.to_pyarrow_table()


def without_views(table: pa.Table) -> pa.Table:
    """DataFusion answers with ``string_view``/``binary_view``; compare as plain types."""
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return table.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in table.schema]))


def dl_rows(uri: str, version: int | None = None) -> list[dict[str, Any]]:
    """The rows ``deltalake`` reads at ``version`` (latest by default)."""
    rows: list[dict[str, Any]] = dl_table(uri, version).to_pylist()
    return rows


def commit_actions(uri: str, version: int) -> list[dict[str, Any]]:
    """The actions of one commit file, in file order."""
    from pathlib import Path

    path = Path(uri) / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def copy_conformance_table(name: str, dest: Any) -> str:
    """Copies a table of the shared conformance set to ``dest/name``; returns the path."""

    from tablekit import copy_conformance_table

    return str(copy_conformance_table(name, dest))
