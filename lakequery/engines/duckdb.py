"""DuckDB adapter: DuckDB's own Parquet reader over the pruned files.

The relation is plain SQL over ``read_parquet``: no Arrow round trip, nothing
materialised. Files are grouped by partition values so that partition columns are
constants of each group's scan (DuckDB folds them); column mapping, type widening and
timestamp normalisation are projections on top.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import uuid

import duckdb
import pyarrow as pa

from lakequery.errors import ObjectNotFoundError
from lakequery.engines.layout import (
    ColumnSpec,
    FileGroup,
    column_specs,
    file_groups,
    require_no_deletion_vectors,
)
from lakequery.engines.nested import duckdb_relabel, has_struct
from lakequery.engines.sql_types import duckdb_type, literal, quote_ident, quote_str
from lakequery.protocol.column_mapping import ColumnMappingMode
from lakequery.protocol.predicates import to_duckdb_sql

if TYPE_CHECKING:
    from lakequery.scan import Scan


def _norm(type_name: str) -> str:
    return re.sub(r'[\s"]', "", type_name).upper()


def _column_sql(
    spec: ColumnSpec, actual: dict[str, str], values: dict[str, object] | None, mode: ColumnMappingMode
) -> str:
    """SQL for one logical column; partition values are literals, or ``p.<name>`` when
    ``values`` is None (the joined form)."""
    target = duckdb_type(spec.type)
    if spec.partition:
        if values is None:
            return f"p.{quote_ident(spec.name)}"
        return literal(values.get(spec.name), spec.type)
    if pa.types.is_null(spec.type) or spec.physical not in actual:
        return f"CAST(NULL AS {target})"
    ref = "d." + quote_ident(spec.physical)
    have = _norm(actual[spec.physical])
    want = _norm(target)
    if mode != "none" and has_struct(spec.delta_type):
        return duckdb_relabel(ref, spec.delta_type, mode)
    if have == want:
        return ref
    if want == "TIMESTAMPWITHTIMEZONE" or want == "TIMESTAMPTZ":
        if have in ("TIMESTAMPWITHTIMEZONE", "TIMESTAMPTZ"):
            return ref
        if have.startswith("TIMESTAMP"):
            return f"timezone('UTC', CAST({ref} AS TIMESTAMP))"
    return f"CAST({ref} AS {target})"


def _bind_types(
    con: duckdb.DuckDBPyConnection, source: str, locations: list[str]
) -> dict[str, str]:
    """Column name -> DuckDB type of a ``read_parquet`` source (reads the footers)."""
    try:
        rel = con.sql(f"SELECT * FROM {source}")
        return {c: str(t) for c, t in zip(rel.columns, rel.types, strict=True)}
    except duckdb.IOException as exc:
        missing = next((p for p in locations if p in str(exc)), None)
        if missing is not None or "No files found" in str(exc):
            raise ObjectNotFoundError(missing or locations[0], "read data file") from exc
        raise


def _group_sql(
    con: duckdb.DuckDBPyConnection, scan: Scan, group: FileGroup, specs: list[ColumnSpec]
) -> str:
    storage = scan.snapshot.storage
    files = "[" + ", ".join(quote_str(storage.duckdb_path(p)) for p in group.locations) + "]"
    source = f"read_parquet({files}, union_by_name=true)"
    needs_data = any(not s.partition for s in specs)
    actual: dict[str, str] = {}
    if needs_data:
        actual = _bind_types(con, source, group.locations)
    select = ", ".join(
        f"{_column_sql(s, actual, group.values, scan.snapshot.column_mapping_mode)} AS {quote_ident(s.name)}" for s in specs
    )
    if not specs:
        select = "1 AS _lq_dummy"
    return f"SELECT {select} FROM {source} AS d"


#: Above this many partition-value groups the files are read in one scan and joined with
#: their partition values by file name, instead of one constant-folded scan per group.
MAX_UNION_GROUPS = 64


def _joined_sql(
    con: duckdb.DuckDBPyConnection, scan: Scan, groups: list[FileGroup], specs: list[ColumnSpec]
) -> str:
    storage = scan.snapshot.storage
    plan = scan.plan()
    locs = [storage.duckdb_path(p) for p in plan.locations.to_pylist()]
    parts = plan.files.column("partition_values").combine_chunks()
    table = pa.table(
        {"loc": pa.array(locs, pa.string())}
        | {s.name: parts.field(s.name) for s in specs if s.partition}
    )
    name = f"_lq_parts_{uuid.uuid4().hex}"
    con.register(name, table)
    files = "[" + ", ".join(quote_str(p) for p in locs) + "]"
    source = f"read_parquet({files}, union_by_name=true, filename=true)"
    actual = _bind_types(con, source, plan.locations.to_pylist())
    select = ", ".join(f"{_column_sql(s, actual, None, scan.snapshot.column_mapping_mode)} AS {quote_ident(s.name)}" for s in specs)
    return f"SELECT {select} FROM {source} AS d JOIN {name} AS p ON d.filename = p.loc"


def duckdb_relation(
    scan: Scan, con: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyRelation:
    """Builds the scan's relation on ``con`` (a new connection when None)."""
    con = con if con is not None else duckdb.connect()
    plan = scan.plan()
    require_no_deletion_vectors(plan)
    storage = scan.snapshot.storage
    storage.register_duckdb(con)
    specs = column_specs(scan)
    groups = file_groups(plan, [s.name for s in specs if s.partition])
    out_cols = ", ".join(quote_ident(c) for c in scan.columns)
    if not groups:
        empty = ", ".join(
            f"CAST(NULL AS {duckdb_type(s.type)}) AS {quote_ident(s.name)}" for s in specs
        )
        return con.sql(f"SELECT {out_cols} FROM (SELECT {empty}) WHERE false")
    if len(groups) > MAX_UNION_GROUPS:
        body = _joined_sql(con, scan, groups, specs)
    else:
        body = " UNION ALL ".join(_group_sql(con, scan, g, specs) for g in groups)
    where = f" WHERE {to_duckdb_sql(scan.filter)}" if scan.filter is not None else ""
    return con.sql(f"SELECT {out_cols} FROM ({body}){where}")
