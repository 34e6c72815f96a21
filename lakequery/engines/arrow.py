"""PyArrow adapter: a streaming RecordBatchReader over the pruned files.

Files are read with ``pyarrow.dataset`` using the table's physical schema (so files that
lack a column yield nulls and narrower types are cast up), one partition-value group at a
time; each batch is relabelled to logical names, given its partition columns and
filtered. Memory stays bounded by a few batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lakequery.errors import ObjectNotFoundError
from lakequery.engines.layout import (
    ColumnSpec,
    FileGroup,
    column_specs,
    file_groups,
    require_no_deletion_vectors,
)
from lakequery.protocol.predicates import referenced_columns, to_pyarrow
from lakequery.protocol.column_mapping import physical_schema, to_logical

if TYPE_CHECKING:
    from lakequery.scan import Scan

BATCH_ROWS = 128 * 1024


def _parquet_format() -> ds.ParquetFileFormat:
    return ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit="us"))


def _constant(value: object, typ: pa.DataType, n: int) -> pa.Array:
    if value is None:
        return pa.nulls(n, typ)
    return pa.repeat(pa.scalar(value, typ), n)


def arrow_reader(scan: Scan) -> pa.RecordBatchReader:
    """The scan's rows as a streaming reader with the scan's output schema."""
    plan = scan.plan()
    require_no_deletion_vectors(plan)
    snap = scan.snapshot
    specs = column_specs(scan)
    data_specs = [s for s in specs if not s.partition]
    phys_full = physical_schema(snap.metadata.schema, snap.column_mapping_mode)
    phys = pa.schema(
        [phys_full.field(s.physical) for s in data_specs if phys_full.get_field_index(s.physical) >= 0]
    )
    present = [s.name for s in data_specs if phys.get_field_index(s.physical) >= 0]
    table_schema, mode = snap.metadata.schema, snap.column_mapping_mode
    groups = file_groups(plan, [s.name for s in specs if s.partition])
    out_schema = scan.output_schema
    filt = to_pyarrow(scan.filter) if scan.filter is not None else None
    pushdown = None
    if scan.filter is not None and snap.column_mapping_mode == "none":
        used = {p[0] for p in referenced_columns(scan.filter)}
        if not used & set(snap.partition_columns):
            pushdown = filt
    fs, to_fs = snap.storage.arrow_filesystem()

    def batches() -> Iterator[pa.RecordBatch]:
        for group in groups:
            try:
                dataset = ds.dataset(
                    [to_fs(p) for p in group.locations],
                    schema=phys,
                    format=_parquet_format(),
                    filesystem=fs,
                )
            except FileNotFoundError as exc:
                missing = next((p for p in group.locations if to_fs(p) in str(exc)), str(exc))
                raise ObjectNotFoundError(missing, "read data file") from exc
            for raw in dataset.to_batches(
                columns=phys.names, filter=pushdown, batch_size=BATCH_ROWS
            ):
                if raw.num_rows:
                    data = to_logical(raw, table_schema, mode, columns=present)
                    yield from _finish(data, group, specs, out_schema, filt)

    return pa.RecordBatchReader.from_batches(out_schema, batches())


def _finish(
    data: pa.RecordBatch,
    group: FileGroup,
    specs: list[ColumnSpec],
    out_schema: pa.Schema,
    filt: pc.Expression | None,
) -> Iterator[pa.RecordBatch]:
    n = data.num_rows
    arrays = {}
    for s in specs:
        if s.partition:
            arrays[s.name] = _constant(group.values.get(s.name), s.type, n)
        elif data.schema.get_field_index(s.name) >= 0:
            arrays[s.name] = data.column(s.name)
        else:
            arrays[s.name] = pa.nulls(n, s.type)
    table = pa.table(arrays)
    if filt is not None:
        table = table.filter(filt)
    table = table.select(out_schema.names).cast(out_schema)
    yield from table.to_batches()
