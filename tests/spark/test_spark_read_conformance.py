"""``lakequery.spark.read`` on every conformance table and version: the Spark DataFrame
holds exactly the rows of lakequery's own Arrow read (or the read is refused with the
same documented error before any Spark job runs)."""

from __future__ import annotations

from typing import Any

import pytest
from conformance._cases import EXPECTED_ERRORS, VersionCase, require_data, version_cases
from conformance._compare import assert_tables_match

import lakequery as lq
import lakequery.spark as lqs


def _cases() -> list[Any]:
    try:
        cases = version_cases()
    except Exception as exc:  # the data folder is missing: one failing case says so
        return [pytest.param(None, id=f"conformance-data-missing-{type(exc).__name__}")]
    return [pytest.param(vc, id=vc.id) for vc in cases]


@pytest.mark.parametrize("case", _cases())
def test_spark_read_equals_arrow_read(spark: Any, case: VersionCase | None) -> None:
    require_data()
    assert case is not None
    uri = str(case.table_dir)
    if case.expect == "error":
        spec = EXPECTED_ERRORS[(case.name, case.version)]
        classes = tuple(getattr(lq, c) if isinstance(c, str) else c for c in spec.classes)
        with pytest.raises(classes):
            lqs.read(spark, uri, version=case.version).toArrow()
        return
    snapshot = lq.DeltaTable(uri).snapshot(version=case.version)
    expected = snapshot.scan().to_arrow()
    df = lqs.read(spark, uri, version=case.version)
    assert df.columns == expected.column_names
    if "variant" in snapshot.metadata.schema_string:
        # PySpark's toArrow() (4.1, 4.2.0) fails on arrays of variants holding nulls; rows come
        # back as VariantVal objects, compared byte for byte with Arrow's struct of
        # (metadata, value).
        assert _sorted(_plain(r) for r in df.collect()) == _sorted(
            _arrow_plain(r) for r in expected.to_pylist()
        )
        return
    assert_tables_match(df.toArrow(), expected, context=f"{case.id}: lakequery.spark.read")


def _plain(value: Any) -> Any:
    """A Spark row value as Arrow's ``to_pylist`` gives it (variants as dicts)."""
    from pyspark.sql import Row
    from pyspark.sql.types import VariantVal

    if isinstance(value, VariantVal):
        return {"metadata": bytes(value.metadata), "value": bytes(value.value)}
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, dict):  # a map (structs are Rows)
        return _plain_map([(k, _plain(v)) for k, v in value.items()])
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _plain_map(entries: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return sorted(entries, key=repr)  # entry order is not part of a map's value


def _arrow_plain(value: Any) -> Any:
    """Arrow ``to_pylist`` values with map entries (lists of pairs) in a canonical order."""
    if isinstance(value, dict):
        return {k: _arrow_plain(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        return _plain_map([(k, _arrow_plain(v)) for k, v in value])
    if isinstance(value, list):
        return [_arrow_plain(v) for v in value]
    return value


def _sorted(rows: Any) -> list[str]:
    return sorted(repr(r) for r in rows)
