"""Arrow arrays made from NumPy buffers, without pyarrow's value conversion.

``pa.array(ndarray)``, ``pa.scalar(0)`` and a Python number handed to a compute function
go through pyarrow's conversion of Python and NumPy values, whose first use in a process
imports pandas when it is installed: 0.15-0.2 s, more than a small-table query or a CLI
call costs in all. Fixed-width numbers and booleans need none of it: their Arrow layout
is a validity bitmap (none here) and the values buffer (booleans bit-packed, least
significant bit first), which :meth:`pyarrow.Array.from_buffers` takes as it is.

Example:
    >>> import numpy as np
    >>> int64_array(np.arange(3)).to_pylist(), bool_array([True, False, True]).to_pylist()
    ([0, 1, 2], [True, False, True])
    >>> int64_scalar(0).as_py(), int_values(int64_array([5, 6]).slice(1)).tolist()
    (0, [6])
    >>> large_list_array([0, 2, 2, 3], bool_array([True, False, True]), [True, False, True]).to_pylist()
    [[True, False], None, [True]]
    >>> python_array([{"a": 1, "b": ["x"]}, None], pa.struct([("a", pa.int32()),
    ...     ("b", pa.list_(pa.string()))])).to_pylist()
    [{'a': 1, 'b': ['x']}, None]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa


def numeric_array(values: Any) -> pa.Array[Any]:
    """An Arrow array over a NumPy array of integers or floats (its type from the dtype)."""
    data: Any = np.ascontiguousarray(values)
    if data.dtype.kind not in "iuf":
        raise TypeError(f"numeric_array needs integers or floats, not {data.dtype}")
    t = pa.from_numpy_dtype(data.dtype)
    out: Any = pa.Array.from_buffers(t, len(data), [None, pa.py_buffer(data)])
    return out  # type: ignore[no-any-return]


def int64_array(values: Any) -> pa.Int64Array:
    """An ``int64`` array over ``values`` (a NumPy array or anything NumPy converts)."""
    out: Any = numeric_array(np.asarray(values, dtype=np.int64))
    return out  # type: ignore[no-any-return]


def bool_array(values: Any) -> pa.BooleanArray:
    """A ``bool`` array over ``values`` (a NumPy array or anything NumPy converts)."""
    flags = np.ascontiguousarray(values, dtype=np.bool_)
    return bits_array(np.packbits(flags, bitorder="little"), len(flags))


def bits_array(bits: Any, n: int) -> pa.BooleanArray:
    """A ``bool`` array of ``n`` values over already packed bits (a NumPy ``uint8`` array,
    least significant bit first, e.g. ``udfs.dv_mask.keep_bits``)."""
    out: Any = pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])
    return out  # type: ignore[no-any-return]


def large_list_array(offsets: Any, values: pa.Array[Any], valid: Any) -> pa.LargeListArray[Any]:
    """A ``large_list`` array over ``values``: list ``i`` holds ``values[offsets[i]:
    offsets[i + 1]]`` and is null where ``valid[i]`` is False (``LargeListArray.from_arrays``
    with a mask imports ``pyarrow.compute``)."""
    ends = np.ascontiguousarray(offsets, dtype=np.int64)
    flags = np.ascontiguousarray(valid, dtype=np.bool_)
    n = len(flags)
    if len(ends) != n + 1:
        raise ValueError(f"{n} lists need {n + 1} offsets, not {len(ends)}")
    validity = None if flags.all() else _buffer(np.packbits(flags, bitorder="little"))
    out: Any = pa.Array.from_buffers(
        pa.large_list(values.type), n, [validity, _buffer(ends)], children=[values]
    )
    out.validate()
    return out  # type: ignore[no-any-return]


def int_values(array: Any) -> Any:
    """The values of an integer array (or chunked array) without nulls, as NumPy: a
    read-only view of the buffer for an array, the chunks concatenated for a chunked one
    (``to_numpy`` and ``np.asarray`` of Arrow data import pandas)."""
    t = array.type
    if array.null_count or not pa.types.is_integer(t):
        raise ValueError(f"int_values needs integers without nulls, not {t}")
    dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
    if isinstance(array, pa.ChunkedArray):
        parts = [int_values(c) for c in array.chunks]
        return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
    if len(array) == 0:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset : array.offset + len(array)]


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows with ``schema`` (``Schema.empty_table`` imports pandas)."""
    return pa.table([pa.nulls(0, f.type) for f in schema], schema=schema)


