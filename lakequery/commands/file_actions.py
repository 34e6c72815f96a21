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


def add_actions(snapshot: Snapshot, files: pa.Table) -> list[dict[str, Any]]:
    """The ``add`` actions (JSON form) of rows of ``snapshot.files()``."""
    from lakequery.writer.partition_values import serialize_partition_values, uri_encode_path

    specs = snapshot.partition_column_specs()
    strings: list[tuple[str, list[str | None]]] = []
    if specs and files.num_rows:
        parts: Any = files.column("partition_values").combine_chunks()
        for logical, key, t in specs:
            strings.append((key, serialize_partition_values(parts.field(logical), t)))
    out = []
    for i, row in enumerate(files.to_pylist()):
        add: dict[str, Any] = {
            "path": uri_encode_path(row["path"]),
            "partitionValues": {key: values[i] for key, values in strings},
            "size": row["size"],
            "modificationTime": row["modification_time"],
            "dataChange": True,
        }
        optional = {
            "stats": row.get("stats"),
            "deletionVector": row.get("deletion_vector"),
            "baseRowId": row.get("base_row_id"),
            "defaultRowCommitVersion": row.get("default_row_commit_version"),
            "tags": dict(row["tags"]) if row.get("tags") else None,
        }
        add.update({k: v for k, v in optional.items() if v is not None})
        out.append(add)
    return out


def remove_actions(snapshot: Snapshot, files: pa.Table, now_ms: int) -> list[dict[str, Any]]:
    """Extended ``remove`` actions (digest §4.4) for rows of ``snapshot.files()``."""
    return [remove_of(add, now_ms) for add in add_actions(snapshot, files)]


def only_partition_columns(predicate: str, snapshot: Snapshot) -> bool:
    """Whether ``predicate`` refers to partition columns only (then it selects whole files)."""
    from lakequery.protocol.predicates import parse_predicate, referenced_columns

    parts = {c.lower() for c in snapshot.partition_columns}
    return all(p[0].lower() in parts for p in referenced_columns(parse_predicate(predicate)))


def partition_match(files: pa.Table, predicate: str) -> pa.Array[Any]:
    """Exact per-file truth of a partition-only predicate (NULL counts as no match)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from lakequery.protocol.predicates import bind, parse_predicate, to_pyarrow

    struct: Any = files.column("partition_values").combine_chunks()
    values = pa.Table.from_struct_array(struct)
    expr = to_pyarrow(bind(parse_predicate(predicate), values.schema))
    out: Any = ds.dataset(values).to_table(columns={"m": expr}).column("m").combine_chunks()
    result: pa.Array[Any] = pc.fill_null(out, False)  # type: ignore[arg-type]
    return result
