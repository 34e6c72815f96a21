"""Fixtures of the data file writer tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> str:
    """A fresh local table root (absolute path)."""
    return str(tmp_path / "table")
