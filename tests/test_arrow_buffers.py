"""`lakequery.arrow_buffers` builds the arrays pyarrow would build from the same values
(pyarrow's own conversion is the reference: it is what the buffers stand in for)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakequery.arrow_buffers import (
    bool_array,
    empty_table,
    int64_array,
    int_values,
    large_list_array,
    python_array,
    python_scalar,
)
from lakequery.checkpoint_writer import checkpoint_schema

_TYPES = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "bool": pa.bool_(),
    "string": pa.string(),
    "binary": pa.binary(),
    "list": pa.list_(pa.string()),
    "map": pa.map_(pa.string(), pa.string()),
    "struct": pa.struct([("a", pa.int32()), ("b", pa.list_(pa.int64()))]),
}

_text = st.text(max_size=6)
_VALUES = {
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
    "string": _text,
    "binary": st.binary(max_size=6),
    "list": st.lists(st.none() | _text, max_size=3),
    "map": st.dictionaries(_text, st.none() | _text, max_size=3),
    "struct": st.fixed_dictionaries(
        {},
        optional={"a": st.none() | st.integers(0, 9), "b": st.none() | st.lists(st.integers(0, 9))},
    ),
}


@settings(max_examples=60, deadline=None)
@given(data=st.data(), kind=st.sampled_from(sorted(_TYPES)))
def test_python_array_equals_pyarrows_conversion(data: Any, kind: str) -> None:
    values = data.draw(st.lists(st.none() | _VALUES[kind], max_size=6))
    got = python_array(values, _TYPES[kind])
    got.validate(full=True)
    assert got.equals(pa.array(values, _TYPES[kind]))


def test_python_array_builds_the_checkpoint_header_rows(tmp_path: Any) -> None:
    import lakequery as lq

    uri = str(tmp_path / "t")
    table = pa.table({"id": pa.array([1, 2]), "k": pa.array(["a", "b"])})
    lq.write(uri, table, partition_by=["k"], configuration={"delta.appendOnly": "false"})
    schema = checkpoint_schema(lq.DeltaTable(uri).storage)
    rows = {
        "protocol": [
            {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors", "appendOnly"],
            }
        ],
        "metaData": [
            {
                "id": "x",
                "name": None,
                "description": None,
                "format": {"provider": "parquet", "options": []},
                "schemaString": "{}",
                "partitionColumns": ["k"],
                "configuration": [("delta.appendOnly", "false")],
                "createdTime": 5,
            }
        ],
        "txn": [{"appId": "a", "version": 3, "lastUpdated": None}, {"appId": "b", "version": 0}],
    }
    for column, values in rows.items():
        typ = schema.field(column).type
        assert python_array(values, typ).equals(pa.array(values, typ)), column


def test_scalars_tables_and_the_refused_types() -> None:
    assert python_scalar("k", pa.string()).as_py() == "k"
    assert python_scalar(None, pa.binary()).is_valid is False
    assert python_scalar(0, pa.int32()).equals(pa.scalar(0, pa.int32()))
    assert int64_array(np.arange(3)).to_pylist() == [0, 1, 2]
    chunked = pa.chunked_array([int64_array(np.arange(3)), int64_array(np.arange(5)).slice(3)])
    assert int_values(chunked).tolist() == [0, 1, 2, 3, 4]
    assert int_values(pa.chunked_array([], pa.int32())).dtype == np.int32
    with pytest.raises(ValueError, match="without nulls"):
        int_values(pa.chunked_array([pa.nulls(1, pa.int64())]))
    assert bool_array([True, False]).to_pylist() == [True, False]
    schema = pa.schema([("a", pa.int64()), ("m", pa.map_(pa.string(), pa.string()))])
    assert empty_table(schema).equals(schema.empty_table())
    with pytest.raises(TypeError, match="does not build"):
        python_array([1.5], pa.float64())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(st.booleans(), max_size=5)), max_size=8))
def test_large_list_array_equals_pyarrows_from_arrays(rows: list[list[bool] | None]) -> None:
    """Null lists span no values here, as the Polars keep masks have them."""
    sizes = [0 if r is None else len(r) for r in rows]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    flat = [v for r in rows if r is not None for v in r]
    valid = [r is not None for r in rows]
    got = large_list_array(offsets, bool_array(flat), valid)
    mask = pa.array([not v for v in valid], pa.bool_())
    want = pa.LargeListArray.from_arrays(
        pa.array(offsets, pa.int64()), pa.array(flat, pa.bool_()), mask=mask
    )
    assert got.type == pa.large_list(pa.bool_())
    assert got.equals(want)
    assert got.to_pylist() == rows


def test_large_list_array_refuses_offsets_of_the_wrong_length() -> None:
    with pytest.raises(ValueError, match="3 lists need 4 offsets"):
        large_list_array([0, 1, 2], bool_array([True, False]), [True, True, True])
