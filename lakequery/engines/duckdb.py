"""DuckDB adapter: DuckDB's own Parquet reader over the pruned files.

The relation is plain SQL over ``read_parquet``: no Arrow round trip, nothing
materialised. Files are grouped by partition values so that partition columns are
constants of each group's scan (DuckDB folds them); column mapping, type widening and
timestamp normalisation are projections on top. Files with deletion vectors are read with
``file_row_number`` and anti-joined on ``(file_index, file_row_number)`` with their deleted
positions (a small registered Arrow table of integer pairs), so DuckDB still reads Parquet
natively.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakequery.engines.deletion import deleted_rows
from lakequery.engines.layout import (
    ColumnSpec,
    FileGroup,
    column_specs,
    file_groups,
    hive_layout,
    require_local_files,
)
from lakequery.engines.nested import duckdb_relabel, has_struct
from lakequery.engines.sql_types import duckdb_type, glob_literal, literal, quote_ident, quote_str
from lakequery.engines.variant_files import has_variant, variant_files
from lakequery.errors import ObjectNotFoundError, UnsupportedFeatureError
from lakequery.parquet_footers import SCHEMA_TAG
from lakequery.protocol.column_mapping import ColumnMappingMode
from lakequery.protocol.predicates import to_duckdb_sql
from lakequery.storage.engine_errors import raise_storage_failure, storage_failure

if TYPE_CHECKING:
    from lakequery.scan import Scan


def _norm(type_name: str) -> str:
    return re.sub(r'[\s"]', "", type_name).upper()


def _column_sql(
    spec: ColumnSpec,
    actual: dict[str, str],
    values: dict[str, object] | None,
    mode: ColumnMappingMode,
    partition_source: str = "p",
) -> str:
    """SQL for one logical column; partition values are literals, or read from
    ``partition_source`` when ``values`` is None (``p``: the joined table, ``d``: the
    verified Hive columns of the scan)."""
    target = duckdb_type(spec.type)
    if spec.partition:
        if values is None:
            return f"{partition_source}.{quote_ident(spec.name)}"
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
    except duckdb.Error as exc:
        raise _missing_file(exc, locations) from exc


def _missing_file(exc: duckdb.Error, locations: list[str]) -> Exception:
    failure = storage_failure(exc, locations[0] if locations else "")
    if failure is not None:
        return failure
    missing = next((p for p in locations if p in str(exc)), None)
    if missing is not None or "No files found" in str(exc):
        return ObjectNotFoundError(missing or locations[0], "read data file")
    out: Exception = exc
    return out


def _same_schema(con: duckdb.DuckDBPyConnection, files: str, locations: list[str]) -> bool:
    """True when every file has the same columns and types: then ``read_parquet`` can skip
    ``union_by_name`` (which costs DuckDB noticeably at execution time)."""
    if len(locations) < 2:
        return True
    fingerprint = (
        "string_agg(name || ':' || coalesce(type, '') || ':' || coalesce(logical_type, '') "
        "|| ':' || coalesce(CAST(num_children AS VARCHAR), '') || ':' || coalesce(duckdb_type, ''), "
        "',' ORDER BY name)"
    )
    try:
        rows = con.sql(
            f"SELECT count(DISTINCT fp) FROM (SELECT file_name, {fingerprint} AS fp "
            f"FROM parquet_schema({files}) GROUP BY file_name)"
        ).fetchall()
    except duckdb.Error as exc:
        raise _missing_file(exc, locations) from exc
    return bool(rows[0][0] == 1)


def _schema_representatives(scan: Scan) -> list[str]:
    """The planned files whose footers decide whether all files share one schema: the first
    file of each :data:`~lakequery.parquet_footers.SCHEMA_TAG` fingerprint and every file
    without one. Files with equal fingerprints store the same Parquet schema, so looking at
    one of them is looking at all."""
    plan = scan.plan()
    locations = plan.location_list
    tags = plan.files.column("tags")
    if tags.null_count == len(tags):
        return locations
    seen: set[str] = set()
    out = []
    for loc, entries in zip(locations, tags.to_pylist(), strict=True):
        fp = dict(entries).get(SCHEMA_TAG) if entries else None
        if fp is None or fp not in seen:
            out.append(loc)
            if fp is not None:
                seen.add(fp)
    return out


#: Above this many partition-value groups the files are read in one scan and joined with
#: their partition values by file name, instead of one constant-folded scan per group.
MAX_UNION_GROUPS = 64


@dataclass(frozen=True)
class _Branch:
    """One ``read_parquet`` over files that share how they are read."""

    locations: list[str]
    values: dict[str, object] | None  # partition literals; None: join table or Hive columns
    deletion_vectors: bool  # anti-join with deleted positions
    hive: bool = False  # partition columns come from the (verified) Hive directory names


#: With ``row_ids=True`` every row also carries where it is stored: the file (its index in
#: the scan plan's files) and its physical position.
ROW_FILE_COLUMN = "__lq_file"
ROW_NUMBER_COLUMN = "__lq_row"

#: Deleted rows are keyed ``file number * 2**32 + row`` (files of fewer than 2**32 rows).
_ROW_KEY_SPAN = 1 << 32

#: File list -> the column types all its files share (None: they differ). Data files are
#: immutable, so the answer for a list of paths never changes.
_SHARED_TYPES: dict[tuple[str, ...], dict[str, str] | None] = {}
_SHARED_TYPES_MAX = 256


def _remember(key: tuple[str, ...], types: dict[str, str] | None) -> None:
    if len(_SHARED_TYPES) >= _SHARED_TYPES_MAX:
        _SHARED_TYPES.pop(next(iter(_SHARED_TYPES)))
    _SHARED_TYPES[key] = types


class _Builder:
    def __init__(self, scan: Scan, con: duckdb.DuckDBPyConnection, row_ids: bool = False) -> None:
        self.scan = scan
        self.con = con
        self.row_ids = row_ids
        self.plan_index = (
            {loc: i for i, loc in enumerate(scan.plan().location_list)} if row_ids else {}
        )
        self.storage = scan.snapshot.storage
        self.mode: ColumnMappingMode = scan.snapshot.column_mapping_mode
        self.specs = column_specs(scan)
        self.parts_table: str | None = None
        self.dv_table: str | None = None
        self.dv_offsets: dict[int, int] = {}
        self.needs_data = any(not s.partition for s in self.specs)
        # One look at all footers decides for every branch: when all files share a schema,
        # branches read without union_by_name and reuse one set of column types.
        self.shared_types: dict[str, str] | None = None
        locations = scan.plan().location_list
        if self.needs_data and locations:
            key = tuple(locations)
            if key in _SHARED_TYPES:
                self.shared_types = _SHARED_TYPES[key]
            else:
                # One footer per schema fingerprint the writer logged, every untagged file
                check = _schema_representatives(scan)
                if len(check) < len(locations):
                    require_local_files(scan)  # what the skipped footer reads would catch
                if _same_schema(con, self.files_sql(check), check):
                    first = self.files_sql(check[:1])
                    self.shared_types = _bind_types(
                        con, f"read_parquet({first}, hive_partitioning=false)", check
                    )
                _remember(key, self.shared_types)

    def hive_ok(self) -> bool:
        """Hive columns can stand in for partition literals only when every file has the
        same schema and none of them stores a column of a partition column's name."""
        if self.shared_types is None and self.needs_data:
            return False
        stored = set(self.shared_types or ())
        return not any(s.partition and s.name in stored for s in self.specs)

    def files_sql(self, locations: list[str]) -> str:
        paths = (quote_str(glob_literal(self.storage.duckdb_path(p))) for p in locations)
        return "[" + ", ".join(paths) + "]"

    def _register(self, prefix: str, table: pa.Table) -> str:
        name = f"_lq_{prefix}_{uuid.uuid4().hex}"
        self.con.register(name, table)
        return name

    def register_partitions(self) -> None:
        plan = self.scan.plan()
        parts = plan.files.column("partition_values").combine_chunks()
        locs = [self.storage.duckdb_path(p) for p in plan.location_list]
        cols = {s.name: pc.struct_field(parts, s.name) for s in self.specs if s.partition}
        self.parts_table = self._register("parts", pa.table({"loc": locs} | cols))

    def register_deletions(self, branches: list[_Branch], deleted: dict[str, np.ndarray]) -> None:
        """Registers ``(file number, deleted row)`` pairs; files are numbered in the order
        the DV branches list them, so a branch matches ``file_index + its offset``."""
        order = [loc for b in branches if b.deletion_vectors for loc in b.locations]
        arrays = [deleted[loc] for loc in order]
        counts = [len(a) for a in arrays]
        files = np.repeat(np.arange(len(order), dtype=np.int64), counts)
        rows = np.concatenate(arrays)
        if rows.size and int(rows.max()) >= _ROW_KEY_SPAN:
            raise UnsupportedFeatureError(
                "deletionVectors", detail="a data file with 2**32 or more rows"
            )
        # one integer key per deleted row: file number in the high bits, row in the low
        table = pa.table({"k": pa.array(files * _ROW_KEY_SPAN + rows, pa.int64())})
        self.dv_table = self._register("dv", table)
        offset = 0
        for b in branches:
            if b.deletion_vectors:
                self.dv_offsets[id(b)] = offset
                offset += len(b.locations)

    def branch_sql(self, branch: _Branch) -> str:
        files = self.files_sql(branch.locations)
        uniform = not self.needs_data or self.shared_types is not None
        options = "union_by_name=false" if uniform else "union_by_name=true"
        # Parquet writers leave NaN out of float min/max, as the Parquet spec asks, and
        # DuckDB orders NaN above every number: unless told that floats can hold NaN, it
        # skips row groups (or folds filters) that hold NaN rows matching `x > 3`,
        # `x != 1` or `isnan(x)`. Float pruning on the upper bound is the price.
        options += ", can_have_nan=true"
        joined = branch.values is None and not branch.hive
        if joined:
            options += ", filename=true"
        if branch.hive:
            types = ", ".join(
                f"{quote_str(s.name)}: {quote_str(duckdb_type(s.type))}"
                for s in self.specs
                if s.partition
            )
            options += f", hive_partitioning=true, hive_types={{{types}}}"
        else:
            options += ", hive_partitioning=false"
        if branch.deletion_vectors or self.row_ids:
            options += ", file_row_number=true"
        source = f"read_parquet({files}, {options})"
        actual: dict[str, str] = self.shared_types or {}
        if self.needs_data and self.shared_types is None:
            actual = _bind_types(self.con, source, branch.locations)
        select = (
            ", ".join(
                f"{_column_sql(s, actual, branch.values, self.mode, 'd' if branch.hive else 'p')}"
                f" AS {quote_ident(s.name)}"
                for s in self.specs
            )
            or "1 AS _lq_dummy"
        )
        if self.row_ids:
            # file_index counts the branch's own files; map it to the plan's numbering
            numbers = ", ".join(str(self.plan_index[loc]) for loc in branch.locations)
            select += (
                f", CAST(([{numbers}])[CAST(d.file_index AS BIGINT) + 1] AS BIGINT) AS {ROW_FILE_COLUMN}, "
                f"CAST(d.file_row_number AS BIGINT) AS {ROW_NUMBER_COLUMN}"
            )
        sql = f"SELECT {select} FROM {source} AS d"
        if joined:
            sql += f" JOIN {self.parts_table} AS p ON d.filename = p.loc"
        if branch.deletion_vectors:
            offset = self.dv_offsets[id(branch)]
            sql += (
                f" ANTI JOIN {self.dv_table} AS x ON x.k = "
                f"(CAST(d.file_index AS BIGINT) + {offset}) * {_ROW_KEY_SPAN} + d.file_row_number"
            )
        return sql


