"""UPDATE: set columns of the rows matching a predicate to SQL expressions (DuckDB dialect).

The old rows are marked deleted (deletion vectors, or their files rewritten) and the
updated rows are written to new files, in one commit.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://update-doc"
    >>> _ = lq.write(uri, pa.table({"id": [1, 2, 3], "v": [10.0, 20.0, 30.0]}))
    >>> dt = lq.DeltaTable(uri)
    >>> dt.update("id >= 2", set={"v": "v * 2 + id"}).num_updated_rows
    2
    >>> sorted(dt.snapshot().scan().to_arrow().column("v").to_pylist())
    [10.0, 42.0, 63.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakequery.commands.change_set import (
    DmlMetrics,
    Statement,
    cast_sql,
    generation_expressions,
    new_value_column,
    with_generated_values,
)
from lakequery.engines.duckdb import ROW_FILE_COLUMN, ROW_NUMBER_COLUMN
from lakequery.engines.sql_types import quote_ident
from lakequery.errors import PredicateError
from lakequery.writer.identity import refuse_identity_update

if TYPE_CHECKING:
    import pyarrow as pa

    from lakequery.commands.progress import ProgressCallback
    from lakequery.table import DeltaTable

TARGET_VIEW = "__lq_target"


def resolve_assignments(
    assignments: Mapping[str, str], schema: pa.Schema, *, alias: str | None = None
) -> dict[str, str]:
    """Column -> SQL expression with the keys matched to ``schema``'s column names
    (case-insensitively; an ``alias.`` prefix is allowed)."""
    lowered = {n.lower(): n for n in schema.names}
    out: dict[str, str] = {}
    for key, expression in assignments.items():
        name = key.strip().strip('"')
        if alias and name.lower().startswith(alias.lower() + "."):
            name = name[len(alias) + 1 :].strip('"')
        column = lowered.get(name.lower())
        if column is None:
            raise PredicateError(key, f"no column {name!r} to set (columns: {schema.names})")
        if column in out:
            raise PredicateError(key, f"column {column!r} is set twice")
        out[column] = str(expression)
    return out


def update(
    table: DeltaTable,
    predicate: str | None = None,
    *,
    set: Mapping[str, str],
    copy_on_write: bool = False,
    rewrite_threshold: float | None = None,
    progress: ProgressCallback | None = None,
) -> DmlMetrics:
    """Sets columns of the rows for which ``predicate`` is TRUE (every row when None).

    See :meth:`lakequery.DeltaTable.update`.
    """
    if not set:
        raise ValueError("update needs at least one column in set={...}")
    parameters: dict[str, Any] = {"predicate": predicate if predicate is not None else "true"}
    with Statement.for_table(
        table,
        operation="UPDATE",
        parameters=parameters,
        copy_on_write=copy_on_write,
        rewrite_threshold=rewrite_threshold,
        progress=progress,
    ) as st:
        schema = st.snapshot.schema
        assignments = resolve_assignments(set, schema)
        refuse_identity_update(st.snapshot.metadata.schema, assignments)
        st.refuse_on_append_only()
        st.target(predicate, name=TARGET_VIEW)
        new = ", ".join(
            f"{cast_sql(assignments.get(c, quote_ident(c)), schema.field(c).type)} "
            f"AS {new_value_column(i)}"
            for i, c in enumerate(schema.names)
        )
        regenerate = {
            c: (expression, "TRUE")
            for c, expression in generation_expressions(st.state).items()
            if c not in assignments
        }
        st.build_change_table(
            with_generated_values(
                f"SELECT 'update' AS __lq_kind, "
                f"{ROW_FILE_COLUMN}, {ROW_NUMBER_COLUMN}, {new}{st.old_value_columns()} "
                f"FROM {TARGET_VIEW}",
                schema,
                regenerate,
            ),
            ", ".join(f"{c} = {e}" for c, e in assignments.items()),
        )
        return st.commit_changes(
            metric_names={"updated": "numUpdatedRows", "copied": "numCopiedRows"}
        )
