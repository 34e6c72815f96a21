"""``add`` actions as Arrow, and the function Spark's ``mapInArrow`` runs on executors.

Example:
    >>> adds = [{"path": "a.parquet", "partitionValues": {"p": None}, "size": 10,
    ...          "modificationTime": 0, "dataChange": True, "stats": "{}"}]
    >>> table = add_actions_to_arrow(adds)
    >>> table.schema == ADD_ACTION_SCHEMA
    True
    >>> add_actions_from_arrow(table) == adds
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakequery.writer.data_files import write_data_files
from lakequery.writer.state import WriteState

_STRING_MAP = pa.map_(pa.string(), pa.string())

#: Arrow schema of ``add`` actions (Spark ``mapInArrow`` output schema).
ADD_ACTION_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("partitionValues", _STRING_MAP),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("modificationTime", pa.int64(), nullable=False),
        pa.field("dataChange", pa.bool_(), nullable=False),
        pa.field("stats", pa.string()),
        pa.field("tags", _STRING_MAP),
    ]
)
_OPTIONAL = ("stats", "tags")


def add_actions_to_arrow(actions: Sequence[Mapping[str, Any]]) -> pa.Table:
    """``add`` actions (JSON dict form) as a table of :data:`ADD_ACTION_SCHEMA`.

    Example:
        >>> add_actions_to_arrow([]).num_rows
        0
    """
    rows = [{name: a.get(name) for name in ADD_ACTION_SCHEMA.names} for a in actions]
    return pa.Table.from_pylist(rows, schema=ADD_ACTION_SCHEMA)


def _as_dict(value: Any) -> dict[str, str | None] | None:
    if value is None:
        return None
    return dict(value)


def add_actions_from_arrow(
    data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch],
) -> list[dict[str, Any]]:
    """The JSON dict form of ``add`` actions held in Arrow (inverse of :func:`add_actions_to_arrow`).

    ``stats`` and ``tags`` are left out when null.

    Example:
        >>> t = add_actions_to_arrow([{"path": "x", "partitionValues": {}, "size": 1,
        ...     "modificationTime": 2, "dataChange": False, "tags": {"k": "v"}}])
        >>> add_actions_from_arrow(t.to_batches())[0]["tags"]
        {'k': 'v'}
    """
    batches = (
        data.to_batches()
        if isinstance(data, pa.Table)
        else ([data] if isinstance(data, pa.RecordBatch) else data)
    )
    out: list[dict[str, Any]] = []
    for batch in batches:
        for row in batch.to_pylist():
            action: dict[str, Any] = {
                "path": row["path"],
                "partitionValues": _as_dict(row.get("partitionValues")) or {},
                "size": row["size"],
                "modificationTime": row["modificationTime"],
                "dataChange": row["dataChange"],
            }
            for name in _OPTIONAL:
                value = row.get(name)
                if value is not None:
                    action[name] = _as_dict(value) if name == "tags" else value
            out.append(action)
    return out


def write_batches_to_arrow(
    batches: Iterable[pa.RecordBatch], state: WriteState
) -> Iterator[pa.RecordBatch]:
    """Writes batches as data files and yields their ``add`` actions as Arrow.

    This is the function Spark's ``mapInArrow`` calls on each partition (bind the state
    with :func:`functools.partial`; both pickle with the standard :mod:`pickle`).

    Yields:
        RecordBatches of :data:`ADD_ACTION_SCHEMA` (none when no rows were written).

    Example:
        >>> import functools, pickle
        >>> s = '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}'
        >>> fn = pickle.loads(pickle.dumps(functools.partial(
        ...     write_batches_to_arrow, state=WriteState("memory://wba-doc", s))))
        >>> [b.num_rows for b in fn(iter([pa.record_batch({"a": [1, 2]})]))]
        [1]
    """
    adds = write_data_files(batches, state)
    if adds:
        yield from add_actions_to_arrow(adds).to_batches()


__all__ = [
    "ADD_ACTION_SCHEMA",
    "add_actions_from_arrow",
    "add_actions_to_arrow",
    "write_batches_to_arrow",
]
