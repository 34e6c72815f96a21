"""Runs test code in a fresh interpreter: for what a process does once (imports, opening
its databases, forking), which the test session itself did long before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, cwd: Path, timeout: float = 180) -> Any:
    """Runs ``code`` with lakequery from this checkout and returns the JSON value of the
    last line it prints; fails the test with the child's stderr if it exits non-zero, and
    after ``timeout`` seconds (a child that hangs must fail, not hang the suite)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