def _branches(
    groups: list[FileGroup], deleted: dict[str, np.ndarray], layout: str
) -> list[_Branch]:
    """Branches by how partition values arrive: ``literal`` (one branch per group),
    ``join`` or ``hive`` (all files in one scan)."""
    out = []
    if layout in ("join", "hive"):
        locs = [p for g in groups for p in g.locations]
        plain = [p for p in locs if p not in deleted]
        masked = [p for p in locs if p in deleted]
        hive = layout == "hive"
        if plain:
            out.append(_Branch(plain, None, False, hive))
        if masked:
            out.append(_Branch(masked, None, True, hive))
        return out
    for g in groups:
        plain = [p for p in g.locations if p not in deleted]
        masked = [p for p in g.locations if p in deleted]
        if plain:
            out.append(_Branch(plain, g.values, False))
        if masked:
            out.append(_Branch(masked, g.values, True))
    return out


def _annotated_variants(
    scan: Scan, specs: list[ColumnSpec], con: duckdb.DuckDBPyConnection
) -> bool:
    """Whether the scan reads a variant column and a planned file marks a group with
    Parquet's VARIANT logical type (see :mod:`lakequery.engines.variant_files`)."""
    names = [s.name for s in specs if not s.partition and has_variant(s.delta_type)]
    if not names:
        return False
    files = variant_files(scan, names, con)
    return files is not None and files.annotated


