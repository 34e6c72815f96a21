"""DELETE: remove the rows matching a predicate.

Merge-on-read on tables with deletion vectors (the matching rows' positions are added to
their files' DVs), copy-on-write otherwise. A predicate on partition columns only removes
whole files without reading them; no predicate removes every file.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://delete-doc"
    >>> _ = lq.write(uri, pa.table({"id": [1, 2, 3, 4], "day": ["a", "a", "b", "b"]}),
    ...              partition_by=["day"])
    >>> dt = lq.DeltaTable(uri)
    >>> m = dt.delete("id % 2 = 0")
    >>> m.num_deleted_rows, m.num_deletion_vectors_added, m.num_removed_files
    (2, 2, 0)
    >>> dt.delete("day = 'b'").num_removed_files       # whole files, nothing read
    1
    >>> sorted(dt.snapshot().scan().to_arrow().column("id").to_pylist())
    [1]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakequery import arrow_kernels as pc
from lakequery.commands.change_set import DmlMetrics, Statement, parses
from lakequery.commands.file_actions import only_partition_columns, partition_match
from lakequery.engines.duckdb import ROW_FILE_COLUMN, ROW_NUMBER_COLUMN
from lakequery.protocol.predicates import parse_predicate, referenced_columns

if TYPE_CHECKING:
    from lakequery.commands.progress import ProgressCallback
    from lakequery.table import DeltaTable

TARGET_VIEW = "__lq_target"


def delete(
    table: DeltaTable,
    predicate: str | None = None,
    *,
    copy_on_write: bool = False,
    rewrite_threshold: float | None = None,
    progress: ProgressCallback | None = None,
) -> DmlMetrics:
    """Deletes the rows for which ``predicate`` is TRUE (every row when None).

    See :meth:`lakequery.DeltaTable.delete`.
    """
    parameters: dict[str, Any] = {"predicate": [predicate] if predicate is not None else []}
    with Statement.for_table(
        table,
        operation="DELETE",
        parameters=parameters,
        copy_on_write=copy_on_write,
        rewrite_threshold=rewrite_threshold,
        progress=progress,
    ) as st:
        snapshot = st.snapshot
        st.refuse_on_append_only()
        if predicate is None:
            st.txn.read_whole_table()
            st.plan = snapshot.scan().plan()
            return st.commit_file_removal(st.plan.files)
        if (
            snapshot.partition_columns
            and parses(predicate, snapshot.schema)
            and referenced_columns(parse_predicate(predicate))
            and only_partition_columns(predicate, snapshot)
        ):
            st.plan = snapshot.scan(filter=predicate).plan()  # pruned by partition values
            st.txn.read_predicate(predicate)
            files = st.plan.files
            st.txn.read_files(str(p) for p in files.column("path").to_pylist())
            if files.num_rows:
                files = pc.filter(files, partition_match(files, predicate))
            return st.commit_file_removal(files)
        columns = st.read_columns if st.change_data_feed else []
        st.target(predicate, columns=columns, name=TARGET_VIEW)
        st.build_change_table(
            f"SELECT 'delete' AS __lq_kind, {ROW_FILE_COLUMN}, {ROW_NUMBER_COLUMN}"
            f"{st.old_value_columns()} FROM {TARGET_VIEW}",
            predicate,
        )
        return st.commit_changes(
            metric_names={"deleted": "numDeletedRows", "copied": "numCopiedRows"}
        )
