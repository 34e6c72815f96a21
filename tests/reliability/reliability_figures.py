"""Figures of one run of the reliability suite, for RELIABILITY.md.

Tests add to :data:`FIGURES`; with ``LAKEQUERY_RELIABILITY_REPORT=path`` the conftest
writes them to ``path`` as JSON when the session ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FIGURES: dict[str, Any] = {}


def add(section: str, counts: Mapping[str, int]) -> None:
    """Add ``counts`` to ``FIGURES[section]`` (key by key)."""
    target: dict[str, int] = FIGURES.setdefault(section, {})
    for key, n in counts.items():
        target[key] = target.get(key, 0) + int(n)
