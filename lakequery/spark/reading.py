"""Reading Delta tables into Spark DataFrames with Spark's own Parquet reader.

The driver resolves the snapshot and plans the scan with lakequery's one planner (partition
values + min/max statistics); Spark's vectorised Parquet reader then reads the surviving
files on the executors. Nothing proportional to the data passes through the driver: it
handles file names, partition values and deletion-vector *descriptors* only.

How each part of the Delta read maps onto Spark:

- **Columns.** Files are read with the table's *physical* schema (column-mapping names,
  ``parquet.field.id`` metadata, ``void`` columns left out) and renamed to logical names in
  a projection; a nested rename is a struct cast. Spark's reader widens older files' types
  (int -> long, float -> double, decimals, date -> timestamp_ntz) itself.
- **Partition values** come from the log, never from directory names, unless the
  directories provably spell them (:func:`lakequery.engines.layout.hive_layout`): then
  Spark's own partition discovery adds them as constant vectors (``basePath``). Otherwise
  up to :data:`MAX_LITERAL_GROUPS` groups of files with equal values are read as one scan
  each with the values as literals (``UNION ALL``); above that, the values are joined by
  file with a broadcast table.
- **Deletion vectors.** Files without a DV are read as they are; the others are read
  with Spark's hidden ``_metadata`` columns and lose their deleted positions, through a
  bitmap filter or an anti-join (:mod:`lakequery.spark.deletions`).
- **Filters** (SQL text or ``pyarrow.compute`` expressions, the language of
  :meth:`lakequery.Snapshot.scan`) prune files on the driver and are applied to rows as a
  Spark SQL condition, which Spark pushes into its Parquet reader (row-group skipping);
  column pruning works as for any Parquet scan.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakequery.engines.deletion import dv_mask
from lakequery.engines.layout import FileGroup, column_specs, file_groups, hive_layout
from lakequery.errors import ObjectNotFoundError, UnsupportedFeatureError
from lakequery.protocol.schema import (
    DecimalType,
    DeltaType,
    StructType,
    TypeChange,
    parse_type,
    type_changes,
    type_to_json,
)
from lakequery.spark.deletions import Deletions, spark_file_names, spark_path
from lakequery.spark.predicate import quote_identifier, to_spark_sql
from lakequery.spark.schema import is_void, physical_schema, spark_type
from lakequery.spark.workers import ensure_workers

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakequery.scan import Scan, ScanPlan
    from lakequery.storage import TableLocation

#: Above this many groups of partition values, values are joined by file, not unioned.
MAX_LITERAL_GROUPS = 64


def read(
    spark: SparkSession,
    uri: TableLocation,
    *,
    version: int | None = None,
    as_of: datetime | str | None = None,
    columns: Sequence[str] | None = None,
    filter: str | Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """A Delta table (any version) as a Spark DataFrame, read by Spark's Parquet reader.

    Args:
        spark: The session to read with. Its Python workers need lakequery and pyarrow
            (checked once per session, see :func:`lakequery.spark.ensure_workers`).
        uri: The table location: a local path, ``file://``, or ``s3://`` (read by Spark
            as ``s3a://``: the session needs ``hadoop-aws`` and its ``fs.s3a.*`` settings;
            ``storage_options`` are lakequery's own, for the log and DV files).
        version: Read this version (default: the latest).
        as_of: Read the newest version committed at or before this time.
        columns: Top-level columns to return (default: all, in table order).
        filter: A SQL predicate or ``pyarrow.compute.Expression`` (as in
            :meth:`lakequery.Snapshot.scan`): prunes files, then filters rows.
        storage_options: Options for lakequery's storage (s3fs arguments).

    Returns:
        A lazy DataFrame with the table's logical column names and types.

    Example:
        >>> import lakequery as lq, lakequery.spark as lqs   # doctest: +SKIP
        >>> df = lqs.read(spark, lq.demo.example_table(), filter="kind = 'buy'")  # doctest: +SKIP
        >>> df.groupBy("day").sum("amount").show()            # doctest: +SKIP
    """
    from lakequery.table import DeltaTable

    table = DeltaTable(uri, storage_options=storage_options)
    scan = table.snapshot(version=version, as_of=as_of).scan(columns=columns, filter=filter)
    return scan_frame(spark, scan)


def scan_frame(spark: SparkSession, scan: Scan) -> DataFrame:
    """The rows of a planned :class:`~lakequery.Scan` as a Spark DataFrame."""
    from pyspark.sql.types import StructField, StructType

    ensure_workers(spark)
    plan = scan.plan()
    snap = scan.snapshot
    if plan.num_files == 0:
        schema = snap.metadata.schema
        fields = [StructField(n, spark_type(schema[n].type), True) for n in scan.columns]
        return spark.createDataFrame([], StructType(fields))
    has_dv = np.asarray(dv_mask(plan).to_numpy(zero_copy_only=False), dtype=bool)
    deletions = Deletions(spark, _subset(plan, has_dv), snap.storage) if has_dv.any() else None
    parts: list[DataFrame] = []
    for overrides, in_group in _file_type_groups(scan, plan):
        frame = _Frame(spark, scan, overrides)
        if (in_group & ~has_dv).any():
            parts.append(frame.read(_subset(plan, in_group & ~has_dv), None))
        if (in_group & has_dv).any():
            parts.append(frame.read(_subset(plan, in_group & has_dv), deletions))
    df = functools.reduce(lambda a, b: a.unionByName(b), parts)
    if scan.filter is not None:
        df = df.where(to_spark_sql(scan.filter))
    return df.select(*[quote_identifier(c) for c in scan.columns])


def _spark_widens(change: TypeChange) -> bool:
    """Whether Spark's Parquet reader reads files of the old type as the new one: it does
    every widening the protocol allows except byte/short to a decimal of fewer than 10
    integer digits (measured with Spark 4.1)."""
    old, new = change.from_type, change.to_type
    return not (isinstance(new, DecimalType) and getattr(old, "name", "") in ("byte", "short"))


def _file_type_groups(scan: Scan, plan: ScanPlan) -> list[tuple[dict[str, Any], Any]]:
    """The planned files grouped by the stored types of the columns Spark cannot widen
    (one footer read per file, only on tables with such type changes): each group is
    read with those columns in their stored type and cast to the table type."""
    everything = np.ones(plan.num_files, dtype=bool)
    snap = scan.snapshot
    specs = {s.name: s for s in column_specs(scan) if not s.partition}
    columns: list[str] = []
    for change in type_changes(snap.metadata.schema):
        if _spark_widens(change) or change.path[0] not in specs:
            continue
        if len(change.path) > 1 or change.field_path:
            raise UnsupportedFeatureError(
                "typeWidening",
                detail=f"Spark's Parquet reader cannot read {type_to_json(change.from_type)} as "
                f"{type_to_json(change.to_type)} inside {'.'.join(change.path)}",
            )
        columns.append(change.path[0])
    if not columns:
        return [({}, everything)]
    from lakequery.parquet_footers import footer_schemas
    from lakequery.protocol.schema import from_arrow_type

    paths = [str(p) for p in plan.files.column("path").to_pylist()]
    keys: list[tuple[Any, ...]] = []
    for schema in footer_schemas(snap.storage, paths):
        stored = [
            schema.field(specs[n].physical).type if specs[n].physical in schema.names else None
            for n in columns
        ]
        keys.append(tuple(None if t is None else type_to_json(from_arrow_type(t)) for t in stored))
    groups = []
    for key in sorted(set(keys), key=repr):
        overrides = {
            specs[n].physical: spark_type(parse_type(t))
            for n, t in zip(columns, key, strict=True)
            if t is not None
        }
        groups.append((overrides, np.fromiter((k == key for k in keys), dtype=np.bool_)))
    return groups


def _subset(plan: ScanPlan, mask: Any) -> ScanPlan:
    from lakequery.scan import ScanPlan

    keep = pa.array(mask, pa.bool_())
    return ScanPlan(plan.files.filter(keep), plan.total_files, plan.locations.filter(keep))


def _parquet(reader: Any, locations: Sequence[str]) -> DataFrame:
    """``reader.parquet`` of the locations; a missing file is lakequery's error."""
    from pyspark.errors import AnalysisException

    try:
        df: DataFrame = reader.parquet(*[spark_path(loc) for loc in locations])
    except AnalysisException as exc:
        if exc.getCondition() != "PATH_NOT_FOUND":
            raise
        missing = next((loc for loc in locations if spark_path(loc) in str(exc)), locations[0])
        raise ObjectNotFoundError(missing, "read data file") from exc
    return df


