"""``add`` / ``remove`` actions (JSON form) for rows of :meth:`Snapshot.files`.

Commands that move existing files between versions (OPTIMIZE removes them, RESTORE
re-adds them) build their actions here, vectorised per partition column.

Example:
    >>> import lakequery as lq
    >>> snap = lq.DeltaTable(lq.demo.example_table()).snapshot()
    >>> removes = remove_actions(snap, snap.files(), now_ms=0, data_change=False)
    >>> removes[0]["dataChange"], sorted(removes[0]["partitionValues"])
    (False, ['day'])
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakequery.snapshot import Snapshot
from lakequery.writer.partition_values import serialize_partition_values, uri_encode_path


def _partition_strings(snapshot: Snapshot, files: pa.Table) -> list[tuple[str, list[str | None]]]:
    specs = snapshot.partition_column_specs()
    out: list[tuple[str, list[str | None]]] = []
    if specs and files.num_rows:
        parts: Any = files.column("partition_values").combine_chunks()
        for logical, key, t in specs:
            out.append((key, serialize_partition_values(parts.field(logical), t)))
    elif specs:
        out = [(key, []) for _, key, _ in specs]
    return out


def partition_strings(snapshot: Snapshot, files: pa.Table) -> list[dict[str, str | None]]:
    """The ``partitionValues`` map (physical keys, serialized values) of each file."""
    strings = _partition_strings(snapshot, files)
    return [{key: values[i] for key, values in strings} for i in range(files.num_rows)]


def remove_actions(
    snapshot: Snapshot, files: pa.Table, *, now_ms: int, data_change: bool
) -> list[dict[str, Any]]:
    """Extended ``remove`` actions (digest §4.4), keeping each file's DV and row ids."""
    parts = partition_strings(snapshot, files)
    out = []
    for row, pv in zip(files.to_pylist(), parts, strict=True):
        remove: dict[str, Any] = {
            "path": uri_encode_path(row["path"]),
            "deletionTimestamp": now_ms,
            "dataChange": data_change,
            "extendedFileMetadata": True,
            "partitionValues": pv,
            "size": row["size"],
        }
        if row.get("stats"):
            remove["stats"] = row["stats"]
        if row.get("deletion_vector"):
            remove["deletionVector"] = row["deletion_vector"]
        if row.get("base_row_id") is not None:
            remove["baseRowId"] = row["base_row_id"]
        if row.get("default_row_commit_version") is not None:
            remove["defaultRowCommitVersion"] = row["default_row_commit_version"]
        out.append(remove)
    return out


def add_actions(snapshot: Snapshot, files: pa.Table, *, data_change: bool) -> list[dict[str, Any]]:
    """``add`` actions that bring back exactly these files (DVs, stats, tags, row ids)."""
    parts = partition_strings(snapshot, files)
    out = []
    for row, pv in zip(files.to_pylist(), parts, strict=True):
        add: dict[str, Any] = {
            "path": uri_encode_path(row["path"]),
            "partitionValues": pv,
            "size": row["size"],
            "modificationTime": row["modification_time"],
            "dataChange": data_change,
        }
        if row.get("stats"):
            add["stats"] = row["stats"]
        if row.get("deletion_vector"):
            add["deletionVector"] = {
                k: v for k, v in row["deletion_vector"].items() if v is not None
            }
        if row.get("tags"):
            add["tags"] = dict(row["tags"])
        if row.get("base_row_id") is not None:
            add["baseRowId"] = row["base_row_id"]
        if row.get("default_row_commit_version") is not None:
            add["defaultRowCommitVersion"] = row["default_row_commit_version"]
        out.append(add)
    return out


__all__ = ["add_actions", "partition_strings", "remove_actions"]
