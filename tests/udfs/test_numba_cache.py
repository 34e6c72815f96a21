"""The Z-order kernels compile once per machine: numba's cache goes to a writable directory
chosen before numba is imported, also when the package directory and HOME are read-only.

Each case runs in a fresh process (numba reads its configuration once). Directories are made
unwritable by putting them under a regular file, which stops root as well as anyone else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# a Z-order call: raw keys of two integer columns interleaved; prints what numba did
ZORDER = """
import json, os, sys
import numpy as np
import udfs.zorder as z
a = z.raw_keys_int64(np.array([3, -1, 7], dtype=np.int64))
b = z.raw_keys_int64(np.array([0, 5, -2], dtype=np.int64))
keys = z.interleave_bits(np.stack([a >> np.uint64(32), b >> np.uint64(32)]), 32)
stats = z._interleave.stats
print(json.dumps(dict(keys=[int(k) for k in keys], udfs=z.__file__,
                      cache=type(z._interleave._cache).__name__,
                      cache_dir=os.environ.get("NUMBA_CACHE_DIR"),
                      hits=sum(stats.cache_hits.values()), misses=sum(stats.cache_misses.values()),
                      numba_cache_dir=sys.modules["numba"].config.CACHE_DIR)))
"""


def _expected_keys() -> list[int]:
    from udfs.zorder import interleave_bits_reference, raw_key_int64_reference

    a = [raw_key_int64_reference(v) >> 32 for v in (3, -1, 7)]
    b = [raw_key_int64_reference(v) >> 32 for v in (0, 5, -2)]
    return [interleave_bits_reference([x, y], 32) for x, y in zip(a, b, strict=True)]


def _unwritable(tmp_path: Path, name: str) -> Path:
    blocker = tmp_path / f"{name}-blocker"
    blocker.write_text("a file, so nothing can be created below it")
    return blocker / name


def _env(home: Path, tmpdir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.pop("XDG_CACHE_HOME", None)
    env.update(HOME=str(home), TMPDIR=str(tmpdir), PYTHONPATH=str(ROOT), **extra)
    return env


def _zorder(env: dict[str, str], cwd: Path) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", ZORDER], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cache_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.suffix in (".nbi", ".nbc"))


def test_default_cache_under_home_compiles_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home, tmp_path)
    first = _zorder(env, tmp_path)
    want = home / ".cache" / "lakequery" / "numba"
    assert first["cache_dir"] == str(want)
    assert first["numba_cache_dir"] == str(want)
    assert first["keys"] == _expected_keys()
    assert first["cache"] == "FunctionCache"
    assert first["misses"] >= 1  # compiled here...
    names = _cache_files(want)
    assert any(n.startswith("zorder._interleave") and n.endswith(".nbi") for n in names), names
    assert any(n.startswith("zorder._interleave") and n.endswith(".nbc") for n in names), names
    second = _zorder(env, tmp_path)
    assert second["keys"] == first["keys"]
    assert (second["hits"], second["misses"]) == (1, 0)  # ...and loaded by the next process


def test_xdg_cache_home_is_preferred(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    xdg = tmp_path / "xdg"
    got = _zorder(_env(home, tmp_path, XDG_CACHE_HOME=str(xdg)), tmp_path)
    assert got["cache_dir"] == str(xdg / "lakequery" / "numba")
    assert _cache_files(xdg / "lakequery" / "numba")
    assert not (home / ".cache").exists()


def test_a_users_numba_cache_dir_is_respected(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    mine = tmp_path / "mine"
    got = _zorder(_env(home, tmp_path, NUMBA_CACHE_DIR=str(mine)), tmp_path)
    assert got["cache_dir"] == str(mine)
    assert _cache_files(mine)
    assert not (home / ".cache").exists()


@pytest.fixture
def read_only_package(tmp_path: Path) -> Path:
    """A copy of the udfs package whose __pycache__ cannot be created (site-packages
    read-only): neither bytecode nor numba's in-tree cache can go next to the source."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "udfs", site / "udfs", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "udfs" / "__pycache__").write_text("not a directory")
    return site


def test_read_only_package_and_home_fall_back_to_the_temp_dir(
    tmp_path: Path, read_only_package: Path
) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = _env(_unwritable(tmp_path, "home"), tmpdir)
    env["PYTHONPATH"] = f"{read_only_package}{os.pathsep}{ROOT}"
    got = _zorder(env, tmp_path)
    assert got["udfs"] == str(read_only_package / "udfs" / "zorder.py")
    assert got["keys"] == _expected_keys()
    fallback = tmpdir / f"lakequery-numba-{os.getuid()}"
    assert got["cache_dir"] == str(fallback)
    assert _cache_files(fallback)
    again = _zorder(env, tmp_path)
    assert (again["hits"], again["misses"]) == (1, 0)


def test_nothing_writable_still_computes_without_a_cache(
    tmp_path: Path, read_only_package: Path
) -> None:
    env = _env(
        _unwritable(tmp_path, "home"),
        _unwritable(tmp_path, "tmp"),
        NUMBA_CACHE_DIR=str(_unwritable(tmp_path, "cache")),  # a user's, unwritable
    )
    env["PYTHONPATH"] = f"{read_only_package}{os.pathsep}{ROOT}"
    got = _zorder(env, tmp_path)
    assert got["udfs"] == str(read_only_package / "udfs" / "zorder.py")
    assert got["keys"] == _expected_keys()
    assert got["cache"] == "NullCache"  # compiled without a cache, and no error
    assert not list(tmp_path.rglob("*.nbi"))
