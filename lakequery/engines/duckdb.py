"""DuckDB adapter: DuckDB's own Parquet reader over the pruned files.

The relation is plain SQL over ``read_parquet``: no Arrow round trip, nothing
materialised. Files are grouped by partition values so that partition columns are
constants of each group's scan (DuckDB folds them); column mapping, type widening and
timestamp normalisation are projections on top. Files with deletion vectors are read in
one of two ways. Plain reads without a filter on data columns read each such file by
position (:mod:`lakequery.engines.keep_masks`: ``read_parquet`` of the file ``POSITIONAL
JOIN`` a registered boolean keep mask; 1.4-1.5x less CPU than the anti-join). Otherwise
(DML row ids, row tracking, data filters that DuckDB should push into the scan, very large
or very many files) they are read with ``file_row_number`` and anti-joined on ``file
number * 2**32 + row`` with their deleted positions (a registered table of integer keys);
either way DuckDB reads Parquet natively. The file number is ``file_index`` plus an offset
in branches of partition literals, whose file lists nothing can prune; files in Hive or
``filename``-joined scans, which DuckDB prunes under the caller's filters, are numbered by
joining ``filename`` (see ``_Builder.register_numbers``).
"""

from __future__ import annotations

import hashlib
import re
import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

import duckdb
import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import int64_array, int_values, python_scalar
from lakequery.duckdb_databases import engine_cursor, is_engine_cursor
from lakequery.engines.deletion import deleted_rows
from lakequery.engines.layout import (
    MAX_UNION_GROUPS,
    ColumnSpec,
    FileGroup,
    column_specs,
    file_groups,
    hive_file_pattern,
    hive_layout,
    require_local_files,
)
from lakequery.engines.nested import duckdb_relabel, has_struct
from lakequery.engines.sql_types import (
    duckdb_type,
    glob_list_sql,
    glob_literal,
    literal,
    quote_ident,
    quote_str,
)
from lakequery.errors import ObjectNotFoundError, SchemaError, UnsupportedFeatureError
from lakequery.parquet_footers import SCHEMA_TAG
from lakequery.protocol.column_mapping import ColumnMappingMode
from lakequery.protocol.schema import PrimitiveType, has_variant
from lakequery.protocol.sql_spelling import FILE_SCHEME, file_key
from lakequery.storage.engine_errors import raise_storage_failure, storage_failure

if TYPE_CHECKING:
    from lakequery.engines.keep_masks import KeepMask
    from lakequery.scan import Scan


def _norm(type_name: str) -> str:
    return re.sub(r'[\s"]', "", type_name).upper()


def _column_sql(
    spec: ColumnSpec,
    actual: dict[str, str],
    values: dict[str, object] | None,
    mode: ColumnMappingMode,
    partitions: dict[str, str] | None = None,
) -> str:
    """SQL for one logical column; partition values are literals, or the SQL
    ``partitions`` gives for each partition column when ``values`` is None (the joined
    table's columns, or the values the verified Hive directories spell)."""
    target = duckdb_type(spec.type)
    if spec.partition:
        if values is None:
            assert partitions is not None
            return partitions[spec.name]
        return literal(values.get(spec.name), spec.type)
    if pa.types.is_null(spec.type) or spec.physical not in actual:
        return f"CAST(NULL AS {target})"
    ref = "d." + quote_ident(spec.physical)
    have = _norm(actual[spec.physical])
    want = _norm(target)
    if mode != "none" and has_struct(spec.delta_type):
        return duckdb_relabel(ref, spec.delta_type, mode, actual[spec.physical])
    if have == want:
        return ref
    if want == "TIMESTAMPWITHTIMEZONE" or want == "TIMESTAMPTZ":
        if have in ("TIMESTAMPWITHTIMEZONE", "TIMESTAMPTZ"):
            return ref
        if "TIMEZONE" in have or have.startswith("TIMESTAMPTZ"):
            # an instant at another precision (DuckDB 2.0 reads adjusted-to-UTC NANOS as
            # TIMESTAMPTZ_NS): through TIMESTAMP it would take the session's time zone
            return f"CAST({ref} AS {target})"
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
    out: Exception = exc
    if not isinstance(exc, duckdb.IOException):  # a file DuckDB read but could not parse
        return out
    missing = next((p for p in locations if p in str(exc)), None)
    if missing is not None or "No files found" in str(exc):
        return ObjectNotFoundError(missing or locations[0], "read data file")
    return out