def duckdb_relation(
    scan: Scan, con: duckdb.DuckDBPyConnection | None = None, *, row_ids: bool = False
) -> duckdb.DuckDBPyRelation:
    """Builds the scan's relation on ``con`` (a new connection when None).

    With ``row_ids`` the relation has two more columns, :data:`ROW_FILE_COLUMN` and
    :data:`ROW_NUMBER_COLUMN`: the row's file and physical position (what DML marks in
    deletion vectors)."""
    if con is None:
        con = duckdb.connect()
    # Delta data files never change in place: footers read while planning are reused when
    # the query runs (DuckDB's cache also checks each file's modification time).
    con.execute("SET parquet_metadata_cache = true")
    plan = scan.plan()
    storage = scan.snapshot.storage
    storage.register_duckdb(con)
    specs = column_specs(scan)
    if _annotated_variants(scan, specs, con):
        if row_ids:
            raise UnsupportedFeatureError(  # only DML asks, and it cannot write variants
                "variantType",
                operation="write",
                detail="row positions in files with Parquet VARIANT groups",
            )
        from lakequery.engines.arrow import ArrowStream

        # DuckDB would decode the VARIANT groups and cannot give back their stored bytes
        return con.from_arrow(ArrowStream(scan))
    builder = _Builder(scan, con, row_ids)
    partition_names = [s.name for s in specs if s.partition]
    out_cols = ", ".join(quote_ident(c) for c in scan.columns)
    if row_ids:
        out_cols = ", ".join(filter(None, (out_cols, ROW_FILE_COLUMN, ROW_NUMBER_COLUMN)))
    if plan.num_files == 0:
        empty = ", ".join(
            [f"CAST(NULL AS {duckdb_type(s.type)}) AS {quote_ident(s.name)}" for s in specs]
            + (
                [
                    f"CAST(NULL AS BIGINT) AS {ROW_FILE_COLUMN}",
                    f"CAST(NULL AS BIGINT) AS {ROW_NUMBER_COLUMN}",
                ]
                if row_ids
                else []
            )
        )
        return con.sql(f"SELECT {out_cols} FROM (SELECT {empty}) WHERE false")
    layout = "literal"
    if partition_names and builder.hive_ok() and hive_layout(scan):
        layout = "hive"  # one scan of all files: no need to group them
        groups = [FileGroup({}, plan.location_list)]
    else:
        groups = file_groups(plan, partition_names)
        if len(groups) > MAX_UNION_GROUPS:
            layout = "join"
            builder.register_partitions()
    deleted = deleted_rows(plan, storage)
    branches = _branches(groups, deleted, layout)
    if deleted:
        builder.register_deletions(branches, deleted)
    body = " UNION ALL ".join(builder.branch_sql(b) for b in branches)
    where = f" WHERE {to_duckdb_sql(scan.filter)}" if scan.filter is not None else ""
    try:
        return con.sql(f"SELECT {out_cols} FROM ({body}){where}")
    except duckdb.Error as exc:  # binding reads Parquet footers: the store may fail
        raise_storage_failure(exc, plan.location_list[0] if plan.location_list else "")
        raise
