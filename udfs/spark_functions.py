"""The deletion-vector kernel as a Spark function.

``lq_dv_keep(dv BINARY, row BIGINT) -> BOOLEAN`` (same meaning as the DuckDB function in
:mod:`udfs.duckdb_functions`) as an Arrow-backed pandas UDF, so executors run the numpy
kernel on whole batches (no numba: nothing to compile in each Python worker). PySpark is imported only when these functions are called.

Example (needs a SparkSession):
    >>> from udfs.spark_functions import register_spark_functions  # doctest: +SKIP
    >>> register_spark_functions(spark)                              # doctest: +SKIP
    >>> spark.sql("SELECT lq_dv_keep(dv, id) FROM t")               # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from udfs.duckdb_functions import _deleted
from udfs.dv_mask import rows_kept


def keep_rows(dv: Any, rows: Any) -> Any:
    """pandas Series of serialized DVs and row positions -> Series of keep flags."""
    import pandas as pd

    row_values = rows.to_numpy(dtype=np.int64)
    out = np.ones(len(row_values), dtype=np.bool_)
    codes, uniques = pd.factorize(dv, use_na_sentinel=True)
    for code, payload in enumerate(uniques):
        sel = np.nonzero(codes == code)[0]
        out[sel] = rows_kept(_deleted(bytes(payload)), row_values[sel])
    return pd.Series(out)


def dv_keep_udf() -> Any:
    """The pandas UDF ``(binary, bigint) -> boolean`` for DataFrame expressions."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    def lq_dv_keep(dv: pd.Series, rows: pd.Series) -> pd.Series:  # type: ignore[type-arg]
        return keep_rows(dv, rows)  # type: ignore[no-any-return]

    # this module uses postponed annotations; Spark reads the hints at runtime
    lq_dv_keep.__annotations__ = {"dv": pd.Series, "rows": pd.Series, "return": pd.Series}

    return pandas_udf(lq_dv_keep, "boolean")  # type: ignore[call-overload]


def register_spark_functions(spark: Any) -> None:
    """Registers ``lq_dv_keep`` for Spark SQL on ``spark``."""
    spark.udf.register("lq_dv_keep", dv_keep_udf())
