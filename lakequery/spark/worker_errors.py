"""Lakequery errors raised inside Spark tasks, raised again on the driver as themselves.

Spark reports an exception of a Python worker as its own exception whose text ends with
the worker's traceback; :func:`lakequery_errors` finds the last ``lakequery.errors.X: ...``
line there and raises ``X`` with that message, chained to Spark's exception (the
worker's structured fields are gone; the class and the message are kept).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from lakequery import errors

#: The last line of a Python traceback naming a lakequery error, as Spark reports it.
_WORKER_ERROR = re.compile(r"^lakequery\.errors\.(\w+): ", re.MULTILINE)
#: Spark's trailing "SQLSTATE: ..." after the worker's text.
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")


def worker_error(exc: BaseException) -> errors.LakeQueryError | None:
    """The lakequery error a Python worker raised, rebuilt from Spark's report of it."""
    text = str(exc)
    matches = list(_WORKER_ERROR.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    cls = getattr(errors, last.group(1), None)
    if not (isinstance(cls, type) and issubclass(cls, errors.LakeQueryError)):
        return None
    message = _SQLSTATE.sub("", text[last.end() :]).strip()
    # The worker's structured fields are gone: keep the class and the message.
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    return err


@contextlib.contextmanager
def lakequery_errors() -> Iterator[None]:
    """Re-raises a lakequery error that Spark reports wrapped in its own exception as
    that lakequery class (message kept, chained to Spark's exception).

    Example:
        >>> with lakequery_errors():                          # doctest: +SKIP
        ...     spark.read.format("lakequery").option("versionAsOf", 99).load(uri)
        Traceback (most recent call last):
        lakequery.errors.VersionNotFoundError: ...
    """
    try:
        yield
    except errors.LakeQueryError:
        raise
    except Exception as exc:
        found = worker_error(exc)
        if found is None:
            raise
        raise found from exc


__all__ = ["lakequery_errors", "worker_error"]
