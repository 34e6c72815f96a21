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
"""

from __future__ import annotations

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


def int_values(array: Any) -> Any:
    """The values of an integer array without nulls, as a read-only NumPy view of its
    buffer (``to_numpy`` and ``np.asarray`` of an Arrow array import pandas)."""
    t = array.type
    if array.null_count or not pa.types.is_integer(t):
        raise ValueError(f"int_values needs integers without nulls, not {t}")
    dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
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
