"""Bytecode for the code under test, as an installed package has it.

``pip install`` compiles a package's modules to ``__pycache__`` when it installs them, so
a user's fresh process loads lakequery's bytecode; the peers' wheels are compiled the
same way. A source checkout has no bytecode until an import writes it, and none is ever
written when ``PYTHONDONTWRITEBYTECODE`` is set (as in some CI and container images): every
fresh process then compiles lakequery's ~100 modules on import, ~0.05 s on the
small-table path, which is a property of the checkout, not of lakequery. Benchmarks that
time fresh processes call :func:`compile_sources` first.
"""

from __future__ import annotations

import compileall
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def compile_sources() -> None:
    """Write up-to-date ``__pycache__`` bytecode for ``lakequery/`` and ``udfs/`` (a no-op
    for modules whose bytecode is current)."""
    for package in ("lakequery", "udfs"):
        ok = compileall.compile_dir(REPO / package, quiet=1)
        if not ok:
            raise RuntimeError(f"compileall failed for {package}/")
