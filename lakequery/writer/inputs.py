"""Turning whatever a user hands to ``lq.write`` into one Arrow record batch stream.

Example:
    >>> import pyarrow as pa
    >>> to_reader(pa.table({"a": [1, 2]})).read_all().num_rows
    2
    >>> to_reader([pa.record_batch({"a": [1]}), pa.record_batch({"a": [2]})]).schema.names
    ['a']
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from lakequery.errors import SchemaError


def to_reader(data: Any) -> pa.RecordBatchReader:
    """A RecordBatchReader over ``data``.

    Accepts ``pa.Table``, ``pa.RecordBatch``, ``pa.RecordBatchReader``, a pandas or
    Polars DataFrame, a Polars LazyFrame (collected), a DuckDB relation, any object with
    ``__arrow_c_stream__``, and an iterable of record batches (its first batch gives the
    schema).

    Raises:
        TypeError: something else.
    """
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return pandas_table(data).to_reader()
    if module == "polars" and hasattr(data, "collect"):
        data = data.collect()
    if module == "polars" and hasattr(data, "schema"):
        _refuse_polars_objects(data.schema)
    if module == "duckdb" and hasattr(data, "to_arrow_reader"):
        return _duckdb_reader(data)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    if isinstance(data, Iterable) and not isinstance(data, (str, bytes, dict)):
        return _from_batches(iter(data))
    raise TypeError(
        f"cannot write {type(data).__name__}: pass Arrow data, a pandas/Polars DataFrame, "
        "a DuckDB relation or an iterable of pyarrow.RecordBatch"
    )


def _refuse_polars_objects(schema: Any) -> None:
    """Polars exports an Object column as 8-byte pointers nothing downstream can tell
    from binary data: refused, naming the column (top-level columns; Polars keeps Object
    out of nested types)."""
    for name, dtype in schema.items():
        if str(dtype) == "Object":
            raise SchemaError(f"column {name!r}: Polars Object values have no Delta type")


def _duckdb_reader(rel: Any) -> pa.RecordBatchReader:
    """A DuckDB relation's rows (:func:`_exact_huge_integers`); a huge integer past 38
    digits is a SchemaError, not DuckDB's conversion error."""
    import duckdb

    def refused(exc: Exception) -> SchemaError:
        first = str(exc).strip().splitlines()[0]
        return SchemaError(f"a HUGEINT or UHUGEINT value does not fit DECIMAL(38, 0): {first}")

    try:
        reader = _exact_huge_integers(rel).to_arrow_reader()
    except duckdb.ConversionException as exc:
        raise refused(exc) from exc

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from reader
        except duckdb.ConversionException as exc:
            raise refused(exc) from exc

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def _exact_huge_integers(rel: Any) -> Any:
    """``rel`` with its HUGEINT and UHUGEINT columns cast to ``DECIMAL(38, 0)`` by DuckDB:
    its Arrow export spells both as ``decimal128(38, 0)`` from their raw 128 bits, so a
    UHUGEINT above 2**127 came out negative and values past 38 digits overflowed the
    type. DuckDB's cast refuses those (a conversion error); the others are exact."""
    huge = {"HUGEINT", "UHUGEINT"}
    types = [str(t) for t in rel.types]
    if not huge & set(types):
        return rel
    from lakequery.protocol.sql_spelling import quote_identifier as quote_ident

    columns = [
        f"CAST({quote_ident(n)} AS DECIMAL(38, 0)) AS {quote_ident(n)}"
        if t in huge
        else quote_ident(n)
        for n, t in zip(rel.columns, types, strict=True)
    ]
    return rel.project(", ".join(columns))


def pandas_table(frame: Any) -> pa.Table:
    """A pandas DataFrame as Arrow: named index levels become columns (``set_index("id")``
    keeps ``id``, as in ``deltalake`` and pyarrow's own default), an unnamed index (the
    default ``RangeIndex``, say) is not data and is dropped.

    Example:
        >>> import pandas as pd
        >>> pandas_table(pd.DataFrame({"a": [1], "b": ["x"]}).set_index("a")).column_names
        ['a', 'b']
        >>> pandas_table(pd.DataFrame({"b": ["x"]})).column_names
        ['b']
    """
    named = [name for name in frame.index.names if name is not None]
    if named:
        frame = frame.reset_index(level=named)
    return pa.Table.from_pandas(frame, preserve_index=False)


def _from_batches(batches: Iterator[Any]) -> pa.RecordBatchReader:
    first = next(batches, None)
    if first is None:
        raise TypeError("cannot write an empty iterable: its schema is unknown")
    if isinstance(first, pa.Table):
        first_batches: list[pa.RecordBatch] = first.to_batches()
        schema = first.schema
    elif isinstance(first, pa.RecordBatch):
        first_batches, schema = [first], first.schema
    else:
        raise TypeError(f"an iterable to write must hold pyarrow.RecordBatch, not {type(first)}")

    def rest() -> Iterator[pa.RecordBatch]:
        for item in itertools.chain(first_batches, batches):
            if isinstance(item, pa.Table):
                yield from item.to_batches()
            else:
                yield item

    return pa.RecordBatchReader.from_batches(schema, rest())


def _stored_type(t: pa.DataType) -> pa.DataType:
    """``t`` (nested ones too) as the writer stores it where DuckDB reads another type or
    none: nanosecond timestamps in microseconds (DuckDB would round them), ``date64`` as
    ``date32``, ``float16`` as ``float32`` and a ``decimal256`` of at most 38 digits as a
    ``decimal128`` (DuckDB reads neither)."""
    from lakequery.protocol.arrow_types import with_children

    if pa.types.is_timestamp(t):
        return pa.timestamp("us", t.tz) if t.unit == "ns" else t
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_decimal256(t) and t.precision <= 38:
        return pa.decimal128(t.precision, t.scale)
    return with_children(t, lambda f: f.with_type(_stored_type(f.type)))


def exact_for_duckdb(reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
    """``reader`` with its columns in the types the writer would store (:func:`_stored_type`),
    converted exactly: a value that would lose precision (a nanosecond, a part of a day)
    or overflow raises :class:`~lakequery.errors.SchemaMismatchError` naming the column,
    as ``lq.write`` refuses it. For data that reaches the table through DuckDB (a MERGE
    source), which would round such values silently or not read the types at all."""
    from lakequery import arrow_kernels as pc
    from lakequery.errors import SchemaMismatchError

    schema = reader.schema
    target = pa.schema([f.with_type(_stored_type(f.type)) for f in schema])
    if target == schema:
        return reader

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            columns = []
            for i, f in enumerate(target):
                col = batch.column(i)
                if col.type != f.type:
                    try:
                        col = pc.cast(col, f.type, safe=True)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                        raise SchemaMismatchError(
                            f.name, str(f.type), str(col.type), str(exc)
                        ) from exc
                columns.append(col)
            yield pa.RecordBatch.from_arrays(columns, schema=target)

    return pa.RecordBatchReader.from_batches(target, batches())
