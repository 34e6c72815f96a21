"""ALTER on real tables of the shared conformance set (written by Spark, delta-rs and
delta-kernel), copied first: the change lands, nothing is inflated, and lakequery's
engines and ``deltalake`` read the result."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from altkit import assert_engines, config_of, deltalake_rows, protocol_of, rows
from tablekit import copy_conformance_table

import lakequery as lq


def _copy(tmp_path: Path, name: str) -> str:
    return str(copy_conformance_table(name, tmp_path))


def _read(uri: str, key: str) -> list[dict[str, object]]:
    return rows(lq.DeltaTable(uri).snapshot().scan().to_arrow(), key)


def test_spark_column_mapping_table_rename_drop_append(tmp_path: Path) -> None:
    uri = _copy(tmp_path, "dat_column_mapping")
    before = _read(uri, "new_int")
    dt = lq.DeltaTable(uri)
    protocol = protocol_of(uri)
    dt.alter.rename_column("letter", "l")
    dt.alter.drop_column("date")
    assert protocol_of(uri) == protocol  # column mapping was on: nothing added
    lq.write(uri, pa.table({"l": ["z"], "new_int": [999]}), mode="append")
    expected = [{"l": r["letter"], "new_int": r["new_int"]} for r in before]
    expected.append({"l": "z", "new_int": 999})
    assert_engines(uri, expected, key="new_int")
    assert deltalake_rows(uri, key="new_int") == rows(pa.Table.from_pylist(expected), "new_int")


def test_id_mode_table_rename(tmp_path: Path) -> None:
    uri = _copy(tmp_path, "golden_table_with_columnmapping_mode_id")
    before = _read(uri, "LongType")
    lq.DeltaTable(uri).alter.rename_column("StringType", "text")
    after = _read(uri, "LongType")
    assert [r["text"] for r in after] == [r["StringType"] for r in before]
    assert config_of(uri)["delta.columnMapping.mode"] == "id"


def test_check_constraints_table(tmp_path: Path) -> None:
    uri = _copy(tmp_path, "dat_check_constraints")
    dt = lq.DeltaTable(uri)
    protocol = protocol_of(uri)
    total = len(_read(uri, "int"))
    with pytest.raises(lq.ConstraintViolationError, match=f"of {total} existing"):
        dt.alter.add_constraint({"tiny": "int < 2"})
    dt.alter.drop_constraint("const1")
    assert dt.alter.add_constraint({"letter_set": "letter IS NOT NULL"}).rows_checked == total
    assert protocol_of(uri) == protocol
    assert deltalake_rows(uri, key="int") == _read(uri, "int")


def test_type_widening_preview_table_widens_without_new_feature(tmp_path: Path) -> None:
    uri = _copy(tmp_path, "kernelrs_type_widening")
    before = _read(uri, "int_long")
    protocol = protocol_of(uri)
    dt = lq.DeltaTable(uri)
    dt.alter.change_column_type("byte_decimal", "decimal(6,2)")
    dt.alter.set_properties({"owner": "me"})
    assert protocol_of(uri) == protocol  # typeWidening-preview serves, no typeWidening added
    changes = dt.snapshot().metadata.schema["byte_decimal"].metadata["delta.typeChanges"]
    assert changes[-1] == {"fromType": "decimal(4,1)", "toType": "decimal(6,2)"}
    after = _read(uri, "int_long")
    assert [r["byte_decimal"] for r in after] == [
        None if r["byte_decimal"] is None else Decimal(r["byte_decimal"]).quantize(Decimal("0.01"))
        for r in before
    ]
    assert dt.snapshot().scan().to_arrow().schema.field("byte_decimal").type == pa.decimal128(6, 2)
