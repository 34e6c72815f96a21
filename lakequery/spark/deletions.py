"""Deletion vectors on Spark: deleted rows are removed from Spark's own Parquet scan by
their exact physical position.

Spark's hidden file metadata gives every row its file and its position
(``_metadata.row_index``, also under row-group skipping and file splits). Files are told
apart by ``_metadata.file_size``, a constant Spark already holds per file: files are put
in buckets so that no two files of a bucket have the same size (the k-th file of a given
size goes to bucket k) and each bucket is its own Parquet scan. That is exact when every
DV file's logged size equals the size the storage reports (what Spark's listing sees) --
checked on the driver. Then, by measurement (benchmarks/RESULTS.md, Spark section):

- **a bitmap filter** (:mod:`lakequery.spark.position_bitmap`) while the deleted rows add
  up to at most :data:`BROADCAST_DELETED_ROWS` and their dense bitmap fits the plan: the
  DVs are decoded on the driver into one word array per bucket, and each row tests its
  bit -- no hash probe per row, about half the cost of the joins below;
- otherwise **an anti-join** on one long built from those constants, ``((row_index << s) +
  file_size) << b) + bucket``, broadcast up to :data:`BROADCAST_DELETED_ROWS`; above it
  the DV *descriptors* (a few dozen bytes per file) go to the executors, where
  ``mapInArrow`` loads each bitmap (inline, or one ranged read of the DV file, with the
  size, CRC and cardinality checks of :mod:`lakequery.dv.files`), and Spark shuffles both
  sides;
- when the sizes do not match (or more than :data:`MAX_BUCKETS` files share a size) or
  the row counts, sizes and bucket numbers do not fit 62 bits, the anti-join's key is the
  (``_metadata.file_path``, ``row_index``) pair, which is always exact.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakequery.errors import StorageError
from lakequery.spark import position_bitmap
from lakequery.spark.position_bitmap import BitmapFilter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakequery.scan import ScanPlan
    from lakequery.storage import Storage

#: Deleted rows (sum of DV cardinalities) up to which the positions are broadcast.
BROADCAST_DELETED_ROWS = 4_000_000

_DESCRIPTOR_FIELDS = ("storageType", "pathOrInlineDv", "offset", "sizeInBytes", "cardinality")
_DESCRIPTOR_DDL = (
    "path string, size bigint, bucket bigint, spark_file string, storageType string, "
    "pathOrInlineDv string, offset int, sizeInBytes int, cardinality bigint, "
    "num_records bigint"
)
_LONG_KEY_DDL = "__lq_key bigint"
_PAIR_KEY_DDL = "__lq_file string, __lq_row bigint"
_KEY_BITS = 62

#: Most files of one size for the one-long key (each bucket is one more Parquet scan).
MAX_BUCKETS = 8

_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")
_SCHEME = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:)?/*")
_EMPTY_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):///")


def spark_path(location: str, *, glob: bool = True) -> str:
    """The path Spark (Hadoop) reads for a storage location: ``s3://`` becomes ``s3a://``,
    a local path gets ``file://``, and (for paths Spark globs: the files to read, not
    ``basePath``) Hadoop's glob characters are escaped."""
    escaped = _GLOB_CHARS.sub(r"\\\1", location) if glob else location
    if escaped.startswith("s3://"):
        return "s3a://" + escaped[len("s3://") :]
    if escaped.startswith("/"):
        return "file://" + escaped
    return escaped


def _strip_scheme(text: str) -> str:
    return _SCHEME.sub("", text)


def spark_file_names(df: DataFrame, locations: Sequence[str]) -> list[str]:
    """Spark's ``_metadata.file_path`` of each location (``df`` is a scan of them).

    Spark's file index lists the files (``inputFiles``) as Hadoop URIs, percent-encoded;
    they are matched to the locations by their decoded path without scheme. A row's
    ``_metadata.file_path`` is the same URI after Hadoop's ``Path`` normalisation, which
    writes an empty authority as ``scheme:/path`` (not ``scheme:///path``).
    """
    by_path = {unquote(_strip_scheme(s)): _EMPTY_AUTHORITY.sub(r"\1:/", s) for s in df.inputFiles()}
    out = []
    for loc in locations:
        name = by_path.get(_strip_scheme(loc))
        if name is None:
            listed = sorted(by_path)[:3]
            raise StorageError(loc, "find in Spark's file index", f"Spark lists {listed}")
        out.append(name)
    return out


@dataclass(frozen=True)
class LongKey:
    """How the one-long join key is laid out for a set of DV files."""

    size_shift: int  # bits below the file size (the bucket number)
    row_shift: int  # bits below the row position (file size and bucket)
    buckets: np.ndarray[Any, np.dtype[np.int64]]  # bucket of each file, in plan order


