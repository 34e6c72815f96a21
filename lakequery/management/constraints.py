"""ADD / DROP CONSTRAINT: CHECK constraints on an existing table (planners; digest §14).

``add_constraint`` first evaluates the expression on every live row (deletion vectors
applied) in one DuckDB aggregate over the table scan, and refuses with the number of
violating rows; a row where the expression is NULL violates it, as for the rows the
writer checks later. The constraint is stored as ``delta.constraints.<name>`` with the
name lower-cased (Spark does the same) and the ``checkConstraints`` feature is added when
the protocol lacks it. The check reads the whole table, so a concurrent append makes the
commit conflict; the ALTER is then planned again and the new rows checked too.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> from lakequery.management.change import commit_change
    >>> uri = "memory://constraints-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1, 2, -3]}))
    >>> dt = lq.DeltaTable(uri)
    >>> try:
    ...     commit_change(dt, lambda s: plan_add_constraint(s, {"positive": "x > 0"}))
    ... except lq.ConstraintViolationError as exc:
    ...     print(exc.detail)
    1 of 3 existing row(s) violate it
    >>> commit_change(dt, lambda s: plan_add_constraint(s, {"small": "x < 10"})).rows_checked
    3
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import duckdb

from lakequery.duckdb_databases import engine_cursor
from lakequery.errors import AlterTableError, ConstraintViolationError
from lakequery.management.change import AlterChange
from lakequery.management.properties import CONSTRAINT_PREFIX, plan_properties
from lakequery.snapshot import Snapshot
from lakequery.writer.constraints import spark_to_duckdb


def _count_violations(snapshot: Snapshot, expression: str) -> tuple[int, int]:
    """(violating rows, live rows) of the snapshot for a Spark SQL boolean expression."""
    test = f"COALESCE(CAST(({spark_to_duckdb(expression)}) AS BOOLEAN), FALSE)"
    con = engine_cursor(utc=True)
    try:
        rel = snapshot.scan().to_duckdb(con)
        # aggregate, not query: DuckDB binds a relation's file list at each statement
        bad, total = rel.aggregate(f"count(*) FILTER (WHERE NOT {test}), count(*)").fetchall()[0]
    finally:
        con.close()
    return int(bad), int(total)


def plan_add_constraint(snapshot: Snapshot, constraints: Mapping[str, str]) -> AlterChange:
    """ADD CONSTRAINT ``name`` CHECK (``expr``) for each item, after checking every live row.

    Raises:
        ConstraintViolationError: existing rows break a constraint (with their count).
        AlterTableError: a constraint of that name exists, or the expression does not
            evaluate on the table (unknown column, not SQL).
    """
    op = "ADD CONSTRAINT"
    if not constraints:
        raise AlterTableError(snapshot.table_uri, op, "no constraints given")
    config = snapshot.metadata.configuration
    new: dict[str, str] = {}
    checked = 0
    for name, expr in constraints.items():
        key = CONSTRAINT_PREFIX + str(name).lower()
        if not str(name).strip():
            raise AlterTableError(snapshot.table_uri, op, "a constraint needs a name")
        if key in {k.lower() for k in config} or key in new:
            raise AlterTableError(snapshot.table_uri, op, f"constraint {name!r} already exists")
        try:
            bad, checked = _count_violations(snapshot, str(expr))
        except duckdb.Error as exc:
            reason = f"constraint {name!r} ({expr}) cannot be evaluated: {exc}"
            raise AlterTableError(snapshot.table_uri, op, reason) from None
        if bad:
            raise ConstraintViolationError(
                str(name), str(expr), f"{bad} of {checked} existing row(s) violate it"
            )
        new[key] = str(expr)
    change = plan_properties(
        snapshot,
        add_features=["checkConstraints"],
        operation=op,
        parameters={
            "name": ", ".join(str(n) for n in constraints),
            "expr": ", ".join(str(e) for e in constraints.values()),
        },
    )
    meta = change.metadata
    config_out = {**meta.configuration, **new}
    return replace(
        change,
        metadata=replace(meta, configuration=config_out),
        reads_whole_table=True,
        rows_checked=checked,
    )


def plan_drop_constraint(
    snapshot: Snapshot, name: str, *, raise_if_not_exists: bool = True
) -> AlterChange:
    """DROP CONSTRAINT ``name``.

    Raises:
        AlterTableError: no such constraint (with ``raise_if_not_exists``).
    """
    op = "DROP CONSTRAINT"
    meta = snapshot.metadata
    wanted = CONSTRAINT_PREFIX + name.lower()
    keys = [k for k in meta.configuration if k.lower() == wanted]
    if not keys and raise_if_not_exists:
        raise AlterTableError(snapshot.table_uri, op, f"no constraint {name!r}")
    config = {k: v for k, v in meta.configuration.items() if k not in keys}
    return AlterChange(
        op,
        {"name": name, "existed": bool(keys)},
        replace(meta, configuration=config),
    )