class _Frame:
    """Builds the DataFrame of a set of planned files: physical columns read by Spark,
    deleted rows removed, renamed to logical columns, partition values added."""

    def __init__(self, spark: SparkSession, scan: Scan, overrides: Mapping[str, Any]) -> None:
        self.spark = spark
        self.scan = scan
        snap = scan.snapshot
        self.specs = column_specs(scan)
        self.partitions = [s.name for s in self.specs if s.partition]
        physical = physical_schema(
            snap.metadata.schema,
            snap.column_mapping_mode,
            [s.name for s in self.specs if not s.partition],
            exclude=snap.partition_columns,
        )
        for field in physical.fields:  # stored types that Spark cannot widen itself
            field.dataType = overrides.get(field.name, field.dataType)
        self.physical = physical

    def read(self, plan: ScanPlan, deletions: Deletions | None) -> DataFrame:
        """The plan's rows with logical columns (partition values included)."""
        if self.partitions and hive_layout(self.scan):
            return self._hive(plan, deletions)
        groups = file_groups(plan, self.partitions)
        if len(groups) <= MAX_LITERAL_GROUPS:
            branches = [self._group(plan, g, deletions) for g in groups]
            return functools.reduce(lambda a, b: a.unionByName(b), branches)
        return self._joined(plan, deletions)

    # -- the three ways to add partition values -------------------------------------------------
    def _hive(self, plan: ScanPlan, deletions: Deletions | None) -> DataFrame:
        """Spark's partition discovery reads the values from the directories, which
        :func:`hive_layout` proved to spell the logged values."""
        from pyspark.sql.types import StructField, StructType

        schema = self.scan.snapshot.metadata.schema
        partition_fields = [
            StructField(n, spark_type(schema[n].type), True) for n in self.partitions
        ]
        read_schema = StructType(list(self.physical.fields) + partition_fields)
        root = spark_path(self.scan.snapshot.storage.root, glob=False)
        df = self._scan(plan.location_list, deletions, schema=read_schema, base_path=root)
        return self._logical(df, partition_columns=True)

    def _group(self, plan: ScanPlan, group: FileGroup, deletions: Deletions | None) -> DataFrame:
        """One scan of the files sharing one tuple of values, which become literals."""
        return self._logical(self._scan(group.locations, deletions), literals=group.values)

    def _joined(self, plan: ScanPlan, deletions: Deletions | None) -> DataFrame:
        """Many groups: the values are joined to the rows by file (a broadcast table)."""
        from pyspark.sql import functions as F

        df = self._scan(plan.location_list, deletions)
        names = spark_file_names(df, plan.location_list)
        parts = plan.files.column("partition_values").combine_chunks()
        values = {n: _zone_free(pc.struct_field(parts, n)) for n in self.partitions}
        lookup = self.spark.createDataFrame(
            pa.table({"__lq_file": pa.array(names, pa.string()), **values})
        )
        keyed = df.withColumn("__lq_file", F.col("_metadata.file_path"))
        joined = keyed.join(F.broadcast(lookup), on="__lq_file", how="inner")
        return self._logical(joined, partition_columns=True)

    # -- reading --------------------------------------------------------------------------------
    def _scan(
        self,
        locations: Sequence[str],
        deletions: Deletions | None,
        *,
        schema: Any = None,
        base_path: str | None = None,
    ) -> DataFrame:
        """Spark's Parquet scan of the files, without their deleted rows."""
        reader = self.spark.read.schema(self.physical if schema is None else schema)
        if base_path is not None:
            reader = reader.option("basePath", base_path)
        if deletions is None:
            return _parquet(reader, locations)
        scans = [
            deletions.apply(_parquet(reader, bucket), number)
            for number, bucket in deletions.buckets(locations)
        ]
        return functools.reduce(lambda a, b: a.unionByName(b), scans)

    # -- logical columns ------------------------------------------------------------------------
    def _logical(
        self,
        df: DataFrame,
        *,
        literals: Mapping[str, Any] | None = None,
        partition_columns: bool = False,
    ) -> DataFrame:
        from pyspark.sql import functions as F

        physical_types = {f.name: f.dataType for f in self.physical.fields}
        cols: list[Column] = []
        for spec in self.specs:
            target = spark_type(spec.delta_type)
            if is_void(spec.delta_type):
                col = F.lit(None).cast(target)
            elif spec.partition and partition_columns:
                col = F.col(quote_identifier(spec.name)).cast(target)  # _zone_free's text
            elif spec.partition:
                value = (literals or {}).get(spec.name)
                if isinstance(value, datetime):
                    # as text (with its offset when it has a zone): a zone-less value would
                    # be read in the session's zone (see _zone_free), and a datetime goes to
                    # the JVM as a java.sql.Timestamp, whose hybrid Julian calendar moved
                    # values before 1582-10-15 by days
                    value = value.isoformat(sep=" ")
                elif isinstance(value, date):
                    # PySpark spells a date with strftime('%Y'), which has no leading zeros
                    # on Linux: the JVM refused the year 1 as '1-01-01'
                    value = value.isoformat()
                col = F.lit(value).cast(target)
            else:
                col = F.col(quote_identifier(spec.physical))
                stored = physical_types[spec.physical]
                col = _with_void_fields(col, spec.delta_type, stored)
                if stored != target:
                    col = col.cast(target)
            cols.append(col.alias(spec.name))
        return df.select(*cols)