def _schema_fingerprints(
    con: duckdb.DuckDBPyConnection, paths: list[str], locations: list[str]
) -> list[int]:
    """The fingerprint of each file's stored schema (``paths``: DuckDB's spelling of
    ``locations``), equal for files that store the same columns and types in any order."""
    if len(paths) < 2:
        return [0] * len(paths)
    # A file's fingerprint is the sum of its schema elements' 64-bit hashes: equal for the
    # same elements in any order, with no sort or string building per file (a string_agg
    # ordered by name cost 0.12 s more over 10,000 footers, 6-19 ms over 300). Two
    # different schemas share a sum by chance with odds of about 2^-64.
    fingerprint = "sum(hash(name, type, logical_type, num_children, duckdb_type))"
    try:
        rows = con.sql(
            f"SELECT {_file_key_sql('file_name')}, {fingerprint} "
            f"FROM parquet_schema({glob_list_sql(paths)}) GROUP BY file_name"
        ).fetchall()
    except duckdb.Error as exc:
        raise _missing_file(exc, locations) from exc
    by_file = dict(rows)
    return [int(by_file[file_key(p)]) for p in paths]


def _schema_representatives(
    scan: Scan, rows: list[int] | None = None
) -> tuple[list[str], np.ndarray]:
    """The planned files (or the plan's ``rows``) whose footers tell which files share a
    schema: the first file of each :data:`~lakequery.parquet_footers.SCHEMA_TAG`
    fingerprint and every file without one; and for each file, the index of its
    representative among them. Files with equal fingerprints store the same Parquet schema,
    so looking at one of them is looking at all."""
    plan = scan.plan()
    locations = plan.location_list
    tags = plan.files.column("tags")
    if rows is not None:
        locations = [locations[i] for i in rows]
        tags = pc.take(tags, int64_array(rows))
    everyone = np.arange(len(locations), dtype=np.int64)
    if tags.null_count == len(tags):
        return locations, everyone
    fingerprints = pc.map_lookup(
        tags.combine_chunks(), python_scalar(SCHEMA_TAG, pa.string()), "first"
    )
    distinct = pc.unique(pc.drop_null(fingerprints))
    # index_in gives each distinct fingerprint's first position
    first = int_values(pc.index_in(distinct, value_set=fingerprints)).astype(np.int64)
    tagged = np.ones(len(locations), dtype=bool)
    tagged[int_values(pc.indices_nonzero(pc.is_null(fingerprints)))] = False
    # disjoint sets (np.union1d would import numpy.ma: 14 ms in a fresh process)
    picked = np.sort(np.concatenate([first, everyone[~tagged]]))
    represented_by = everyone.copy()
    which = int_values(pc.index_in(pc.drop_null(fingerprints), value_set=distinct))
    represented_by[tagged] = first[np.asarray(which, dtype=np.int64)]
    return [locations[i] for i in picked.tolist()], np.searchsorted(picked, represented_by)


#: Delta types whose every Parquet spelling DuckDB casts to the table's type the same way
#: in any session: all primitives but ``timestamp``. A ``timestamp`` column may be stored
#: as INT96 (Spark's default) or as a UTC-adjusted timestamp, and DuckDB's cast between
#: the two follows the session's ``TimeZone``; nested types may need relabelling under
#: column mapping; variants carry their own layout.
_UNDECLARABLE = frozenset(["timestamp", "variant"])


#: DuckDB 1.5 fails to read ``file_row_number`` under the ``schema`` option once files
#: differ ("column 2147483645 ... could not be found"); 2.0 reads it. Before 2.0, only
#: scans without it are declared.
_DECLARES_ALL = int(duckdb.__version__.split(".")[0]) >= 2


def _declared_schema(
    specs: list[ColumnSpec], materialized: tuple[str, ...]
) -> tuple[str, dict[str, str]] | None:
    """The ``schema`` option of ``read_parquet`` naming every physical column the scan
    reads with the table's type, and those types (physical name -> DuckDB type), when all
    of them are declarable (see :data:`_UNDECLARABLE`); else None.

    DuckDB then matches each file's columns by name, casts the ones a file stores in
    another physical type (an int32 ``long``, a narrower decimal) and reads the ones it
    lacks as NULL, without reading any footer to bind: the same rows as the footer check
    and its branch per stored schema give."""
    types: dict[str, str] = {}
    for s in specs:
        if s.partition or pa.types.is_null(s.type):
            continue
        t = s.delta_type
        if not isinstance(t, PrimitiveType) or t.name in _UNDECLARABLE:
            return None
        types[s.physical] = duckdb_type(s.type)
    for name in materialized:
        types[name] = "BIGINT"
    entries = ", ".join(
        f"{quote_str(name)}: {{name: {quote_str(name)}, type: {quote_str(t)}, default_value: NULL}}"
        for name, t in types.items()
    )
    return f"MAP {{{entries}}}", types


#: Connections on which the engine has switched on DuckDB's Parquet metadata cache.
_METADATA_CACHE_SET: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()


class _Branch(NamedTuple):
    """One ``read_parquet`` over files that share how they are read."""

    locations: list[str]
    values: dict[str, object] | None  # partition literals; None: join table or Hive names
    deletion_vectors: bool  # anti-join with deleted positions
    hive: bool = False  # partition values from the (verified) Hive directories of each file
    numbered: bool = False  # rows carry their file's number (deletion vectors, row ids)
    keep: KeepMask | None = None  # one file read by position against its keep mask
    types: dict[str, str] | None = None  # the types its files store, where files differ


