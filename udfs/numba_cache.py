"""Where numba caches lakequery's compiled kernels, chosen before numba is imported.

numba's own default is the ``__pycache__`` next to the source, then ``~/.cache/numba``:
neither works when site-packages is read-only and ``HOME`` is not writable (Spark
executors, containers), and then every new process compiles the kernels again (~1 s).
Unless the user set ``NUMBA_CACHE_DIR`` (always respected), :func:`configure` points it at
the first writable directory of ``$XDG_CACHE_HOME/lakequery/numba``,
``~/.cache/lakequery/numba`` and ``<tempdir>/lakequery-numba-<uid>``. When none is
writable, numba's own chain is left as it is, and :func:`kernel` compiles without a cache
rather than failing.

Example:
    >>> from udfs.numba_cache import kernel
    >>> @kernel
    ... def twice(x):
    ...     return 2 * x
    >>> twice(21)
    42
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ENV = "NUMBA_CACHE_DIR"

F = TypeVar("F", bound=Callable[..., Any])


def candidates() -> list[Path]:
    """The default cache directories, most preferred first."""
    out = []
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        out.append(Path(xdg) / "lakequery" / "numba")
    home = os.path.expanduser("~")
    if home and home != "~":
        out.append(Path(home) / ".cache" / "lakequery" / "numba")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    out.append(Path(tempfile.gettempdir()) / f"lakequery-numba-{uid}")
    return out


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()  # what numba itself checks
    except OSError:
        return False
    return True


def configure() -> str | None:
    """Set ``NUMBA_CACHE_DIR`` to the first writable default unless the user set it;
    returns the directory numba will use (None: numba's own chain)."""
    chosen = os.environ.get(ENV)
    if not chosen:
        chosen = next((str(p) for p in candidates() if _writable(p)), None)
        if chosen is None:
            return None
        os.environ[ENV] = chosen
        config = sys.modules.get("numba.core.config")
        if config is not None:  # numba was imported first: it read the variable already
            config.CACHE_DIR = chosen  # type: ignore[attr-defined]
    return chosen


def kernel(fn: F) -> F:
    """``numba.njit(cache=True, nogil=True)`` with the cache of :func:`configure`; without
    a cache when numba finds no writable location at all."""
    configure()
    from numba import njit

    try:
        return njit(cache=True, nogil=True)(fn)  # type: ignore[no-any-return]
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(nogil=True)(fn)  # type: ignore[no-any-return]
