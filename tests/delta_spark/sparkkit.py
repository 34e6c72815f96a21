"""Helpers for the delta-spark interop tests: where the reference's jars are, and how rows of
Spark-Delta and lakequery are compared."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Where ``make delta-jars`` puts delta-spark and its runtime dependencies.
JAR_DIR = REPO / ".cache" / "delta-jars"
#: The reference implementation under test; tests/delta_spark/jars/pom.xml pins the same.
DELTA_VERSION = "4.4.0"
SPARK_BINARY = "4.1"
SCALA_BINARY = "2.13"
DELTA_SPARK_JAR = f"delta-spark_{SPARK_BINARY}_{SCALA_BINARY}-{DELTA_VERSION}.jar"
REQUIRED_JARS = (DELTA_SPARK_JAR, f"delta-storage-{DELTA_VERSION}.jar")


def delta_jars() -> list[Path]:
    """Every jar of the cache; fails the calling test when delta-spark is not there."""
    jars = sorted(JAR_DIR.glob("*.jar")) if JAR_DIR.is_dir() else []
    missing = [name for name in REQUIRED_JARS if not (JAR_DIR / name).is_file()]
    if missing:
        pytest.fail(
            f"delta-spark jars missing from {JAR_DIR}: {', '.join(missing)}. "
            "Run `make delta-jars` (Maven fetches them from Maven Central; `make test` and "
            "`make pytest` do this first).",
            pytrace=False,
        )
    return jars