#: With ``row_ids=True`` every row also carries where it is stored: the file (its index in
#: the scan plan's files) and its physical position.
ROW_FILE_COLUMN = "__lq_file"
ROW_NUMBER_COLUMN = "__lq_row"


def materialized_column(i: int) -> str:
    """The relation column holding the ``i``-th of the builder's materialized columns."""
    return f"__lq_mat{i}"


def _file_key_sql(column: str) -> str:
    """:func:`~lakequery.protocol.sql_spelling.file_key` of DuckDB's ``filename`` column,
    the key of the tables joined on it (evaluated once per vector: the column is constant
    within each file's vectors)."""
    return f"regexp_replace({column}, '{FILE_SCHEME}', '')"


#: Deleted rows are keyed ``file number * 2**32 + row`` (files of fewer than 2**32 rows).
_ROW_KEY_SPAN = 1 << 32


class _StoredSchemas(NamedTuple):
    """What the footers of a list of files told: the column types all of them share, or
    (when they differ) which files store the same schema."""

    shared: dict[str, str] | None
    group_of: dict[str, int] | None = None  # location -> its schema's number


#: File list -> what its footers told. Data files are immutable, so the answer for a list
#: of paths never changes. (Keys of keep branches start with "keep".)
_SHARED_TYPES: dict[tuple[str, ...], _StoredSchemas] = {}
_SHARED_TYPES_MAX = 256


def _remember(key: tuple[str, ...], types: _StoredSchemas) -> None:
    if len(_SHARED_TYPES) >= _SHARED_TYPES_MAX:
        _SHARED_TYPES.pop(next(iter(_SHARED_TYPES)))
    _SHARED_TYPES[key] = types


#: Deleted-row keys up to this many go to DuckDB as a NumPy array, more as an Arrow table.
#: Same rows either way; an anti-join against 50,000 or 250,000 keys cost the same in both
#: forms (DuckDB 1.5.5, 5M probe rows), against 2M keys the NumPy scan measured up to 1.4x
#: slower once (noisy machine), and there the import the Arrow form costs is small next to
#: the scan.
_NUMPY_KEYS_MAX = 1 << 18


