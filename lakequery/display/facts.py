"""Figures about a set of data files, computed with Arrow kernels (no per-file Python).

The rich displays (:mod:`lakequery.display.html`) and the plots (:mod:`lakequery.plots`)
share these, so a notebook's table summary and its charts always agree.

Example:
    >>> import lakequery as lq
    >>> snap = lq.DeltaTable(lq.demo.example_table()).snapshot()
    >>> facts = file_facts(snap.files())
    >>> facts.num_files == snap.num_files, facts.total_bytes > 0
    (True, True)
    >>> partition_labels(snap.files(), snap.partition_columns)[0].as_py().startswith("day=")
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakequery.engines.deletion import dv_cardinalities

#: The label of the files of a table without partition columns.
UNPARTITIONED = "(all files)"


@dataclass(frozen=True)
class FileFacts:
    """Totals over a set of files (rows of :meth:`lakequery.Snapshot.files`).

    Attributes:
        num_files: how many files.
        total_bytes: their summed ``size``.
        physical_rows: summed ``num_records`` (None when a file has no statistics).
        files_with_dv: files carrying a deletion vector.
        deleted_rows: rows hidden by those deletion vectors.
    """

    num_files: int
    total_bytes: int
    physical_rows: int | None
    files_with_dv: int
    deleted_rows: int

    @property
    def live_rows(self) -> int | None:
        """Rows a reader sees: physical rows minus deleted rows."""
        if self.physical_rows is None:
            return None
        return self.physical_rows - self.deleted_rows


def file_facts(files: pa.Table) -> FileFacts:
    """Totals over ``files`` (rows of :meth:`lakequery.Snapshot.files` or a plan's files)."""
    n = files.num_rows
    if n == 0:
        return FileFacts(0, 0, 0, 0, 0)
    records = files.column("num_records")
    card = dv_cardinalities(files)
    has_dv: Any = pc.cast(pc.cast(card, pa.bool_()), pa.int64())  # nonzero -> 1
    return FileFacts(
        num_files=n,
        total_bytes=int(pc.sum(files.column("size")).as_py() or 0),
        physical_rows=None if records.null_count else int(pc.sum(records).as_py() or 0),
        files_with_dv=int(pc.sum(has_dv).as_py() or 0),
        deleted_rows=int(pc.sum(card).as_py() or 0),
    )


def partition_labels(files: pa.Table, partition_columns: Sequence[str]) -> pa.Array[Any]:
    """One ``col=value/col2=value2`` label per file (``(all files)`` when unpartitioned);
    a null value shows as ``null``, a string ``null`` (in any case) quoted as ``'null'``,
    and bytes in hex (``0x00ff``)."""
    if not partition_columns or "partition_values" not in files.column_names:
        return pa.array([UNPARTITIONED] * files.num_rows, pa.string())
    values: Any = files.column("partition_values").combine_chunks()
    parts: list[Any] = []
    for name in partition_columns:  # per column, not per file
        field: Any = pc.struct_field(values, name)
        if pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
            # (bytes need not be UTF-8 text; a display, not a hot path)
            text: Any = pa.array(
                [None if v is None else "0x" + v.hex() for v in field.to_pylist()], pa.string()
            )
        else:
            text = field.cast(pa.string())
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            named_null = pc.equal(pc.utf8_lower(text), pa.scalar("null"))
            text = pc.if_else(named_null, pc.binary_join_element_wise("'", text, "'", ""), text)
        text = pc.fill_null(text, pa.scalar("null"))
        parts.append(pc.binary_join_element_wise(f"{name}=", text, ""))
    if len(parts) == 1:
        first: pa.Array[Any] = parts[0]
        return first
    out: pa.Array[Any] = pc.binary_join_element_wise(*parts, "/")
    return out


def partition_summary(files: pa.Table, partition_columns: Sequence[str]) -> pa.Table:
    """Per partition: ``partition`` label, ``files``, ``bytes``, ``rows`` (physical) and
    ``deleted_rows``, sorted by label."""
    table = pa.table(
        {
            "partition": partition_labels(files, partition_columns),
            "size": files.column("size").cast(pa.int64()),
            "num_records": files.column("num_records").cast(pa.int64()),
            "deleted": dv_cardinalities(files),
        }
    )
    grouped = table.group_by("partition").aggregate(
        [("size", "count"), ("size", "sum"), ("num_records", "sum"), ("deleted", "sum")]
    )
    grouped = grouped.rename_columns(
        {
            "size_count": "files",
            "size_sum": "bytes",
            "num_records_sum": "rows",
            "deleted_sum": "deleted_rows",
        }
    )
    return grouped.select(["partition", "files", "bytes", "rows", "deleted_rows"]).sort_by(
        "partition"
    )


def format_bytes(n: int | float | None) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"  # pragma: no cover - the loop returns