def int64_scalar(value: int) -> pa.Int64Scalar:
    """``value`` as an ``int64`` Arrow scalar (e.g. for ``pc.fill_null``)."""
    out: Any = int64_array(np.array([value]))[0]
    return out  # type: ignore[no-any-return]


def python_scalar(value: Any, typ: pa.DataType) -> pa.Scalar[Any]:
    """``value`` (None for null) as an Arrow scalar of ``typ`` (see :func:`python_array`);
    e.g. a ``pc.map_lookup`` key or a ``pc.fill_null`` replacement."""
    out: Any = python_array([value], typ)[0]
    return out  # type: ignore[no-any-return]


def python_array(values: Sequence[Any], typ: pa.DataType) -> pa.Array[Any]:
    """An Arrow array of ``typ`` from Python values (None is null), built buffer by buffer.

    For the few rows lakequery makes from Python objects (a checkpoint's protocol and
    metadata rows, a lookup key). Types: null, boolean, signed integers, string, binary, list,
    map (a ``Mapping`` or a list of pairs) and struct (a ``Mapping``; missing fields are
    null). Anything else raises TypeError.
    """
    n = len(values)
    valid = np.fromiter((v is not None for v in values), dtype=np.bool_, count=n)
    validity = None if valid.all() else _buffer(np.packbits(valid, bitorder="little"))
    t = pa.types
    if t.is_null(typ):
        return pa.nulls(n)
    if t.is_boolean(typ):
        flags = np.fromiter((bool(v) for v in values), dtype=np.bool_, count=n)
        bits = _buffer(np.packbits(flags, bitorder="little"))
        out: Any = pa.Array.from_buffers(typ, n, [validity, bits])
        return out  # type: ignore[no-any-return]
    if t.is_signed_integer(typ):
        data = np.fromiter(
            (0 if v is None else int(v) for v in values), f"i{typ.bit_width // 8}", n
        )
        out = pa.Array.from_buffers(typ, n, [validity, _buffer(data)])
        return out  # type: ignore[no-any-return]
    if t.is_string(typ) or t.is_binary(typ):
        text = t.is_string(typ)
        encoded = [b"" if v is None else str(v).encode() if text else bytes(v) for v in values]
        offsets = _offsets([len(b) for b in encoded])
        data_buffer = pa.py_buffer(b"".join(encoded))
        out = pa.Array.from_buffers(typ, n, [validity, _buffer(offsets), data_buffer])
        return out  # type: ignore[no-any-return]
    if t.is_map(typ):
        rows = [[] if v is None else list(v.items() if hasattr(v, "items") else v) for v in values]
        keys = python_array([k for r in rows for k, _ in r], typ.key_type)
        items = python_array([x for r in rows for _, x in r], typ.item_type)
        entries = pa.StructArray.from_arrays([keys, items], fields=[typ.key_field, typ.item_field])
        offsets = _buffer(_offsets([len(r) for r in rows]))
        out = pa.Array.from_buffers(typ, n, [validity, offsets], children=[entries])
        return out  # type: ignore[no-any-return]
    if t.is_list(typ):
        lists = [[] if v is None else list(v) for v in values]
        child = python_array([x for r in lists for x in r], typ.value_type)
        offsets = _buffer(_offsets([len(r) for r in lists]))
        out = pa.Array.from_buffers(typ, n, [validity, offsets], children=[child])
        return out  # type: ignore[no-any-return]
    if t.is_struct(typ):
        fields = [typ.field(i) for i in range(typ.num_fields)]
        children = [
            python_array([None if v is None else v.get(f.name) for v in values], f.type)
            for f in fields
        ]
        out = pa.Array.from_buffers(typ, n, [validity], children=children)
        return out  # type: ignore[no-any-return]
    raise TypeError(f"python_array does not build {typ}")


def _offsets(lengths: Sequence[int]) -> Any:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lengths, dtype=np.int64), out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("python_array: more than 2 GiB of values in one array")
    return offsets.astype(np.int32)


def _buffer(data: Any) -> pa.Buffer:
    return pa.py_buffer(data)