class _Builder:
    def __init__(
        self,
        scan: Scan,
        con: duckdb.DuckDBPyConnection,
        row_ids: bool = False,
        materialized: tuple[str, ...] = (),
    ) -> None:
        self.scan = scan
        self.con = con
        self.row_ids = row_ids
        self.numbers_table: str | None = None
        self.offsets: dict[int, int] = {}  # numbered literal branch -> its first number
        self.plan_numbers: dict[int, list[int]] = {}  # branch -> plan index of each file
        # physical columns outside the schema read as BIGINT (row tracking's materialized
        # row id and commit version), NULL in files that lack them
        self.materialized = materialized
        self.storage = scan.snapshot.storage
        self.mode: ColumnMappingMode = scan.snapshot.column_mapping_mode
        self.specs = column_specs(scan)
        self.parts_table: str | None = None
        self.dv_table: str | None = None
        self.keep_selects: dict[str, str] = {}  # partition values -> a keep branch's columns
        self.needs_data = any(not s.partition for s in self.specs) or bool(materialized)
        # One look at all footers decides for every branch: when all files share a schema,
        # branches reuse one set of column types; else each branch reads files of one
        # stored schema (see by_schema).
        self.shared_types: dict[str, str] | None = None
        self.schema_of: dict[str, int] | None = None  # location -> stored schema, if several
        self.group_types: dict[int, dict[str, str]] = {}
        # files whose footers nobody read yet: see duckdb_relation for when they are checked
        self.unread_footers = False
        # the `schema` option when every file is read by the log's schema instead
        self.declared: str | None = None
        self.declarable = (
            _declared_schema(self.specs, materialized)
            if self.needs_data and scan.plan().num_files
            else None
        )
        self.settled = not self.needs_data or not scan.plan().num_files

    def settle(self, one_scan: bool, *, numbered: bool) -> None:
        """Decides how the files' schemas are reconciled, once the layout is known:
        declared when the scan can be and ``one_scan`` (all files in one ``read_parquet``,
        apart from files read by their keep masks), else the footer check. ``numbered``:
        some rows need ``file_row_number`` (deletion vectors, row ids), which DuckDB 1.5
        cannot declare (:data:`_DECLARES_ALL`).

        A declared ``read_parquet`` costs DuckDB ~0.3 ms more to bind and ~0.3 ms more to
        run than a plain one, per ``read_parquet`` however many files it reads (32 one-file
        scans: 12.8 vs 4.0 ms to bind, 60 vs 50 ms to run; one scan of the same 32 files:
        no difference), while the check costs a footer per untagged file once per file list
        (cached in the process). So one scan of many files is declared, and a union of a
        scan per partition group is checked."""
        if self.settled:
            return
        self.settled = True
        supported = _DECLARES_ALL or not numbered
        if self.declarable is not None and one_scan and supported:
            self.declared, self.shared_types = self.declarable
            return
        key = tuple(self.scan.plan().location_list)
        known = _SHARED_TYPES.get(key)
        if known is None:
            known, self.unread_footers = self._read_footers()
            _remember(key, known)
        self.shared_types, self.schema_of = known.shared, known.group_of

    def _read_footers(self, rows: list[int] | None = None) -> tuple[_StoredSchemas, bool]:
        """What the footers of the planned files (or the plan's ``rows``) tell, and whether
        some of those files' footers went unread (their tag's representative was read)."""
        # One footer per schema fingerprint the writer logged, every untagged file
        check, represented_by = _schema_representatives(self.scan, rows)
        paths = [self.storage.duckdb_path(p) for p in check]
        fingerprints = _schema_fingerprints(self.con, paths, check)
        skipped = len(check) < len(represented_by)
        if len(set(fingerprints)) <= 1:
            return _StoredSchemas(self._types_of(check[0])), skipped
        locations = self.scan.plan().location_list
        if rows is not None:
            locations = [locations[i] for i in rows]
        numbers = {fp: i for i, fp in enumerate(dict.fromkeys(fingerprints))}
        group = np.array([numbers[fp] for fp in fingerprints], dtype=np.int64)[represented_by]
        return _StoredSchemas(None, dict(zip(locations, group.tolist(), strict=True))), skipped

    def typed_keep_branches(self, branches: list[_Branch]) -> list[_Branch]:
        """Keep branches (one file each) with the types their files store, for scans read by
        a declared schema, whose per-``read_parquet`` cost (see :meth:`settle`) one-file
        branches would pay each. The footers of the files with deletion vectors are looked
        at as in the check (one per logged fingerprint; cached per file list)."""
        if self.declared is None or not branches:
            return branches
        locations = [b.locations[0] for b in branches]
        key = ("keep", *locations)
        known = _SHARED_TYPES.get(key)
        if known is None:
            where = {loc: i for i, loc in enumerate(self.scan.plan().location_list)}
            known, _ = self._read_footers([where[loc] for loc in locations])
            _remember(key, known)
        if known.shared is not None:
            return [b._replace(types=known.shared) for b in branches]
        return [
            b._replace(types=self._group_types(known.group_of or {}, b.locations[0]))
            for b in branches
        ]

    def _group_types(self, group_of: dict[str, int], location: str) -> dict[str, str]:
        number = group_of[location]
        if number not in self.group_types:
            self.group_types[number] = self._types_of(location)
        return self.group_types[number]

    def _types_of(self, location: str) -> dict[str, str]:
        """The column types ``location`` stores, as DuckDB binds them."""
        first = self.files_sql([location])
        return _bind_types(self.con, f"read_parquet({first}, hive_partitioning=false)", [location])

    def by_schema(self, branch: _Branch) -> list[_Branch]:
        """``branch`` split into one branch per stored schema of its files, each with the
        types its files store. Where files store a column differently (a narrower integer,
        another nesting, a ``timestamp`` as INT96 in one and UTC-adjusted in another), each
        is cast to the table's type on its own: ``union_by_name`` would unify them first,
        and DuckDB's cast between a naive and a zoned timestamp follows the session's time
        zone."""
        schema_of = self.schema_of
        if schema_of is None or branch.keep is not None:
            return [branch]
        parts: dict[int, list[str]] = {}
        for location in branch.locations:
            parts.setdefault(schema_of[location], []).append(location)
        return [
            branch._replace(locations=locs, types=self._group_types(schema_of, locs[0]))
            for locs in parts.values()
        ]

    def files_sql(self, locations: list[str]) -> str:
        return glob_list_sql([self.storage.duckdb_path(p) for p in locations])

    def _register(self, prefix: str, table: pa.Table | dict[str, np.ndarray]) -> str:
        """Registers ``table`` on the connection under a name derived from its contents:
        relations built again over the same data (a loop of queries on a caller's
        connection, which lakequery never closes) replace one registration instead of
        adding one per build."""
        digest = hashlib.blake2b(digest_size=16)

        def part(data: Any) -> None:  # length-prefixed: no two sequences hash alike
            view = memoryview(data).cast("B")
            digest.update(len(view).to_bytes(8, "little"))
            digest.update(view)

        if isinstance(table, dict):
            for key, array in table.items():
                values = np.ascontiguousarray(array)
                part(f"{key}:{values.dtype.str}:{values.shape}".encode())
                part(values)
        else:
            part(str(table.schema).encode())
            for column in table.columns:
                for chunk in column.chunks:  # (a slice shares its buffers: offset too)
                    part(f"{chunk.offset}:{len(chunk)}".encode())
                    for buffer in chunk.buffers():
                        part(b"" if buffer is None else buffer)
                        digest.update(b"n" if buffer is None else b"b")
        name = f"_lq_{prefix}_{digest.hexdigest()}"
        self.con.register(name, table)
        return name

    def register_partitions(self) -> None:
        plan = self.scan.plan()
        parts = plan.files.column("partition_values").combine_chunks()
        locs = [file_key(self.storage.duckdb_path(p)) for p in plan.location_list]
        cols = {s.name: pc.struct_field(parts, s.name) for s in self.specs if s.partition}
        self.parts_table = self._register("parts", pa.table({"loc": locs} | cols))

    def register_numbers(self, branches: list[_Branch], deleted: dict[str, np.ndarray]) -> None:
        """Numbers the files of the numbered branches in branch order and registers the
        deleted rows under those numbers (``number * 2**32 + row``).

        A branch of partition literals learns a row's number as ``offset + file_index``:
        nothing can prune its file list (no Hive columns, no ``filename``). A branch that
        takes partition values from Hive directories or a ``filename`` join cannot use
        ``file_index``: DuckDB prunes such lists with the caller's filters (Hive values at
        bind, join filters on ``filename`` at run time) and then counts only the files it
        kept, so positions would meet another file's deleted rows. Such a branch joins
        ``filename`` to a registered table of numbers instead (slower, and only used when
        the numbered files span more than :data:`MAX_UNION_GROUPS` partitions).
        """
        # the plan's numbering is what DML's row ids name; plain scans never need it
        plan_index = (
            {loc: i for i, loc in enumerate(self.scan.plan().location_list)} if self.row_ids else {}
        )
        order: list[str] = []
        joined: list[str] = []
        for b in branches:
            if not b.numbered:
                continue
            if b.values is not None:
                self.offsets[id(b)] = len(order)
            else:
                joined += b.locations
            order += b.locations
        if joined:
            number = {loc: i for i, loc in enumerate(order)}
            columns = {
                "loc": [file_key(self.storage.duckdb_path(p)) for p in joined],
                "num": pa.array([number[p] for p in joined], pa.int64()),
            }
            if self.row_ids:
                columns["plan"] = pa.array([plan_index[p] for p in joined], pa.int64())
            self.numbers_table = self._register("files", pa.table(columns))
        if self.row_ids:
            self.plan_numbers = {
                id(b): [plan_index[p] for p in b.locations] for b in branches if b.numbered
            }
        if not deleted:
            return
        with_dv = [(i, loc) for i, loc in enumerate(order) if loc in deleted]
        arrays = [deleted[loc] for _, loc in with_dv]
        counts = [len(a) for a in arrays]
        files = np.repeat(np.array([i for i, _ in with_dv], dtype=np.int64), counts)
        rows = np.concatenate(arrays)
        if rows.size and int(rows.max()) >= _ROW_KEY_SPAN:
            raise UnsupportedFeatureError(
                "deletionVectors", detail="a data file with 2**32 or more rows"
            )
        keys = (files * _ROW_KEY_SPAN + rows).astype(np.int64, copy=False)
        if keys.size <= _NUMPY_KEYS_MAX:
            # a dict of NumPy arrays: registering an Arrow object makes DuckDB import pandas
            # and pyarrow.dataset (0.3-0.5 s in a fresh process), as does building one
            # from NumPy in pyarrow
            self.dv_table = self._register("dv", {"k": keys})
        else:
            self.dv_table = self._register("dv", pa.table({"k": pa.array(keys, pa.int64())}))

    def branch_sql(self, branch: _Branch) -> str:
        if branch.keep is not None:
            return self.keep_sql(branch, branch.keep)
        files = self.files_sql(branch.locations)
        options = "union_by_name=false"
        if self.declared is not None:
            options += f", schema={self.declared}"
        # Parquet writers leave NaN out of float min/max, as the Parquet spec asks, and
        # DuckDB orders NaN above every number: unless told that floats can hold NaN, it
        # skips row groups (or folds filters) that hold NaN rows matching `x > 3`,
        # `x != 1` or `isnan(x)`. Float pruning on the upper bound is the price.
        options += ", can_have_nan=true"
        joined = branch.values is None and not branch.hive
        by_name = branch.numbered and branch.values is None  # numbered through filename
        file_column = self.file_column(branch)
        file_ref = f"d.{quote_ident(file_column)}"
        if joined or by_name or branch.hive:
            options += (
                ", filename=true"
                if file_column == "filename"
                else f", filename={quote_str(file_column)}"
            )
        options += ", hive_partitioning=false"
        if branch.deletion_vectors or self.row_ids:
            options += ", file_row_number=true"
        source = f"read_parquet({files}, {options})"
        partitions = None
        if branch.hive:
            partitions = self.hive_values(file_ref)
        elif branch.values is None:
            partitions = {s.name: f"p.{quote_ident(s.name)}" for s in self.specs if s.partition}
        select, actual = self.projection(
            source, branch.locations, branch.values, partitions, branch.types
        )
        for i, name in enumerate(self.materialized):
            value = f"d.{quote_ident(name)}" if name in actual else "NULL"
            select += f", CAST({value} AS BIGINT) AS {materialized_column(i)}"
        if by_name:
            number, plan = "n.num", "n.plan"
        else:
            number = f"(CAST(d.file_index AS BIGINT) + {self.offsets.get(id(branch), 0)})"
        if self.row_ids:
            if not by_name:
                plans = ", ".join(str(i) for i in self.plan_numbers[id(branch)])
                plan = f"CAST(([{plans}])[CAST(d.file_index AS BIGINT) + 1] AS BIGINT)"
            select += (
                f", {plan} AS {ROW_FILE_COLUMN}, "
                f"CAST(d.file_row_number AS BIGINT) AS {ROW_NUMBER_COLUMN}"
            )
        sql = f"SELECT {select} FROM {source} AS d"
        if joined:
            sql += f" JOIN {self.parts_table} AS p ON {_file_key_sql(file_ref)} = p.loc"
        if by_name:
            sql += f" JOIN {self.numbers_table} AS n ON {_file_key_sql(file_ref)} = n.loc"
        if branch.deletion_vectors:
            sql += (
                f" ANTI JOIN {self.dv_table} AS x ON x.k = "
                f"{number} * {_ROW_KEY_SPAN} + d.file_row_number"
            )
        return sql

    def file_column(self, branch: _Branch) -> str:
        """The name DuckDB gives the column of each row's file name in ``branch``'s scan:
        ``filename`` unless a column the files store is named so (DuckDB refuses the
        clash; under another name DuckDB 1.5 no longer skips files by a filter on it)."""
        stored = {s.physical for s in self.specs if not s.partition}
        stored.update(self.materialized, branch.types or self.shared_types or ())
        if any(name.lower() == "filename" for name in stored):
            return "__lq_filename"
        return "filename"

    def hive_values(self, file_ref: str) -> dict[str, str]:
        """Each partition column's value as the verified Hive directories of ``file_ref``
        (DuckDB's file name column) spell it. DuckDB skips files by a filter on these
        expressions as it would by its own Hive columns, and binds a list of files without
        its ``hive_partitioning``, which parses every path at each bind (~0.08 s for
        10,000 files, and a query binds a relation several times)."""
        names = self.scan.snapshot.partition_columns
        pattern = quote_str(hive_file_pattern(names))
        out = {}
        for s in self.specs:
            if s.partition:
                text = f"regexp_extract({file_ref}, {pattern}, {names.index(s.name) + 1})"
                typ = duckdb_type(s.type)
                out[s.name] = text if typ == "VARCHAR" else f"CAST({text} AS {typ})"
        return out

    def projection(
        self,
        source: str,
        locations: list[str],
        values: dict[str, object] | None,
        partitions: dict[str, str] | None = None,
        types: dict[str, str] | None = None,
    ) -> tuple[str, dict[str, str]]:
        """The select list of the logical columns over ``source`` (a scan of
        ``locations``), and the column types it was built from (``types``, the shared ones,
        or those DuckDB binds for this scan)."""
        known = types if types is not None else self.shared_types
        actual: dict[str, str] = known or {}
        if self.needs_data and known is None:
            actual = _bind_types(self.con, source, locations)
        select = (
            ", ".join(
                f"{_column_sql(s, actual, values, self.mode, partitions)} AS {quote_ident(s.name)}"
                for s in self.specs
            )
            or "1 AS _lq_dummy"
        )
        return select, actual

    def keep_sql(self, branch: _Branch, keep: KeepMask) -> str:
        """One file with a DV read by position against its keep mask: nothing between the
        scan and the join (see :mod:`lakequery.engines.keep_masks`). No filter reaches this
        scan, so none of the other branches' options for pushed filters apply, and one
        file needs no ``union_by_name``."""
        (location,) = branch.locations
        path = quote_str(glob_literal(self.storage.duckdb_path(location)))
        declared = ""
        if self.declared is not None and branch.types is None:
            declared = f", schema={self.declared}"
        source = f"read_parquet({path}, hive_partitioning=false{declared})"
        values = branch.values or {}
        # files of one schema and equal partition values share their projection
        types = branch.types if branch.types is not None else self.shared_types
        memo = None if types is None else f"{id(types)} {sorted(values.items())!r}"
        select = self.keep_selects.get(memo) if memo is not None else None
        if select is None:
            # (never with row ids, so never with materialized row-tracking columns)
            select, _ = self.projection(source, branch.locations, values, types=branch.types)
            if memo is not None:
                self.keep_selects[memo] = select
        return (
            f"SELECT {select} FROM {source} AS d POSITIONAL JOIN {keep.table} AS m"
            f" WHERE m.{quote_ident(keep.column)}"
        )


