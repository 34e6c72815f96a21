"""The Python that Spark's workers run must import lakequery and pyarrow.

(Being written: :func:`ensure_workers` checks it once per SparkContext and fails fast with
one clear error naming the worker Python and the setting to change.)
"""

from __future__ import annotations

from typing import Any


def ensure_workers(spark: Any) -> None:
    """Checks (once per SparkContext) that Spark's Python workers can run lakequery."""
    return None
