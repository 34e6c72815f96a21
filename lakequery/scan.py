"""One scan planner for every engine (DESIGN: plan, then execute).

A :class:`Scan` binds the requested columns and filter to a snapshot's schema, prunes
files by partition values and statistics, and hands the surviving :class:`FileTask` s
to thin engine adapters (:mod:`lakequery.engines`).

Example:
    >>> import lakequery as lq
    >>> snap = lq.DeltaTable(lq.demo.example_table()).snapshot()
    >>> plan = snap.scan(filter="day = DATE '2026-11-02'").plan()
    >>> plan.num_files < plan.total_files
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.cached import cached_property
from lakequery.dv.descriptor import Descriptor
from lakequery.errors import PredicateError
from lakequery.protocol.column_mapping import physical_name_map
from lakequery.protocol.file_locations import file_locations

# The predicate language and file skipping are imported by scans with a filter: a fresh
# process reading a whole table skips them (~3.5 ms).
if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import polars as pl

    from lakequery.protocol.predicate_ast import Expr
    from lakequery.snapshot import Snapshot


@dataclass(frozen=True)
class FileTask:
    """One data file to read."""

    path: str  # location for the storage layer
    relative_path: str
    size: int
    num_records: int | None
    partition_values: dict[str, Any]
    deletion_vector: Descriptor | None


@dataclass(frozen=True)
class ScanPlan:
    """The files a scan reads, after partition and statistics pruning."""

    files: pa.Table  # the rows of Snapshot.files() that survive pruning
    total_files: int
    locations: pa.StringArray  # storage location per surviving file

    def __repr__(self) -> str:
        return f"ScanPlan(files={self.num_files} of {self.total_files})"

    def _repr_html_(self) -> str:
        """Jupyter's view: files read vs skipped, bytes, the first files."""
        from lakequery.display.html import scan_plan_html

        return scan_plan_html(self)

    @property
    def num_files(self) -> int:
        return int(self.files.num_rows)

    @cached_property
    def location_list(self) -> list[str]:
        """The storage locations as Python strings (one per planned file)."""
        return [str(x) for x in self.locations.to_pylist()]

    @property
    def skipped_files(self) -> int:
        return self.total_files - self.num_files

    @cached_property
    def tasks(self) -> list[FileTask]:
        """The files as task objects (built on demand; engines use the Arrow table)."""
        rows = self.files.to_pylist()
        out = []
        for row, loc in zip(rows, self.location_list, strict=True):
            dv = row.get("deletion_vector")
            ref = Descriptor.from_dict(dv) if dv and dv.get("storageType") else None
            out.append(
                FileTask(
                    path=str(loc),
                    relative_path=row["path"],
                    size=int(row["size"]),
                    num_records=row.get("num_records"),
                    partition_values=dict(row.get("partition_values") or {}),
                    deletion_vector=ref,
                )
            )
        return out