def _branches(
    groups: list[FileGroup],
    deleted: dict[str, np.ndarray],
    layout: str,
    *,
    row_ids: bool,
    literal_groups: list[FileGroup] | None,
) -> list[_Branch]:
    """Branches by how partition values arrive: ``literal`` (one branch per group),
    ``join`` or ``hive`` (all files in one scan). Files whose rows need their file's
    number (those with deletion vectors; every file with ``row_ids``) go into branches of
    partition literals whenever ``literal_groups`` (the plan's files by partition values)
    is given, so that ``file_index`` numbers them (see :meth:`_Builder.register_numbers`).
    """
    out = []

    def numbered(loc: str) -> bool:
        return row_ids or loc in deleted

    if layout in ("join", "hive"):
        locs = [p for g in groups for p in g.locations]
        plain = [p for p in locs if not numbered(p)]
        hive = layout == "hive"
        if plain:
            out.append(_Branch(plain, None, False, hive))
        rest = [p for p in locs if numbered(p)]
        if rest and literal_groups is None:  # too many partitions: numbered by filename
            masked = [p for p in rest if p in deleted]
            unmasked = [p for p in rest if p not in deleted]
            if unmasked:
                out.append(_Branch(unmasked, None, False, False, numbered=True))
            if masked:
                out.append(_Branch(masked, None, True, False, numbered=True))
            return out
        if not rest:
            return out
        groups = literal_groups or []
        keep = set(rest)
        groups = [FileGroup(g.values, [p for p in g.locations if p in keep]) for g in groups]
    for g in groups:
        plain = [p for p in g.locations if not numbered(p)]
        masked = [p for p in g.locations if numbered(p) and p in deleted]
        unmasked = [p for p in g.locations if numbered(p) and p not in deleted]
        if plain:
            out.append(_Branch(plain, g.values, False))
        if unmasked:
            out.append(_Branch(unmasked, g.values, False, numbered=True))
        if masked:
            out.append(_Branch(masked, g.values, True, numbered=True))
    return out


