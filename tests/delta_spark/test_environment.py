"""The reference implementation is really there, and its jars fit the pinned PySpark."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path
from typing import Any

import pyspark
from sparkkit import DELTA_VERSION, SCALA_BINARY, SPARK_BINARY, delta_jars

_VERSIONED = re.compile(r"^(?P<name>.+?)-(?P<version>\d[\w.\-]*)\.jar$")


def _artifact(jar: Path) -> tuple[str, str]:
    m = _VERSIONED.match(jar.name)
    assert m, f"unversioned jar name {jar.name}"
    return m["name"], m["version"]


def test_jars_fit_the_pinned_pyspark() -> None:
    jars = delta_jars()
    # delta-spark is built for this Spark line and Scala binary version
    assert pyspark.__version__.startswith(SPARK_BINARY + "."), pyspark.__version__
    assert metadata.version("delta-spark") == DELTA_VERSION
    pyspark_jars = Path(pyspark.__file__).parent / "jars"
    shipped = dict(_artifact(j) for j in pyspark_jars.glob("*.jar"))
    assert any(name.startswith("scala-library") for name in shipped)
    assert shipped["scala-library"].startswith(SCALA_BINARY + "."), shipped["scala-library"]
    ours = dict(_artifact(j) for j in jars)
    assert ours[f"delta-spark_{SPARK_BINARY}_{SCALA_BINARY}"] == DELTA_VERSION
    # one version of each class on the classpath: nothing PySpark ships comes twice
    assert not set(ours) & set(shipped), sorted(set(ours) & set(shipped))
    # the one Jackson module Delta brings matches PySpark's Jackson
    assert ours["jackson-datatype-jdk8"] == shipped["jackson-databind"]


def test_session_runs_delta(delta_spark: Any, tmp_path: Path) -> None:
    conf = delta_spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    path = str(tmp_path / "t")
    delta_spark.range(3).write.format("delta").save(path)
    assert (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").is_file()
    commit = (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_text()
    assert f"Delta-Lake/{DELTA_VERSION}" in commit  # commitInfo.engineInfo: the pinned jar
    rows = delta_spark.read.format("delta").load(path).orderBy("id").collect()
    assert [r.id for r in rows] == [0, 1, 2]