def long_key(plan: ScanPlan, storage: Storage) -> LongKey | None:
    """The layout of the one-long join key, or None when it would not be exact for these
    files (see the module docstring)."""
    sizes = plan.files.column("size").to_numpy()
    rows = plan.files.column("num_records")
    if rows.null_count or len(sizes) == 0 or sizes.min() < 0:
        return None
    order = np.argsort(sizes, kind="stable")
    ordered = sizes[order]
    starts = np.r_[0, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1]
    run = np.arange(len(sizes)) - np.repeat(starts, np.diff(np.r_[starts, len(sizes)]))
    buckets = np.empty(len(sizes), dtype=np.int64)
    buckets[order] = run
    if int(buckets.max()) >= MAX_BUCKETS:
        return None
    bucket_bits = int(buckets.max()).bit_length()
    size_bits = int(sizes.max()).bit_length()
    row_bits = int(pc.max(rows).as_py() or 0).bit_length()
    if bucket_bits + size_bits + row_bits > _KEY_BITS:
        return None
    locations = plan.location_list
    stored = storage.map_io(storage.size, locations)
    if not np.array_equal(np.asarray(stored, dtype=np.int64), sizes):
        return None
    return LongKey(bucket_bits, bucket_bits + size_bits, buckets)


class Deletions:
    """The deleted rows of planned files that all have deletion vectors."""

    def __init__(self, spark: SparkSession, plan: ScanPlan, storage: Storage) -> None:
        from pyspark.sql import functions as F

        self.key = long_key(plan, storage)
        self.locations = plan.location_list
        if self.key is None:
            listing = spark.read.schema("__lq_unused long").parquet(
                *[spark_path(loc) for loc in plan.location_list]
            )
            names = spark_file_names(listing, plan.location_list)
            buckets = pa.nulls(plan.num_files, pa.int64())
        else:
            names = [""] * plan.num_files
            buckets = pa.array(self.key.buckets, pa.int64())
        dvs = plan.files.column("deletion_vector").combine_chunks()
        descriptors = pa.table(
            {
                "path": plan.files.column("path"),
                "size": plan.files.column("size"),
                "bucket": buckets,
                "spark_file": pa.array(names, pa.string()),
                **{name: pc.struct_field(dvs, name) for name in _DESCRIPTOR_FIELDS},
                "num_records": plan.files.column("num_records"),
            }
        )
        shifts = None if self.key is None else (self.key.size_shift, self.key.row_shift)
        ddl = _PAIR_KEY_DDL if self.key is None else _LONG_KEY_DDL
        total = int(pc.sum(pc.struct_field(dvs, "cardinality")).as_py() or 0)
        self.filters: dict[int, BitmapFilter] | None = None
        if total <= BROADCAST_DELETED_ROWS:
            # A broadcast collects its rows on the driver anyway: load them there and
            # spare the job that would compute them on the executors.
            positions = deleted_positions(descriptors, storage)
            if self.key is not None:
                self.filters = _bitmap_filters(spark, self.key, descriptors, positions)
                if self.filters is not None:
                    return
            keys = list(_keys(descriptors, positions, shifts))
            table = pa.Table.from_batches(keys, schema=_key_schema(shifts))
            self.rows = F.broadcast(spark.createDataFrame(table, schema=ddl))
            return
        frame = spark.createDataFrame(descriptors, schema=_DESCRIPTOR_DDL)
        tasks = max(1, min(plan.num_files, spark.sparkContext.defaultParallelism))
        fn = functools.partial(
            _executor_keys, root=storage.root, storage_options=storage.options, shifts=shifts
        )
        # a hint, or Spark's size estimate of the mapInArrow output would broadcast it
        self.rows = frame.repartition(tasks).mapInArrow(fn, ddl).hint("shuffle_hash")

    def buckets(self, locations: Sequence[str]) -> list[tuple[int, list[str]]]:
        """``locations`` (some of the planned DV files) split into the groups that must be
        scanned separately, each with its bucket number."""
        if self.key is None:
            return [(0, list(locations))]
        bucket_of = dict(zip(self.locations, self.key.buckets.tolist(), strict=True))
        out: dict[int, list[str]] = {}
        for loc in locations:
            out.setdefault(bucket_of[loc], []).append(loc)
        return sorted(out.items())

    def apply(self, df: DataFrame, bucket: int) -> DataFrame:
        """``df`` (a Parquet scan of files of one bucket) without the deleted rows."""
        from pyspark.sql import functions as F

        if self.filters is not None:
            return self.filters[bucket].apply(df)
        position = F.col("_metadata.row_index")
        if self.key is not None:
            key = F.shiftleft(position, self.key.row_shift) + F.shiftleft(
                F.col("_metadata.file_size"), self.key.size_shift
            )
            keyed = df.withColumn("__lq_key", key + F.lit(bucket).cast("long"))
            return keyed.join(self.rows, on="__lq_key", how="left_anti").drop("__lq_key")
        keyed = df.withColumn("__lq_file", F.col("_metadata.file_path")).withColumn(
            "__lq_row", position
        )
        kept = keyed.join(self.rows, on=["__lq_file", "__lq_row"], how="left_anti")
        return kept.drop("__lq_file", "__lq_row")