class Scan:
    """A planned read of a snapshot: columns, filter and surviving files.

    Build one with :meth:`lakequery.Snapshot.scan`; then read it with :meth:`to_arrow`,
    :meth:`to_arrow_reader`, :meth:`to_pandas`, :meth:`to_duckdb` or :meth:`to_polars`.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        columns: Sequence[str] | None,
        filter: str | pc.Expression | None,
        row_tracking: bool = False,
    ) -> None:
        self.snapshot = snapshot
        #: Output names of the (row id, row commit version) columns, or None; see
        #: :mod:`lakequery.row_tracking`.
        self.row_tracking_columns: tuple[str, str] | None = None
        if row_tracking:
            from lakequery.row_tracking import ROW_COMMIT_VERSION_COLUMN, ROW_ID_COLUMN

            self.row_tracking_columns = (ROW_ID_COLUMN, ROW_COMMIT_VERSION_COLUMN)
        schema = snapshot.schema
        if columns is None:
            self.columns: list[str] = list(schema.names)
        else:
            if isinstance(columns, str):
                raise TypeError("columns must be a sequence of names, not a string")
            names = schema.names  # (a new list at each call: not per column)
            lowered = {n.lower(): n for n in reversed(names)}
            self.columns = [_resolve_column(names, set(names), lowered, c) for c in columns]
            if len(set(self.columns)) < len(self.columns):
                # the engines disagreed (two columns, or an error each)
                twice = next(c for i, c in enumerate(self.columns) if c in self.columns[:i])
                raise PredicateError(twice, "listed twice in columns", kind="column")
        self.filter_source = filter
        self.filter: Expr | None = _bind_filter(filter, schema)

    def __repr__(self) -> str:
        from lakequery.display import column_list

        return f"Scan(version={self.snapshot.version}, columns={column_list(self.columns)})"

    def _repr_html_(self) -> str:
        """Jupyter's view: version, columns, filter and the pruned plan."""
        from lakequery.display.html import scan_html

        return scan_html(self)

    @property
    def output_schema(self) -> pa.Schema:
        """The logical schema of the rows this scan returns."""
        schema = self.snapshot.schema
        out = pa.schema([schema.field(c) for c in self.columns])
        for name in self.row_tracking_columns or ():
            out = out.append(pa.field(name, pa.int64()))
        return out

    @property
    def read_columns(self) -> list[str]:
        """Top-level columns needed: the output ones plus those the filter uses."""
        needed = list(self.columns)
        if self.filter is not None:
            from lakequery.protocol.predicate_ast import referenced_columns

            for path in sorted(referenced_columns(self.filter)):
                if path[0] not in needed:
                    needed.append(path[0])
        return needed

    def plan(self) -> ScanPlan:
        """Prunes the snapshot's files with partition values and statistics."""
        return self._plan

    @cached_property
    def _plan(self) -> ScanPlan:
        files = self.snapshot.files()
        total = files.num_rows
        if self.filter is not None and total:
            from lakequery.protocol.skipping import prune_mask, skip_columns

            snap = self.snapshot
            columns = skip_columns(
                snap.schema,
                snap.partition_columns,
                physical_name_map(snap.metadata.schema, snap.column_mapping_mode),
            )
            mask = prune_mask(files, self.filter, columns)
            files = pc.filter(files, mask)
        # the load's look at the paths holds for any subset of them
        return self._plan_of(files, total, plain=self.snapshot._state.plain_paths or None)

    def _plan_of(self, files: pa.Table, total: int, *, plain: bool | None = None) -> ScanPlan:
        # the table's own files under its root, a shallow clone's at their absolute URI
        locations = file_locations(self.snapshot.storage.root, files.column("path"), plain=plain)
        return ScanPlan(files, total, locations)

    def restricted_to(self, files: pa.Table) -> Scan:
        """A copy of this scan that reads exactly ``files`` (rows of
        :meth:`Snapshot.files`, e.g. a filtered :attr:`ScanPlan.files`) without pruning;
        the filter still applies to rows. Commands use it to read the files they touch."""
        out = Scan(self.snapshot, columns=self.columns, filter=self.filter_source)
        out.row_tracking_columns = self.row_tracking_columns
        out.__dict__["_plan"] = out._plan_of(files, self.snapshot.num_files)
        return out

    def with_columns(self, columns: Sequence[str]) -> Scan:
        """A copy of this scan with the same plan (files, filter, row tracking columns)
        that returns ``columns``."""
        out = Scan(self.snapshot, columns=columns, filter=self.filter_source)
        out.row_tracking_columns = self.row_tracking_columns
        out.__dict__["_plan"] = self.plan()
        return out

    def with_row_tracking_columns(self, names: tuple[str, str] | None) -> Scan:
        """A copy of this scan (same files) that also returns each row's id and commit
        version under ``names`` (None: without them). Commands name them after the
        table's materialized columns to carry them into rewritten files."""
        out = self.with_columns(self.columns)
        out.row_tracking_columns = names
        return out

    # -- engines ---------------------------------------------------------------------------------
    def to_arrow_reader(self) -> pa.RecordBatchReader:
        """Streams the rows as Arrow record batches (bounded memory)."""
        from lakequery.engines.arrow import arrow_reader

        return arrow_reader(self)

    def to_arrow(self) -> pa.Table:
        """Reads the rows into one Arrow table."""
        return self.to_arrow_reader().read_all()

    def to_pandas(self, **kwargs: Any) -> pd.DataFrame:
        """Reads the rows into a pandas DataFrame (pandas must be installed; ``kwargs`` go
        to ``pyarrow.Table.to_pandas``, e.g. ``types_mapper=pd.ArrowDtype``)."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_duckdb(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """A lazy DuckDB relation over DuckDB's own Parquet reader and the pruned files.

        Args:
            con: the connection to build the relation on (a new one when None).
        """
        from lakequery.engines.duckdb import duckdb_relation

        return duckdb_relation(self, con)

    def to_polars(self) -> pl.LazyFrame:
        """A Polars LazyFrame over ``scan_parquet`` of the pruned files."""
        from lakequery.engines.polars import polars_frame

        return polars_frame(self)


def _resolve_column(names: list[str], exact: set[str], lowered: dict[str, str], name: str) -> str:
    """``name`` among the table's column ``names`` (``exact``: as a set; ``lowered``: the
    first name of each lower-case spelling), matched exactly, else case-insensitively."""
    if name in exact:
        return name
    found = lowered.get(name.lower())
    if found is not None:
        return found
    raise PredicateError(name, f"no column {name!r} in the table (columns: {names})", kind="column")


def _bind_filter(filter: str | pc.Expression | None, schema: pa.Schema) -> Expr | None:
    if filter is None:
        return None
    from lakequery.protocol.predicates import bind, from_pyarrow_expression, parse_predicate

    if isinstance(filter, str):
        expr = parse_predicate(filter)
    elif isinstance(filter, pc.Expression):
        expr = from_pyarrow_expression(filter)
    else:
        raise PredicateError(filter, "a filter is a SQL string or a pyarrow.compute.Expression")
    return bind(expr, schema)