def _has_void_field(t: DeltaType) -> bool:
    """Whether the struct ``t`` has a ``void`` field at any depth of structs (no void sits
    in an array or map: digest 8.3)."""
    return isinstance(t, StructType) and any(
        is_void(f.type) or _has_void_field(f.type) for f in t.fields
    )


def _with_void_fields(col: Column, t: DeltaType, stored: Any) -> Column:
    """The struct ``col`` as the files store it (``stored``, its Spark type: the fields
    of ``t`` that are not void, in order) with a NULL for each void field of ``t``, so
    that it casts to the logical struct field by field (Spark casts structs by position);
    a NULL struct stays NULL."""
    from pyspark.sql import functions as F

    if not _has_void_field(t):
        return col
    assert isinstance(t, StructType)
    kept = iter(stored.fields)
    members = []
    for f in t.fields:
        if is_void(f.type):
            members.append(F.lit(None).alias(f.name))
        else:
            inner = next(kept)
            value = _with_void_fields(col.getField(inner.name), f.type, inner.dataType)
            members.append(value.alias(f.name))
    return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*members))


def _zone_free(values: Any) -> Any:
    """``timestamp_ntz`` partition values as text: Spark reads a zone-less timestamp handed
    to it (a Python ``datetime`` literal, an Arrow column of ``createDataFrame``) as a
    time in the session's zone, so 12:00 came back as 04:00 in Los Angeles (and a value in
    a daylight-saving gap failed); text cast to ``timestamp_ntz`` has no zone to apply."""
    if pa.types.is_timestamp(values.type) and values.type.tz is None:
        return pc.strftime(values, format="%Y-%m-%d %H:%M:%S")  # %S has the fraction
    return values


__all__ = ["MAX_LITERAL_GROUPS", "read", "scan_frame"]
