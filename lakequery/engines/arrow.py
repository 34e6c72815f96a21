"""PyArrow adapter: a streaming RecordBatchReader over the pruned files.

Files are read with ``pyarrow.dataset`` using the table's physical schema (files that lack
a column yield nulls, narrower types are cast up): one scanner for the files without
deletion vectors of every partition, the filter pushed down, and one for the files with
DVs, without pushdown. Every batch is tagged with its file, which gives its partition
values; a file's batches arrive in order, so the rows' physical positions in a file with
a DV are known and a numpy kernel masks the deleted ones. Batches are then relabelled to
logical names, given their partition columns and filtered, small ones together (up to
:data:`BATCH_ROWS` rows: a table of many small files gives a small batch per file, and
finishing one costs ~0.1 ms whatever its size). Memory stays bounded by a few batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lakequery.arrow_buffers import bits_array
from lakequery.engines.deletion import deleted_rows
from lakequery.engines.layout import FileGroup, column_specs, file_groups
from lakequery.engines.variant_files import variant_files
from lakequery.errors import ObjectNotFoundError, PredicateError
from lakequery.protocol.arrow_types import holds
from lakequery.protocol.column_mapping import physical_schema, to_logical
from lakequery.protocol.schema import StructType, has_variant
from lakequery.storage.engine_errors import translated
from udfs.dv_mask import keep_bits

if TYPE_CHECKING:
    from lakequery.row_tracking.reading import ArrowRowIds
    from lakequery.scan import Scan

BATCH_ROWS = 128 * 1024

_NO_ROWS = np.empty(0, dtype=np.int64)


def _parquet_format() -> ds.ParquetFileFormat:
    options: Any = ds.ParquetReadOptions
    return ds.ParquetFileFormat(read_options=options(coerce_int96_timestamp_unit="us"))


def _nulls(n: int, typ: pa.DataType) -> pa.Array[Any]:
    out: pa.Array[Any] = pa.nulls(n, typ)  # type: ignore[call-overload]
    return out


def _constant(value: object, typ: pa.DataType, n: int) -> pa.Array[Any]:
    if value is None:
        return _nulls(n, typ)
    out: pa.Array[Any] = pa.repeat(pa.scalar(value, typ), n)  # type: ignore[call-overload]
    return out


def _stores(schema: pa.Schema, path: Sequence[str]) -> bool:
    """Whether the files' ``schema`` holds the column or struct field at ``path``."""
    t: Any = schema
    for name in path:
        if not isinstance(t, (pa.Schema, pa.StructType)):
            return True  # a list's or map's contents: the column holds them
        i = t.get_field_index(name)
        if i < 0:
            return False
        t = t.field(i).type
    return True