def _key_schema(shifts: tuple[int, int] | None) -> pa.Schema:
    fields: list[pa.Field[Any]] = [pa.field("__lq_key", pa.int64())]
    if shifts is None:
        fields = [pa.field("__lq_file", pa.string()), pa.field("__lq_row", pa.int64())]
    return pa.schema(fields)


def _executor_keys(
    batches: Iterator[pa.RecordBatch],
    *,
    root: str,
    storage_options: Mapping[str, Any] | None,
    shifts: tuple[int, int] | None,
) -> Iterator[pa.RecordBatch]:
    """Executor side of :func:`deleted_keys` (``mapInArrow`` over DV descriptors)."""
    from lakequery.storage import open_storage

    yield from deleted_keys(batches, storage=open_storage(root, storage_options), shifts=shifts)


def deleted_keys(
    batches: Iterator[pa.RecordBatch], *, storage: Storage, shifts: tuple[int, int] | None
) -> Iterator[pa.RecordBatch]:
    """The join keys of the deleted rows of each DV descriptor row: one long
    (``shifts`` = the size and row shifts of :class:`LongKey`) or (Spark file, row)."""
    for batch in batches:
        table = pa.Table.from_batches([batch])
        yield from _keys(table, deleted_positions(table, storage), shifts)


def deleted_positions(table: pa.Table, storage: Storage) -> list[np.ndarray[Any, Any]]:
    """The sorted deleted positions of each DV descriptor row of ``table``, never more
    than the file has rows (:func:`lakequery.dv.files.deleted_positions`)."""
    from lakequery.dv import files
    from lakequery.dv.descriptor import Descriptor

    descriptors = table.select(list(_DESCRIPTOR_FIELDS)).to_pylist()
    paths = [str(p) for p in table.column("path").to_pylist()]
    items = [(p, Descriptor.from_dict(d)) for p, d in zip(paths, descriptors, strict=True)]
    records = table.column("num_records").to_pylist()
    return [
        p.astype(np.int64, copy=False) for p in files.deleted_positions(storage, items, records)
    ]


def _keys(
    table: pa.Table, deleted: Sequence[np.ndarray[Any, Any]], shifts: tuple[int, int] | None
) -> Iterator[pa.RecordBatch]:
    schema = _key_schema(shifts)
    sizes = table.column("size").to_pylist()
    buckets = table.column("bucket").to_pylist()
    names = table.column("spark_file").to_pylist()
    for size, bucket, name, positions in zip(sizes, buckets, names, deleted, strict=True):
        if shifts is not None:
            size_shift, row_shift = shifts
            offset = (int(size or 0) << size_shift) + int(bucket or 0)
            keys = (positions << np.int64(row_shift)) + np.int64(offset)
            yield pa.record_batch([pa.array(keys, pa.int64())], schema=schema)
        else:
            files = pa.repeat(pa.scalar(name, pa.string()), len(positions))
            rows = pa.array(positions, pa.int64())
            yield pa.record_batch([files, rows], schema=schema)


def _bitmap_filters(
    spark: SparkSession,
    key: LongKey,
    descriptors: pa.Table,
    deleted: Sequence[np.ndarray[Any, Any]],
) -> dict[int, BitmapFilter] | None:
    """One bitmap filter per bucket (whose files have pairwise different sizes), or None
    when any of them cannot be built (the join is used for all)."""
    sizes = descriptors.column("size").to_numpy()
    filters = {}
    for bucket in np.unique(key.buckets).tolist():
        members = np.flatnonzero(key.buckets == bucket)
        bitmap = position_bitmap.build(
            sizes[members].tolist(), [deleted[i] for i in members.tolist()]
        )
        made = None if bitmap is None else BitmapFilter.create(spark, bitmap)
        if made is None:
            return None
        filters[bucket] = made
    return filters


__all__ = [
    "BROADCAST_DELETED_ROWS",
    "Deletions",
    "LongKey",
    "deleted_keys",
    "deleted_positions",
    "long_key",
    "spark_file_names",
    "spark_path",
]
