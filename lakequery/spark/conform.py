"""Arrow batches cast to exactly the Arrow types Spark expects for a schema.

Spark checks the batches a Python data source returns strictly against the Arrow form of
the DataFrame's schema (``pyspark.sql.pandas.types.to_arrow_schema``): list elements are
named ``element``, map entries ``key``/``value``, a variant is ``struct<value, metadata>``
(lakequery reads ``struct<metadata, value>``), ``void`` is Arrow's ``null`` and the
nullability flags must match. :func:`conform_batch` rebuilds a batch with that schema,
matching struct fields by name and casting leaves, without changing a value.

Example:
    >>> import pyarrow as pa
    >>> batch = pa.record_batch({"v": pa.array([{"metadata": b"m", "value": b"v"}])})
    >>> target = pa.schema([("v", pa.struct([("value", pa.binary()), ("metadata", pa.binary())]))])
    >>> conform_batch(batch, target).column(0).to_pylist()
    [{'value': b'v', 'metadata': b'm'}]
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

import pyarrow as pa


def conform_array(arr: pa.Array[Any], target: pa.DataType) -> pa.Array[Any]:
    """``arr`` with exactly the Arrow type ``target`` (field names, order and flags as
    Spark expects them), values unchanged; struct fields are matched by name."""
    src: Any = arr.type
    to: Any = target
    a: Any = arr  # pyarrow's stubs type the nested arrays' builders too narrowly
    out: pa.Array[Any]
    if src == to:
        out = a
    elif pa.types.is_null(to) or pa.types.is_null(src):
        out = _nulls(len(a), to)
    elif pa.types.is_struct(to) and pa.types.is_struct(src):
        children = a.flatten()
        by_name = {src.field(i).name: children[i] for i in range(src.num_fields)}
        fields = [to.field(i) for i in range(to.num_fields)]
        out = pa.StructArray.from_arrays(
            [conform_array(by_name[f.name], f.type) for f in fields], fields=fields, mask=_mask(a)
        )
    elif pa.types.is_list(to) and (pa.types.is_list(src) or pa.types.is_large_list(src)):
        values = conform_array(a.values, to.value_type)
        build: Any = pa.ListArray.from_arrays
        out = build(a.offsets.cast(pa.int32()), values, type=to, mask=_mask(a))
    elif pa.types.is_map(to) and pa.types.is_map(src):
        keys = conform_array(a.keys, to.key_type)
        items = conform_array(a.items, to.item_type)
        build = pa.MapArray.from_arrays
        out = build(a.offsets, keys, items, type=to, mask=_mask(a))
    else:
        out = a.cast(to)
    return out


def _mask(arr: Any) -> Any:
    """The array's nulls as a mask (None without nulls)."""
    return arr.is_null() if arr.null_count else None


def _nulls(n: int, t: Any) -> pa.Array[Any]:
    make: Any = pa.nulls
    out: pa.Array[Any] = make(n, t)
    return out


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` (columns in ``target``'s order) with exactly ``target``'s schema."""
    if batch.schema == target:
        return batch
    arrays = [conform_array(batch.column(i), f.type) for i, f in enumerate(target)]
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def spark_arrow_schema(schema: Any) -> pa.Schema:
    """The Arrow form of a Spark ``StructType`` that Spark checks a Python data source's
    batches against (and hands a Python writer): timestamps with time zone in UTC.

    PySpark 4.2 made ``to_arrow_schema``'s time zone a required keyword for timestamps
    (its own data source worker passes ``"UTC"``); 4.0 and 4.1 have no such parameter
    and always use UTC."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if _takes_timezone():
        return to_arrow_schema(schema, timezone="UTC")  # type: ignore[no-any-return]
    return to_arrow_schema(schema)  # type: ignore[no-any-return]


def refuse_variant_columns(schema: Any) -> None:
    """Raises UnsupportedFeatureError when a Spark ``StructType`` to be written holds a
    ``variant`` (at any depth): lakequery does not write variants (README, "Table
    features"), and Arrow hands them over as a plain ``struct<value, metadata>`` that
    would silently become the column's type."""
    from pyspark.sql.types import ArrayType, MapType, StructType, VariantType

    from lakequery.errors import UnsupportedFeatureError

    def walk(t: Any, where: str) -> None:
        if isinstance(t, VariantType):
            raise UnsupportedFeatureError(
                "variantType", operation="write", detail=f"column {where!r} is a variant"
            )
        if isinstance(t, StructType):
            for f in t.fields:
                walk(f.dataType, f"{where}.{f.name}" if where else f.name)
        elif isinstance(t, ArrayType):
            walk(t.elementType, f"{where}.element")
        elif isinstance(t, MapType):
            walk(t.keyType, f"{where}.key")
            walk(t.valueType, f"{where}.value")

    walk(schema, "")


@cache
def _takes_timezone() -> bool:
    from pyspark.sql.pandas.types import to_arrow_schema

    return "timezone" in inspect.signature(to_arrow_schema).parameters


__all__ = ["conform_array", "conform_batch", "refuse_variant_columns", "spark_arrow_schema"]