class _Reader:
    """State shared by the batches of one scan."""

    def __init__(self, scan: Scan) -> None:
        snap = scan.snapshot
        self.plan = scan.plan()
        self.specs = column_specs(scan)
        self.table_schema: StructType = snap.metadata.schema
        self.mode = snap.column_mapping_mode
        data_specs = [s for s in self.specs if not s.partition]
        full = physical_schema(self.table_schema, self.mode)
        self.phys = pa.schema(
            [full.field(s.physical) for s in data_specs if full.get_field_index(s.physical) >= 0]
        )
        self.present = [s.name for s in data_specs if self.phys.get_field_index(s.physical) >= 0]
        variants = [s.name for s in data_specs if has_variant(s.delta_type)]
        if variants:  # refuses files that shred them: the scan would drop typed_value
            variant_files(scan, variants)
        self.row_ids: ArrowRowIds | None = None
        if scan.row_tracking_columns is not None:  # every file read whole, in order
            from lakequery.row_tracking.reading import ArrowRowIds

            self.row_ids = ArrowRowIds(scan)
            self.phys = pa.schema(list(self.phys) + self.row_ids.fields())
        self.out_schema = scan.output_schema
        self.predicate = scan.filter_source if scan.filter is not None else None
        self.filter: pc.Expression | None = None
        self.pushdown: pc.Expression | None = None
        if scan.filter is not None:  # the predicate language is loaded by filtered reads only
            from lakequery.protocol.predicates import And, referenced_columns, to_pyarrow

            self.filter = to_pyarrow(scan.filter)  # applied to every batch read

            # Into the dataset scan go the conjuncts over columns every file stores, and
            # none over floating-point ones: pyarrow skips row groups by footer min/max,
            # which leave NaN out (Parquet's rule; other writers' files have them), so
            # `x = 'NaN'` would lose the rows DuckDB and Polars return.
            def pushable(e: Any) -> bool:
                paths = referenced_columns(e)
                if not all(_stores(self.phys, p) for p in paths):
                    return False  # (a void struct field is in no file)
                used = {p[0] for p in paths}
                floating = pa.types.is_floating
                return not any(holds(self.phys.field(n).type, floating) for n in used)

            conjuncts = scan.filter.items if isinstance(scan.filter, And) else (scan.filter,)
            pushed = [c for c in conjuncts if pushable(c)] if self.mode == "none" else []
            if pushed:
                self.pushdown = to_pyarrow(pushed[0] if len(pushed) == 1 else And(tuple(pushed)))
        self.fs, self.to_fs = snap.storage.arrow_filesystem()
        self.groups = file_groups(self.plan, [s.name for s in self.specs if s.partition])
        self.deleted = deleted_rows(self.plan, snap.storage)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """:meth:`_batches`; an overflow of the filter's integer arithmetic (int64 here,
        exact in the DuckDB and Polars engines) is a :class:`PredicateError`."""
        try:
            yield from self._batches()
        except pa.ArrowInvalid as exc:
            if self.predicate is None or "overflow" not in str(exc).lower():
                raise
            raise PredicateError(
                self.predicate,
                "integer overflow: the Arrow engine computes the filter's integer "
                "arithmetic in int64 (the DuckDB and Polars engines compute it exactly)",
            ) from exc

    def _batches(self) -> Iterator[pa.RecordBatch]:
        """The scan's batches: the files' batches finished together, up to
        :data:`BATCH_ROWS` rows (the most one holds; finishing one costs ~0.1 ms whatever
        its size, and a table of many small files yields a small batch per file)."""
        raws: list[pa.RecordBatch] = []
        groups: list[FileGroup] = []
        rows = 0
        for raw, group in self._raw_batches():
            if raws and rows + raw.num_rows > BATCH_ROWS:
                yield from self._finish(raws, groups)
                raws, groups, rows = [], [], 0
            raws.append(raw)
            groups.append(group)
            rows += raw.num_rows
        if raws:
            yield from self._finish(raws, groups)

    def _raw_batches(self) -> Iterator[tuple[pa.RecordBatch, FileGroup]]:
        """Non-empty batches as read (physical names, deleted rows dropped), each with the
        group of its file. One scanner reads the files without DVs of every group (a
        dataset and scanner per group cost ~0.4 ms each: 0.36 of the 0.53 s of a
        1,000-partition table's 1M rows), another those with DVs."""
        group_of = {p: g for g in self.groups for p in g.locations}
        locations = [p for g in self.groups for p in g.locations]
        if self.row_ids is not None:  # every file read whole, in order
            plain, masked = [], locations
        else:
            plain = [p for p in locations if p not in self.deleted]
            masked = [p for p in locations if p in self.deleted]
        try:
            if plain:
                yield from self._plain_batches(plain, group_of)
            if masked:
                yield from self._masked_batches(masked, group_of)
        except FileNotFoundError as exc:
            # object stores open files lazily: a missing one surfaces mid-scan
            raise _missing(exc, locations, self.to_fs) from exc

    def _dataset(self, locations: list[str]) -> tuple[ds.Dataset, dict[str, str]]:
        """The dataset of ``locations`` and the location of each of its fragment paths."""
        try:
            dataset = ds.dataset(
                [self.to_fs(p) for p in locations],
                schema=self.phys,
                format=_parquet_format(),
                filesystem=self.fs,
            )
        except FileNotFoundError as exc:
            raise _missing(exc, locations, self.to_fs) from exc
        fragments = [f.path for f in dataset.get_fragments()]  # in the order of locations
        return dataset, dict(zip(fragments, locations, strict=True))

    def _plain_batches(
        self, locations: list[str], group_of: dict[str, FileGroup]
    ) -> Iterator[tuple[pa.RecordBatch, FileGroup]]:
        """Files without DVs, with the filter pushed down: ``scan_batches`` tags each batch
        with its file, whose group gives the partition columns."""
        dataset, location_of = self._dataset(locations)
        scanner = dataset.scanner(
            columns=self.phys.names, filter=self.pushdown, batch_size=BATCH_ROWS
        )
        for tagged in translated(scanner.scan_batches(), locations[0]):
            raw = tagged.record_batch
            if raw.num_rows:
                fragment: Any = tagged.fragment  # a FileFragment: it has a path
                yield raw, group_of[location_of[fragment.path]]

    def _masked_batches(
        self, locations: list[str], group_of: dict[str, FileGroup]
    ) -> Iterator[tuple[pa.RecordBatch, FileGroup]]:
        """Files with DVs through the same dataset scanner (no filter pushdown and so no
        row-group skipping: positions must stay those of the whole file). ``scan_batches``
        tags every batch with its file and yields each file's batches in order (Arrow's
        ``Scanner::ScanBatches`` promises it), so running row counts are the physical
        positions the DV mask needs."""
        dataset, location_of = self._dataset(locations)
        scanner = dataset.scanner(columns=self.phys.names, batch_size=BATCH_ROWS)
        path = None
        location = ""
        offset = 0
        deleted = _NO_ROWS
        done: set[str] = set()
        for tagged in translated(scanner.scan_batches(), locations[0]):
            raw = tagged.record_batch
            fragment: Any = tagged.fragment  # a FileFragment: it has a path
            if fragment.path != path:
                if path is not None:
                    done.add(path)
                path = fragment.path
                if path in done:
                    raise AssertionError("dataset scan interleaved batches of a file with a DV")
                location = location_of[path]
                offset = 0
                deleted = self.deleted.get(location, _NO_ROWS)
            n = raw.num_rows
            if self.row_ids is not None:
                raw = self.row_ids.attach(raw, location, offset)
            lo, hi = np.searchsorted(deleted, [offset, offset + n])
            if hi > lo:  # rows of this batch are deleted: keep bits, packed as Arrow's
                bits: Any = keep_bits(deleted[lo:hi] - offset, n)
                keep = bits_array(bits, n)
                raw = _filter(raw, keep)
            offset += n
            if raw.num_rows:
                yield raw, group_of[location]

    def _finish(
        self, raws: list[pa.RecordBatch], groups: list[FileGroup]
    ) -> Iterator[pa.RecordBatch]:
        """Batches read (``raws``, each from a file of the group at the same index) in the
        scan's output shape: logical names, partition columns, the filter applied."""
        raw: pa.RecordBatch | pa.Table = raws[0] if len(raws) == 1 else pa.Table.from_batches(raws)
        tracked: dict[str, Any] = {}
        if self.row_ids is not None:
            raw, tracked = self.row_ids.split(raw)
        data = to_logical(raw, self.table_schema, self.mode, columns=self.present)
        n = raw.num_rows  # also right when only partition columns are read
        arrays = dict(tracked)
        for s in self.specs:
            if s.partition:
                arrays[s.name] = _partition_column(s.name, s.type, raws, groups)
            elif data.schema.get_field_index(s.name) >= 0:
                arrays[s.name] = data.column(s.name)
            else:
                arrays[s.name] = _nulls(n, s.type)
        if not arrays:  # ``columns=[]`` without a filter
            yield _rows_only(n)
            return
        table = pa.table(arrays)
        if self.filter is not None:
            table = table.filter(self.filter)
        if not self.out_schema.names:  # ``columns=[]`` with a filter
            yield _rows_only(table.num_rows)
            return
        table = table.select(self.out_schema.names).cast(self.out_schema)
        if len(raws) > 1:
            table = table.combine_chunks()  # one batch, not one per file read
        yield from table.to_batches()


