"""Retries of transient object-store errors: one bounded, deterministic policy for S3.

Where retries happen
    Exactly one loop retries an S3 request: s3fs's own retry wrapper, which every S3
    request of lakequery goes through (log and commit I/O in :mod:`lakequery.storage.s3`,
    Parquet reads and writes through the Arrow handler, DuckDB's bridge). lakequery
    configures it and turns the other layers off:

    * botocore's retries are disabled (``retries={"total_max_attempts": 1}``), so a
      request is never retried both by botocore and by s3fs (5 x 5 attempts with the
      defaults of both);
    * s3fs makes ``1 + retries`` attempts, ``retries`` taken from the storage option
      ``"lakequery.retries"`` (default :data:`DEFAULT_RETRIES`), and sleeps
      ``min(0.1 * 1.7**i, 15)`` seconds after failed attempt ``i`` (its fixed, jitter-free
      schedule: 4 retries wait at most about 1.9 seconds in all);
    * what is transient is decided by :func:`is_transient`: HTTP 5xx answers (500
      InternalError, 503 ServiceUnavailable / SlowDown), throttling and request timeouts,
      and connection errors (reset, refused, closed before the answer, a body shorter
      than its ``Content-Length``). s3fs retries connection errors and ``SlowDown`` by
      itself; lakequery adds the other 5xx answers through s3fs's error-handler hook,
      chained with any handler installed before.

    s3fs reads a GET body inside a second retry wrapper around the request, so a GET
    failing on every attempt is tried at most ``(1 + retries) ** 2`` times: bounded, and
    only reached when the store keeps failing.

What stays an error
    Anything not transient (403, 404, 412, ...) is not retried. An error left after the
    last attempt is raised as :class:`~lakequery.errors.StorageError` naming the
    operation and the location.

Local and ``memory://`` tables have no transient errors and are never retried.

Example:
    >>> from lakequery.storage.retry import retries_from_options
    >>> retries_from_options({"lakequery.retries": "2", "key": "k"})
    2
    >>> retries_from_options(None)
    4
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

#: Storage option holding how many times a transient S3 error is retried.
RETRIES_OPTION = "lakequery.retries"
#: Retries of a transient error when the option is not given (5 attempts in all).
DEFAULT_RETRIES = 4
#: Upper bound of the option (keeps the worst case of a failing store bounded).
MAX_RETRIES = 20

#: S3 error codes that mean "try again".
TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "500",
        "502",
        "503",
        "504",
    }
)

_install_lock = threading.Lock()
_installed = False


def retries_from_options(options: Mapping[str, Any] | None) -> int:
    """Return the retry count configured by ``options[RETRIES_OPTION]`` (or the default).

    Raises:
        ValueError: The value is not an integer between 0 and :data:`MAX_RETRIES`.
    """
    raw = (options or {}).get(RETRIES_OPTION, DEFAULT_RETRIES)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValueError(
            f"storage option {RETRIES_OPTION!r} must be an integer, not {raw!r}"
        ) from None
    if not 0 <= value <= MAX_RETRIES:
        raise ValueError(f"storage option {RETRIES_OPTION!r} must be 0..{MAX_RETRIES}, not {raw}")
    return value


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (raised by botocore/aiohttp for one request) is worth retrying.

    Only the exception itself is looked at, never its cause: s3fs translates a final
    error into an ``OSError`` caused by it, and that one must not be retried again.
    """
    from botocore.exceptions import ClientError, HTTPClientError
    from botocore.exceptions import ConnectionError as BotoConnectionError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {}) or {}
        meta = exc.response.get("ResponseMetadata", {}) or {}
        status = int(meta.get("HTTPStatusCode") or 0)
        return status >= 500 or str(error.get("Code", "")) in TRANSIENT_CODES
    network = (HTTPClientError, BotoConnectionError, ConnectionError, socket.timeout)
    if isinstance(exc, (*network, asyncio.TimeoutError)):
        return True
    try:
        from aiohttp import ClientConnectionError, ClientPayloadError
    except ImportError:  # pragma: no cover - aiohttp comes with s3fs
        return False
    return isinstance(exc, (ClientConnectionError, ClientPayloadError))


def install_s3fs_handler() -> None:
    """Make s3fs retry the transient errors it does not retry by itself (idempotent).

    Chains with a handler installed earlier by someone else: an error is retried when
    either says so.
    """
    global _installed
    with _install_lock:
        if _installed:
            return
        import s3fs.core

        previous: Callable[[BaseException], bool] = s3fs.core.CUSTOM_ERROR_HANDLER

        def handler(exc: BaseException) -> bool:
            return is_transient(exc) or bool(previous(exc))

        s3fs.core.set_custom_error_handler(handler)
        _installed = True


def s3fs_retry_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``options`` as S3FileSystem arguments with botocore's retries turned off.

    The ``lakequery.*`` options are removed; ``config_kwargs["retries"]`` is forced to one
    attempt (the s3fs loop is the only one).
    """
    kwargs = {k: v for k, v in options.items() if not str(k).startswith("lakequery.")}
    config = dict(kwargs.get("config_kwargs") or {})
    config["retries"] = {"total_max_attempts": 1}
    kwargs["config_kwargs"] = config
    return kwargs
