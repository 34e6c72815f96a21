"""Live files of a snapshot as log actions, and exact partition-only file selection.

``Snapshot.files()`` is an Arrow table with decoded paths and typed partition values; the
commands that retire or rewrite files need them back in the log's JSON form.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://file-actions-doc"
    >>> _ = lq.write(uri, pa.table({"id": [1, 2], "day": ["a", "b"]}), partition_by=["day"])
    >>> snap = lq.DeltaTable(uri).snapshot()
    >>> files = snap.files()
    >>> picked = files.filter(partition_match(files, "day = 'a'"))
    >>> [a["partitionValues"] for a in add_actions(snap, picked)]
    [{'day': 'a'}]
    >>> only_partition_columns("day = 'a'", snap), only_partition_columns("id = 1", snap)
    (True, False)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakequery.protocol.actions import remove_of

if TYPE_CHECKING:
    from lakequery.snapshot import Snapshot


def partition_strings(snapshot: Snapshot, files: pa.Table) -> list[dict[str, str | None]]:
    """The ``partitionValues`` map (physical keys, serialized values) of each file,
    serialized per partition column with Arrow (not per file)."""
    from lakequery.writer.partition_values import serialize_partition_values

    specs = snapshot.partition_column_specs()
    strings: list[tuple[str, list[str | None]]] = []
    if specs and files.num_rows:
        parts: Any = files.column("partition_values").combine_chunks()
        for logical, key, t in specs:
            strings.append((key, serialize_partition_values(parts.field(logical), t, logical)))
    return [{key: values[i] for key, values in strings} for i in range(files.num_rows)]


def add_actions(
    snapshot: Snapshot, files: pa.Table, *, data_change: bool = True
) -> list[dict[str, Any]]:
    """The ``add`` actions (JSON form) that bring back exactly these rows of
    ``snapshot.files()`` (DVs, stats, tags, row ids)."""
    from lakequery.writer.partition_values import uri_encode_path

    out = []
    for row, values in zip(files.to_pylist(), partition_strings(snapshot, files), strict=True):
        add: dict[str, Any] = {
            "path": uri_encode_path(row["path"]),
            "partitionValues": values,
            "size": row["size"],
            "modificationTime": row["modification_time"],
            "dataChange": data_change,
        }
        dv = row.get("deletion_vector")
        optional = {
            "stats": row.get("stats"),
            "deletionVector": {k: v for k, v in dv.items() if v is not None} if dv else None,
            "baseRowId": row.get("base_row_id"),
            "defaultRowCommitVersion": row.get("default_row_commit_version"),
            "tags": dict(row["tags"]) if row.get("tags") else None,
            "clusteringProvider": row.get("clustering_provider"),
        }
        add.update({k: v for k, v in optional.items() if v is not None})
        out.append(add)
    return out


def remove_actions(
    snapshot: Snapshot, files: pa.Table, now_ms: int, *, data_change: bool = True
) -> list[dict[str, Any]]:
    """Extended ``remove`` actions (digest §4.4) for rows of ``snapshot.files()``, keeping
    each file's DV and row ids."""
    out = [remove_of(add, now_ms) for add in add_actions(snapshot, files)]
    for remove in out:
        remove["dataChange"] = data_change
    return out


def only_partition_columns(predicate: str, snapshot: Snapshot) -> bool:
    """Whether ``predicate`` refers to partition columns only (then it selects whole files)."""
    from lakequery.protocol.predicates import parse_predicate, referenced_columns

    parts = {c.lower() for c in snapshot.partition_columns}
    return all(p[0].lower() in parts for p in referenced_columns(parse_predicate(predicate)))


def partition_match(files: pa.Table, predicate: str) -> pa.Array[Any]:
    """Exact per-file truth of a partition-only predicate (NULL counts as no match).

    DuckDB evaluates it over the typed partition values, as the DuckDB engine evaluates a
    scan's filter over the rows (pyarrow's datasets would import pandas on first use)."""
    import numpy as np

    from lakequery.arrow_buffers import bool_array, int64_array
    from lakequery.duckdb_databases import private_cursor
    from lakequery.protocol.predicates import bind, parse_predicate, to_duckdb_sql

    n = files.num_rows
    if n == 0:
        return bool_array(np.zeros(0, dtype=np.bool_))
    struct: Any = files.column("partition_values").combine_chunks()
    values = pa.Table.from_struct_array(struct)
    cond = to_duckdb_sql(bind(parse_predicate(predicate), values.schema))
    con = private_cursor(fixed_joins=False)  # a filter, no join; a cursor of its own
    try:
        # registered and queried in one statement (DuckDB 2.0's rel.query binds more)
        con.register("__lq_values", values.append_column("__lq_rid", int64_array(np.arange(n))))
        sql = f"SELECT COALESCE({cond}, FALSE) AS m FROM __lq_values ORDER BY __lq_rid"
        result: pa.Array[Any] = con.sql(sql).to_arrow_table().column("m").combine_chunks()
    finally:
        con.close()
    return result
