"""Registers the deletion-vector kernel as a DuckDB scalar function.

``lq_dv_keep(dv BLOB, row BIGINT) -> BOOLEAN`` is true when physical row ``row`` is not in
the serialized deletion vector ``dv`` (a RoaringBitmapArray, magic included, as stored in
a DV file or decoded from an inline DV); a NULL ``dv`` keeps every row. It is vectorised
over Arrow chunks: each distinct DV in a chunk is parsed once (and cached) and its rows
are tested by the vectorised numpy kernel (:func:`udfs.dv_mask.rows_kept`).

Example:
    >>> import duckdb
    >>> from lakequery.dv.bitmap import serialize
    >>> con = duckdb.connect()
    >>> register_duckdb_functions(con)
    >>> dv = serialize([1, 3])
    >>> con.execute(
    ...     "SELECT list(lq_dv_keep($dv, r) ORDER BY r) FROM range(5) t(r)", {"dv": dv}
    ... ).fetchall()
    [([True, False, True, False, True],)]
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lakequery.dv.bitmap import deserialize, to_numpy
from udfs.dv_mask import rows_kept


@lru_cache(maxsize=1024)
def _deleted(payload: bytes) -> npt.NDArray[np.int64]:
    return to_numpy(deserialize(payload))


def _keep(dv: Any, rows: Any) -> Any:
    dv = dv.combine_chunks() if isinstance(dv, pa.ChunkedArray) else dv
    rows = rows.combine_chunks() if isinstance(rows, pa.ChunkedArray) else rows
    out = np.ones(len(rows), dtype=np.bool_)
    row_values = rows.to_numpy(zero_copy_only=False).astype(np.int64)
    encoded: Any = pc.dictionary_encode(dv)
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    valid = np.asarray(pc.is_valid(encoded.indices))
    for code, payload in enumerate(encoded.dictionary.to_pylist()):
        sel = np.nonzero(valid & (indices == code))[0]
        out[sel] = rows_kept(_deleted(payload), row_values[sel])
    return pa.array(out, pa.bool_())


def register_duckdb_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Adds ``lq_dv_keep`` to ``con`` (idempotent per connection)."""
    found = con.execute(
        "SELECT count(*) FROM duckdb_functions() WHERE function_name = 'lq_dv_keep'"
    ).fetchall()
    if found[0][0]:
        return
    con.create_function(
        "lq_dv_keep",
        _keep,
        [duckdb.sqltype("BLOB"), duckdb.sqltype("BIGINT")],
        duckdb.sqltype("BOOLEAN"),
        type="arrow",
        null_handling="special",
    )
