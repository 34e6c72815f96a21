"""The Python that Spark's workers run must import lakequery and pyarrow.

PySpark starts its Python workers with ``SparkContext.pythonExec``, which it takes from
the ``PYSPARK_PYTHON`` environment variable when the context starts (default
``python3``; a ``spark.pyspark.python`` set on the session builder of a plain Python
driver is *not* used, only ``spark-submit`` reads it). A script run as
``.venv/bin/python job.py`` without activating the venv therefore gets workers that run
the system ``python3``, and every lakequery job would fail deep inside a task with
``ModuleNotFoundError``.

:func:`ensure_workers` runs before every lakequery Spark entry point, once per
SparkContext:

- in local mode (``local``, ``local[N]``, ``local-cluster[...]``: the workers run on this
  machine) a worker Python that lacks the modules is replaced by this interpreter
  (``sys.executable``, which has lakequery by definition), with a warning;
- otherwise one one-task job asks a worker which Python it runs and whether it finds
  ``pyarrow`` and ``lakequery``; if not, :class:`~lakequery.errors.SparkWorkerError`
  names that Python and the settings to change. The probe itself needs nothing but the
  standard library on the worker.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from typing import Any

from lakequery.errors import SparkWorkerError

log = logging.getLogger(__name__)

#: The modules lakequery's Spark tasks import.
REQUIRED_MODULES = ("pyarrow", "lakequery")

#: Checked SparkContexts (by application id).
_checked: set[str] = set()
_lock = threading.Lock()

_PROBE_SOURCE = (
    "lambda _: (__import__('sys').executable, "
    "[m for m in MODULES if __import__('importlib.util').util.find_spec(m) is None])"
)


def _missing_locally(python: str) -> list[str] | None:
    """The required modules ``python`` cannot find (None: it does not run at all)."""
    code = (
        "import importlib.util, sys; "
        f"print(','.join(m for m in {REQUIRED_MODULES!r} if importlib.util.find_spec(m) is None))"
    )
    try:
        done = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return [m for m in done.stdout.strip().split(",") if m]


def _probe_cluster(sc: Any) -> tuple[str, list[str]]:
    """(worker Python, modules it lacks), asked of one worker by a one-task job."""
    probe = eval(_PROBE_SOURCE, {"__builtins__": __builtins__, "MODULES": REQUIRED_MODULES})
    python, missing = sc.parallelize([0], 1).map(probe).collect()[0]
    return str(python), list(missing)


def ensure_workers(spark: Any) -> None:
    """Checks, once per SparkContext, that Spark's Python workers can run lakequery.

    Args:
        spark: A SparkSession (or anything with ``sparkContext``).

    Raises:
        SparkWorkerError: The workers' Python cannot import pyarrow or lakequery (or
            cannot be started); the message names it and the setting to change.
    """
    sc = spark.sparkContext
    app = str(sc.applicationId)
    with _lock:
        if app in _checked:
            return
        python = str(sc.pythonExec)
        if str(sc.master).startswith("local"):
            missing = _missing_locally(python)
            if missing is None or missing:
                log.warning(
                    "Spark's Python workers would run %r, which %s; they run %r (this "
                    "interpreter) instead. Set PYSPARK_PYTHON before the session starts "
                    "to choose.",
                    python,
                    "does not start" if missing is None else f"cannot import {missing}",
                    sys.executable,
                )
                sc.pythonExec = sys.executable
        else:
            try:
                python, missing = _probe_cluster(sc)
            except Exception as exc:
                raise SparkWorkerError(python, [], f"the probe job failed: {exc}") from exc
            if missing:
                raise SparkWorkerError(python, missing)
        _checked.add(app)


__all__ = ["REQUIRED_MODULES", "ensure_workers"]
