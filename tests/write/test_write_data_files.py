"""write_data_files: inputs, schema conformance, partitioning, rollover, column mapping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import hypothesis.strategies as st
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from writekit import make_state, schema_json

from lakequery.errors import SchemaMismatchError
from lakequery.parquet_footers import SCHEMA_TAG, schema_fingerprint
from lakequery.storage import open_storage
from lakequery.writer.data_files import write_data_files
from lakequery.writer.state import WriteState

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())])


def _read(root: str, add: dict[str, Any]) -> pa.Table:
    return pq.read_table(Path(root) / unquote(add["path"]))


def _all_rows(root: str, adds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for a in adds:
        rows.extend(_read(root, a).to_pylist())
    return sorted(rows, key=lambda r: r["id"])


def test_add_action_shape(root: str) -> None:
    adds = write_data_files(
        pa.table({"id": [1], "name": ["a"], "p": ["x"]}), make_state(root, SCHEMA), now_ms=42
    )
    [add] = adds
    assert set(add) == {
        "path",
        "partitionValues",
        "size",
        "modificationTime",
        "dataChange",
        "stats",
        "tags",
    }
    assert add["modificationTime"] == 42 and add["dataChange"] is True
    assert add["partitionValues"] == {}
    assert add["path"].startswith("part-00000-") and add["path"].endswith(".c000.zstd.parquet")
    file = Path(root) / add["path"]
    assert add["size"] == file.stat().st_size
    meta = pq.ParquetFile(file).metadata
    assert add["tags"] == {SCHEMA_TAG: schema_fingerprint(meta)}
    assert meta.row_group(0).column(0).compression == "ZSTD"


@pytest.mark.parametrize("make", ["table", "batch", "reader", "iterator", "pandas", "polars"])
def test_input_kinds(root: str, make: str) -> None:
    table = pa.table({"id": [1, 2, 3], "name": ["a", "b", None], "p": ["x", "y", "x"]})
    data: Any = {
        "table": table,
        "batch": table.to_batches()[0],
        "reader": pa.RecordBatchReader.from_batches(table.schema, table.to_batches()),
        "iterator": iter(table.to_batches(max_chunksize=1)),
        "pandas": table.to_pandas(),
        "polars": pl.from_arrow(table),
    }[make]
    adds = write_data_files(data, make_state(root, SCHEMA))
    assert _all_rows(root, adds) == table.to_pylist()


def test_conforms_columns(root: str) -> None:
    # Other order, different case, narrower types, dictionary and large strings, missing column.
    data = pa.table(
        {
            "NAME": pa.array(["a", "b"]).dictionary_encode(),
            "id": pa.array([1, 2], pa.int8()),
        }
    )
    [add] = write_data_files(data, make_state(root, SCHEMA))
    assert _read(root, add).to_pylist() == [
        {"id": 1, "name": "a", "p": None},
        {"id": 2, "name": "b", "p": None},
    ]
    assert _read(root, add).schema.types == [pa.int64(), pa.string(), pa.string()]


def test_conforms_nested_structs_by_name(root: str) -> None:
    schema = pa.schema([("s", pa.struct([("a", pa.int64()), ("b", pa.string())]))])
    data = pa.table(
        {"s": pa.array([{"b": "x", "a": 1}], pa.struct([("b", pa.string()), ("a", pa.int32())]))}
    )
    [add] = write_data_files(data, make_state(root, schema))
    assert _read(root, add).to_pylist() == [{"s": {"a": 1, "b": "x"}}]


def test_schema_mismatches(root: str) -> None:
    state = make_state(root, schema_json(SCHEMA, not_null=["id"]))
    with pytest.raises(SchemaMismatchError) as info:
        write_data_files(pa.table({"id": ["not a number"]}), state)
    assert info.value.column == "id" and info.value.expected == "long"
    with pytest.raises(SchemaMismatchError, match="'id'"):
        write_data_files(pa.table({"name": ["x"]}), state)  # missing non-nullable column
    with pytest.raises(SchemaMismatchError, match="null values"):
        write_data_files(pa.table({"id": pa.array([1, None], pa.int64())}), state)
    with pytest.raises(SchemaMismatchError, match="'extra'"):
        write_data_files(pa.table({"id": [1], "extra": [1]}), state)
    with pytest.raises(SchemaMismatchError, match="'id'"):
        write_data_files(pa.table({"id": [0.5]}), state)  # lossy cast


def test_nested_not_null(root: str) -> None:
    text = json.dumps(
        {
            "type": "struct",
            "fields": [
                {
                    "name": "s",
                    "type": {
                        "type": "struct",
                        "fields": [
                            {"name": "x", "type": "long", "nullable": False, "metadata": {}}
                        ],
                    },
                    "nullable": True,
                    "metadata": {},
                },
                {
                    "name": "l",
                    "type": {"type": "array", "elementType": "long", "containsNull": False},
                    "nullable": True,
                    "metadata": {},
                },
            ],
        }
    )
    state = make_state(root, text)
    t = pa.struct([pa.field("x", pa.int64())])
    ok = pa.table({"s": pa.array([{"x": 1}, None], t), "l": [[1], None]})
    assert len(write_data_files(ok, state)) == 1
    with pytest.raises(SchemaMismatchError, match=r"'s\.x'"):
        write_data_files(pa.table({"s": pa.array([{"x": None}], t), "l": [[1]]}), state)
    with pytest.raises(SchemaMismatchError, match=r"'l\.element'"):
        write_data_files(pa.table({"s": pa.array([None], t), "l": [[1, None]]}), state)


AWKWARD = ["US/East", "hello world", "100%", "a{b}c", "x=y", "ü:ñ", None, "", "#?*"]


def test_partitioned_awkward_values(root: str) -> None:
    n = len(AWKWARD) * 3
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "name": [f"n{i}" for i in range(n)],
            "p": AWKWARD * 3,
        }
    )
    state = make_state(root, SCHEMA, partition_by=["p"])
    adds = write_data_files(data.to_batches(max_chunksize=4), state)
    values = sorted((a["partitionValues"]["p"] or "") for a in adds)
    assert len(adds) == len(AWKWARD) - 1  # "" and None share the null partition
    assert values == sorted(v or "" for v in AWKWARD if v != "")
    rows = []
    for a in adds:
        stored = Path(root) / unquote(a["path"])
        assert stored.exists()
        file = pq.read_table(stored)
        assert file.column_names == ["id", "name"]  # no partition column in the file
        rows.extend((r["id"], a["partitionValues"]["p"]) for r in file.to_pylist())
        if a["partitionValues"]["p"] is None:
            assert a["path"].startswith("p=__HIVE_DEFAULT_PARTITION__/")
    expected = [(i, AWKWARD[i % len(AWKWARD)] or None) for i in range(n)]
    assert sorted(rows) == expected
    by_value = {a["partitionValues"]["p"]: a["path"] for a in adds}
    assert by_value["US/East"].startswith("p=US%252FEast/")
    assert by_value["hello world"].startswith("p=hello%20world/")
    assert by_value["100%"].startswith("p=100%2525/")
    assert by_value["a{b}c"].startswith("p=a%257Bb%7Dc/")


def test_multi_column_partitions(root: str) -> None:
    schema = pa.schema(
        [("v", pa.int64()), ("d", pa.date32()), ("k", pa.int32()), ("f", pa.float64())]
    )
    data = pa.table(
        {
            "v": range(6),
            "d": pa.array(np.array(["2024-01-01", "2024-01-02"] * 3, dtype="datetime64[D]")),
            "k": pa.array([1, 1, 2, 2, None, None], pa.int32()),
            "f": [1e20, 1e20, 0.5, 0.5, 0.5, 0.5],
        },
        schema=schema,
    )
    adds = write_data_files(data, make_state(root, schema, partition_by=["d", "k", "f"]))
    keys = sorted((a["partitionValues"]["d"], a["partitionValues"]["k"] or "") for a in adds)
    assert len(adds) == 6
    assert keys[0] == ("2024-01-01", "")
    paths = {a["path"].rsplit("/", 1)[0] for a in adds}
    assert "d=2024-01-01/k=1/f=1.0E20" in paths
    assert "d=2024-01-02/k=__HIVE_DEFAULT_PARTITION__/f=0.5" in paths


def test_rollover_by_target_file_size(root: str) -> None:
    rng = np.random.default_rng(1)
    n = 200_000
    data = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "name": pa.array(rng.random(n).astype(str)),
            "p": pa.nulls(n, pa.string()),
        }
    )
    state = make_state(root, SCHEMA, target_file_size=256 * 1024, max_rows_per_row_group=20_000)
    adds = write_data_files(data.to_batches(max_chunksize=10_000), state)
    assert len(adds) > 3
    for a in adds[:-1]:
        assert a["size"] >= 256 * 1024
    total = 0
    seen = []
    for a in adds:
        stats = json.loads(a["stats"])
        file = _read(root, a)
        assert stats["numRecords"] == file.num_rows
        assert stats["minValues"]["id"] == pc_min(file)
        total += file.num_rows
        seen.append(file.column("id"))
    assert total == n
    assert sorted(pa.chunked_array(seen).to_pylist()) == list(range(n))


def pc_min(t: pa.Table) -> int:
    import pyarrow.compute as pc

    return int(pc.min(t.column("id")).as_py())


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_physical_names(root: str, mode: str) -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("s", pa.struct([("x", pa.string())])), ("p", pa.string())]
    )
    state = make_state(root, schema, mode=mode, partition_by=["p"])
    [add] = write_data_files(
        pa.table({"id": [1], "s": [{"x": "q"}], "p": ["v"]}, schema=schema), state
    )
    assert add["partitionValues"] == {"col-4-p": "v"}
    assert add["path"].startswith("col-4-p=v/")
    file = pq.ParquetFile(Path(root) / unquote(add["path"]))
    arrow = file.schema_arrow
    assert arrow.names == ["col-1-id", "col-2-s"]
    assert arrow.field("col-2-s").type.field(0).name == "col-3-x"
    ids = [file.schema.column(i).path for i in range(len(file.schema))]
    assert ids == ["col-1-id", "col-2-s.col-3-x"]
    assert arrow.field("col-1-id").metadata[b"PARQUET:field_id"] == b"1"
    assert arrow.field("col-2-s").type.field(0).metadata[b"PARQUET:field_id"] == b"3"
    assert json.loads(add["stats"])["maxValues"] == {"col-1-id": 1, "col-2-s": {"col-3-x": "q"}}


def test_compression_codec_and_memory_storage() -> None:
    from lakequery.metadata import Metadata
    from lakequery.protocol.features import Protocol

    md = Metadata(
        "id",
        schema_json(SCHEMA),
        (),
        {"delta.parquet.compression.codec": "snappy", "delta.targetFileSize": "1mb"},
    )
    state = WriteState.for_table("memory://write-codec", md, Protocol(1, 2))
    assert state.target_file_size == 1 << 20
    [add] = write_data_files(pa.table({"id": [1, 2]}), state)
    assert add["path"].endswith(".c000.snappy.parquet")
    storage = open_storage("memory://write-codec")
    raw = storage.read(storage.join(add["path"]))
    assert len(raw) == add["size"]
    file = pq.ParquetFile(pa.BufferReader(raw))
    assert file.metadata.row_group(0).column(0).compression == "SNAPPY"
    uncompressed = WriteState(
        "memory://write-codec", schema_json(SCHEMA), compression="uncompressed"
    )
    [add] = write_data_files(pa.table({"id": [1]}), uncompressed)
    assert add["path"].endswith(".c000.parquet")


def test_empty_input_writes_nothing(root: str) -> None:
    state = make_state(root, SCHEMA)
    assert write_data_files(pa.table({"id": pa.array([], pa.int64())}), state) == []
    assert write_data_files(iter([]), state) == []


def test_void_columns_are_not_stored(root: str) -> None:
    text = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "a", "type": "long", "nullable": True, "metadata": {}},
                {"name": "v", "type": "void", "nullable": True, "metadata": {}},
            ],
        }
    )
    [add] = write_data_files(pa.table({"a": [1]}), make_state(root, text))
    assert _read(root, add).column_names == ["a"]
    assert json.loads(add["stats"])["nullCount"] == {"a": 0}


def test_pandas_frame_with_index(root: str) -> None:
    frame = pd.DataFrame({"id": [3, 4], "name": ["a", "b"]}, index=[10, 11])
    [add] = write_data_files(frame, make_state(root, SCHEMA))
    assert _read(root, add).column("id").to_pylist() == [3, 4]


@pytest.mark.parametrize("mode", ["none", "name"])
def test_adaptive_dictionary_skips_mostly_distinct_columns(root: str, mode: str) -> None:
    n = 20_000
    data = pa.table(
        {
            "id": np.arange(n, dtype=np.int64),  # all distinct: plain
            "name": pa.array([f"k{i % 7}" for i in range(n)]),  # 7 values: dictionary
        }
    )
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    state = make_state(root, schema, mode=mode, adaptive_dictionary=True)
    [add] = write_data_files(data, state)
    file = pq.ParquetFile(Path(root) / unquote(add["path"]))
    encodings = [
        set(file.metadata.row_group(0).column(i).encodings) for i in range(data.num_columns)
    ]
    assert not any("DICTIONARY" in e for e in encodings[0])
    assert any("DICTIONARY" in e for e in encodings[1])
    assert file.read().rename_columns(data.column_names).equals(data)
    # the default keeps dictionary encoding on every column
    [plain] = write_data_files(data, make_state(root, schema, mode=mode))
    meta = pq.ParquetFile(Path(root) / unquote(plain["path"])).metadata.row_group(0)
    assert any("DICTIONARY" in e for e in meta.column(0).encodings)


@pytest.mark.parametrize(
    "values",
    [
        pa.array([], pa.int64()),
        pa.array([None, None], pa.int32()),
        pa.array([3, 1, None, 3, None, 2], pa.int64()),
        pa.chunked_array([[5, 5], [None, 7]], pa.uint64()),
        pa.array(np.random.default_rng(3).integers(-40, 40, 5000), pa.int16()),
        pa.array(["a", None, "a", "b"]),
        pa.array([1.0, None, 1.0, 2.5]),
    ],
)
def test_distinct_values_counts_like_arrow(values: Any) -> None:
    import pyarrow.compute as pc

    from lakequery.writer.data_files import distinct_values

    assert distinct_values(values) == pc.count_distinct(values, mode="all").as_py()


@settings(max_examples=400, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(-5, 5)), max_size=80
    ),
    limit=st.integers(0, 90),
    kind=st.sampled_from(["int64", "int8", "uint64", "int32", "string"]),
)
def test_more_distinct_than_answers_like_a_count(values: list[Any], limit: int, kind: str) -> None:
    from lakequery.writer.data_files import distinct_values, more_distinct_than

    fit = {
        "int8": lambda v: v % 200 - 100,
        "int32": lambda v: v % 2**31,
        "uint64": lambda v: v % 2**64,
        "string": str,
    }.get(kind, lambda v: v)
    col = pa.array([None if v is None else fit(v) for v in values], type=getattr(pa, kind)())
    assert more_distinct_than(col, limit) == (distinct_values(col) > limit)


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).integers(0, 2**32, 8192),  # mostly distinct: the hash bound
        np.random.default_rng(2).integers(0, 100, 8192),  # a narrow range
        # i / 0x9E3779B97F4A7C15 modulo 2**64: the hash puts them all in one bucket, so
        # the lower bound settles nothing and they are counted
        (np.arange(8192, dtype=np.uint64) * np.uint64(pow(0x9E3779B97F4A7C15, -1, 2**64))),
    ],
)
def test_more_distinct_than_on_sample_sized_columns(values: Any) -> None:
    from lakequery.writer.data_files import distinct_values, more_distinct_than

    col = pa.array(values)
    for limit in (99, 100, 4096, 8191, 8192):
        assert more_distinct_than(col, limit) == (distinct_values(col) > limit)


def test_data_files_writer_writes_what_write_data_files_writes(root: str) -> None:
    from lakequery.writer.data_files import DataFilesWriter

    state = make_state(root, SCHEMA, partition_by=["p"], adaptive_dictionary=True)
    inputs = [
        pa.table({"id": [1, 2, 3], "name": ["a", "b", None], "p": ["x", "y", "x"]}),
        pa.table({"id": np.arange(5000, dtype=np.int64), "name": ["k"] * 5000, "p": ["y"] * 5000}),
        pa.table({"id": [7], "name": ["z"], "p": [None]}),
    ]

    def described(adds: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        out = []
        for a in adds:
            file = pq.ParquetFile(Path(root) / unquote(a["path"]))
            encodings = [sorted(file.metadata.row_group(0).column(i).encodings) for i in (0, 1)]
            out.append((a["partitionValues"], a["stats"], _read(root, a).to_pylist(), encodings))
        return sorted(out, key=json.dumps)

    with DataFilesWriter(state, now_ms=5) as writer:
        reused = [writer.write(t) for t in inputs]
    fresh = [write_data_files(t, state, now_ms=5) for t in inputs]
    assert [len(a) for a in reused] == [2, 1, 1]
    for mine, theirs in zip(reused, fresh, strict=True):
        assert described(mine) == described(theirs)
        assert {a["path"] for a in mine}.isdisjoint(a["path"] for a in theirs)
    with pytest.raises(RuntimeError, match="closed"):
        writer.write(inputs[0])


def test_data_files_writer_is_closed_by_a_failed_write(root: str) -> None:
    from lakequery.writer.data_files import DataFilesWriter

    writer = DataFilesWriter(make_state(root, SCHEMA))
    with pytest.raises(SchemaMismatchError):
        writer.write(pa.table({"nope": [1]}))
    with pytest.raises(RuntimeError, match="closed"):
        writer.write(pa.table({"id": [1], "name": ["a"], "p": ["x"]}))


@pytest.mark.parametrize(
    "column",
    [
        pa.array([{"t": 1}], pa.struct([("t", pa.timestamp("ns"))])),
        pa.array([[1_500]], pa.list_(pa.timestamp("ns", "UTC"))),
        pa.array([{"t": 10**14}], pa.struct([("t", pa.timestamp("s"))])),  # beyond us
    ],
    ids=["struct-ns", "list-ns", "struct-s-overflow"],
)
def test_nested_timestamps_are_never_truncated(tmp_path: Path, column: pa.Array) -> None:
    """A nested timestamp that microseconds cannot hold is refused, as a top-level one is:
    the nested cast fell back to the reader's, which truncates (1 ns stored as 0; 10**14 s
    wrapped into an unreadable value). Exact ones are written."""
    import lakequery as lq
    from lakequery.errors import SchemaMismatchError

    uri = str(tmp_path / "t")
    with pytest.raises(SchemaMismatchError, match=r"would lose data|out of bounds|overflow"):
        lq.write(uri, pa.table({"c": column}))
    assert not (tmp_path / "t" / "_delta_log").exists()
    exact = pa.array([{"t": 2_000}], pa.struct([("t", pa.timestamp("ns"))]))
    lq.write(uri, pa.table({"c": exact}))
    back = lq.DeltaTable(uri).snapshot().scan().to_arrow().column("c").combine_chunks()
    assert back.field("t").cast(pa.int64()).to_pylist() == [2]


@pytest.mark.parametrize("large", [False, True])
def test_list_views_are_written_as_lists(tmp_path: Path, large: bool) -> None:
    """pyarrow 26 casts a list view to an invalid list array: a list_view column failed
    with ArrowInvalid and a large_list_view one crashed the process in the Parquet writer.
    Views with out-of-order offsets, nulls and empty lists, top-level and in a struct."""
    import lakequery as lq

    kind = pa.LargeListViewArray if large else pa.ListViewArray
    offsets = pa.array([3, 0, 0, 5], pa.int64() if large else pa.int32())
    sizes = pa.array([2, 7, 0, 1], pa.int64() if large else pa.int32())
    values = pa.array(range(7), pa.int32())
    view = kind.from_arrays(offsets, sizes, values, mask=pa.array([False, True, False, False]))
    view.validate(full=True)
    expected = [[3, 4], None, [], [5]]
    assert view.to_pylist() == expected
    nested = pa.StructArray.from_arrays([view], names=["l"])
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"l": view, "s": nested}))
    back = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    assert back.column("l").to_pylist() == expected
    assert [r["l"] for r in back.column("s").to_pylist()] == expected


def test_extension_and_run_end_encoded_columns_are_written_as_their_values(
    tmp_path: Path,
) -> None:
    """Arrow's canonical uuid and json extension types are their storage (binary, string);
    run-end-encoded columns their values. They were refused, though the schema mapping
    documents them."""
    import uuid

    import lakequery as lq

    ids = pa.ExtensionArray.from_storage(
        pa.uuid(), pa.array([uuid.UUID(int=5).bytes, None], pa.binary(16))
    )
    docs = pa.ExtensionArray.from_storage(pa.json_(), pa.array(['{"a": 1}', None]))
    runs = pa.RunEndEncodedArray.from_arrays([1, 2], ["x", "y"])
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"u": ids, "j": docs, "r": runs}))
    back = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    assert back.schema.types == [pa.binary(), pa.string(), pa.string()]
    assert back.to_pylist() == [
        {"u": uuid.UUID(int=5).bytes, "j": '{"a": 1}', "r": "x"},
        {"u": None, "j": None, "r": "y"},
    ]