def _partition_column(
    name: str, typ: pa.DataType, raws: list[pa.RecordBatch], groups: list[FileGroup]
) -> pa.Array[Any] | pa.ChunkedArray[Any]:
    """The values of partition column ``name`` for the rows of ``raws``."""
    first = groups[0]
    if all(g is first for g in groups):
        return _constant(first.values.get(name), typ, sum(r.num_rows for r in raws))
    chunks = [
        _constant(g.values.get(name), typ, r.num_rows) for r, g in zip(raws, groups, strict=True)
    ]
    out: pa.ChunkedArray[Any] = pa.chunked_array(chunks, type=typ)  # type: ignore[call-overload]
    return out


def _rows_only(n: int) -> pa.RecordBatch:
    """A batch of ``n`` rows and no column (what a scan of ``columns=[]`` yields, as
    ``pyarrow.dataset`` does: a table of no columns would have no batches to stream)."""
    return pa.record_batch([pa.nulls(n)], names=["rows"]).select([])


def _filter(batch: pa.RecordBatch, keep: pa.BooleanArray) -> pa.RecordBatch:
    """``batch.filter(keep)`` column by column: a record batch's filter turns the mask into
    indices and takes, about 3x slower than filtering each array by the mask itself."""
    if batch.num_columns == 0:  # only partition columns wanted: just the row count
        return batch.slice(0, keep.true_count)
    columns = [column.filter(keep) for column in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _missing(
    exc: FileNotFoundError, locations: list[str], to_fs: Callable[[str], str]
) -> ObjectNotFoundError:
    found = next((p for p in locations if to_fs(p) in str(exc)), locations[0])
    return ObjectNotFoundError(found, "read data file")


def arrow_reader(scan: Scan) -> pa.RecordBatchReader:
    """The scan's rows as a streaming reader with the scan's output schema."""
    reader = _Reader(scan)
    return pa.RecordBatchReader.from_batches(reader.out_schema, reader.batches())


class ArrowStream:
    """The scan's rows as an Arrow C stream that can be read any number of times: each
    ``__arrow_c_stream__`` call opens a new :func:`arrow_reader` (a RecordBatchReader is
    spent after one read). DuckDB calls it again for every execution of a relation built
    with ``con.from_arrow(ArrowStream(scan))``.

    The first reader is opened here, so that a scan the Arrow engine refuses fails now.
    """

    def __init__(self, scan: Scan) -> None:
        self.scan = scan
        self._first: pa.RecordBatchReader | None = arrow_reader(scan)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        reader: Any = self._first if self._first is not None else arrow_reader(self.scan)
        self._first = None
        return reader.__arrow_c_stream__(requested_schema)