def _annotated_variants(
    scan: Scan, specs: list[ColumnSpec], con: duckdb.DuckDBPyConnection
) -> bool:
    """Whether the scan reads a variant column and a planned file marks a group with
    Parquet's VARIANT logical type (see :mod:`lakequery.engines.variant_files`)."""
    names = [s.name for s in specs if not s.partition and has_variant(s.delta_type)]
    if not names:
        return False
    from lakequery.engines.variant_files import variant_files  # variant columns only

    files = variant_files(scan, names, con)
    return files is not None and files.annotated


def duckdb_relation(
    scan: Scan, con: duckdb.DuckDBPyConnection | None = None, *, row_ids: bool = False
) -> duckdb.DuckDBPyRelation:
    """Builds the scan's relation on ``con`` (when None, a new cursor of lakequery's
    engine database: see :mod:`lakequery.duckdb_databases`).

    With ``row_ids`` the relation has two more columns, :data:`ROW_FILE_COLUMN` and
    :data:`ROW_NUMBER_COLUMN`: the row's file and physical position (what DML marks in
    deletion vectors)."""
    if con is None:
        con = engine_cursor()  # its database has the metadata cache on
    elif con not in _METADATA_CACHE_SET and not is_engine_cursor(con):
        # Delta data files never change in place: footers read while planning are reused
        # when the query runs (DuckDB's cache also checks each file's modification time).
        # Set once per connection (a statement per relation was 4% of a warm query on a
        # small table).
        con.execute("SET parquet_metadata_cache = true")
        _METADATA_CACHE_SET.add(con)
    return _relation(scan, con, row_ids, retry=True)


def _relation(
    scan: Scan, con: duckdb.DuckDBPyConnection, row_ids: bool, *, retry: bool
) -> duckdb.DuckDBPyRelation:
    """:func:`duckdb_relation` on a connection set up for it; built once more (``retry``)
    when a keep mask registered on ``con`` by an earlier build has gone."""
    plan = scan.plan()
    storage = scan.snapshot.storage
    storage.register_duckdb(con)
    specs = column_specs(scan)
    tracking = scan.row_tracking_columns
    if _annotated_variants(scan, specs, con):
        if row_ids or tracking is not None:
            raise UnsupportedFeatureError(  # only DML asks, and it cannot write variants
                "variantType",
                operation="write",
                detail="row positions in files with Parquet VARIANT groups",
            )
        from lakequery.engines.arrow import ArrowStream

        # DuckDB would decode the VARIANT groups and cannot give back their stored bytes
        return con.from_arrow(ArrowStream(scan))
    if tracking is not None:
        from lakequery.row_tracking.columns import check_readable
        from lakequery.row_tracking.reading import materialized_physical_columns

        check_readable(scan.snapshot, plan.files, tracking)
        builder = _Builder(scan, con, True, materialized_physical_columns(scan))
    else:
        builder = _Builder(scan, con, row_ids)
    partition_names = [s.name for s in specs if s.partition]
    extra = [ROW_FILE_COLUMN, ROW_NUMBER_COLUMN] if row_ids else []
    extra += list(tracking or ())
    if not scan.columns and not extra:
        raise SchemaError(
            "to_duckdb() of a scan with columns=[]: a DuckDB relation has at least one "
            "column. Count rows with scan().to_duckdb().aggregate('count(*)') (DuckDB then "
            "reads no column), or use to_arrow() / to_polars(), which return rows without "
            "columns"
        )
    out_cols = ", ".join([quote_ident(c) for c in scan.columns] + [quote_ident(c) for c in extra])
    if plan.num_files == 0:
        empty = ", ".join(
            [f"CAST(NULL AS {duckdb_type(s.type)}) AS {quote_ident(s.name)}" for s in specs]
            + [f"CAST(NULL AS BIGINT) AS {quote_ident(c)}" for c in extra]
        )
        return con.sql(f"SELECT {out_cols} FROM (SELECT {empty}) WHERE false")
    deleted = deleted_rows(plan, storage)
    with_positions = bool(deleted) or builder.row_ids
    layout = "literal"
    if partition_names and hive_layout(scan):
        layout = "hive"  # one scan of all files: no need to group them
        groups = [FileGroup({}, plan.location_list)]
        builder.settle(True, numbered=with_positions)
    else:
        groups = file_groups(plan, partition_names)
        if len(groups) > MAX_UNION_GROUPS:
            layout = "join"
            builder.register_partitions()
        one_scan = len(groups) == 1 or layout == "join"
        builder.settle(one_scan, numbered=with_positions)
    keep: list[tuple[FileGroup, KeepMask]] | None = None
    if deleted:
        from lakequery.engines import keep_masks  # tables with DVs only

        if keep_masks.applicable(scan, deleted, row_ids=builder.row_ids):
            by_values = file_groups(plan, partition_names) if layout == "hive" else groups
            with_dv = [
                FileGroup(g.values, [p for p in g.locations if p in deleted]) for g in by_values
            ]
            try:
                keep = keep_masks.register(
                    con,
                    scan,
                    deleted,
                    [g for g in with_dv if g.locations],
                    storage.duckdb_path,
                    file_key,
                )
            except duckdb.Error as exc:
                raise _missing_file(exc, list(deleted)) from exc
    masked: list[_Branch] = []
    if keep is not None:
        # files with DVs are read by position in branches of partition literals; the
        # others as if the table had no DVs
        masked = builder.typed_keep_branches(
            [_Branch(g.locations, g.values, False, keep=mask) for g, mask in keep]
        )
        groups = [FileGroup(g.values, [p for p in g.locations if p not in deleted]) for g in groups]
        groups = [g for g in groups if g.locations]
        deleted = {}
    literal_groups = None
    if (deleted or builder.row_ids) and layout != "literal":
        by_values = file_groups(plan, partition_names) if layout == "hive" else groups
        numbered = [
            g for g in by_values if builder.row_ids or any(p in deleted for p in g.locations)
        ]
        if len(numbered) <= MAX_UNION_GROUPS:
            literal_groups = numbered
    branches = [
        part
        for b in _branches(
            groups, deleted, layout, row_ids=builder.row_ids, literal_groups=literal_groups
        )
        + masked
        for part in builder.by_schema(b)
    ]
    if any(b.numbered and b.values is None for b in branches) and builder.parts_table is None:
        builder.register_partitions()
    if deleted or builder.row_ids:
        builder.register_numbers(branches, deleted)
    if builder.unread_footers or builder.declared is not None:
        # Files whose footers nobody read: DuckDB opens them only when the query runs (it
        # binds a declared scan with its first file alone), so a missing one (a vacuumed
        # version) is named here, not as DuckDB's error in the caller's fetch.
        require_local_files(scan, [p for b in branches for p in b.locations])
    body = " UNION ALL ".join(builder.branch_sql(b) for b in branches)
    if tracking is not None:
        from lakequery.row_tracking.reading import with_row_tracking_sql

        body = with_row_tracking_sql(body, scan, builder._register, tracking)
    where = ""
    if scan.filter is not None:
        from lakequery.protocol.predicate_sql import to_duckdb_sql

        where = f" WHERE {to_duckdb_sql(scan.filter)}"
    try:
        return con.sql(f"SELECT {out_cols} FROM ({body}){where}")
    except duckdb.Error as exc:  # binding reads Parquet footers: the store may fail
        if retry and keep is not None:
            from lakequery.engines import keep_masks

            if keep_masks.forget_missing(con, exc):
                return _relation(scan, con, row_ids, retry=False)
        raise_storage_failure(exc, plan.location_list[0] if plan.location_list else "")
        if "No files found" in str(exc):
            require_local_files(scan, always=True)  # names the missing file
        raise
