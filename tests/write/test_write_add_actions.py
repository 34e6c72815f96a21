"""add actions as Arrow, pickling of the state and the executor function."""

from __future__ import annotations

import functools
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from writekit import make_state

from lakequery.writer.add_actions import (
    ADD_ACTION_SCHEMA,
    add_actions_from_arrow,
    add_actions_to_arrow,
    write_batches_to_arrow,
)
from lakequery.writer.state import WriteState

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])


def test_arrow_round_trip() -> None:
    adds = [
        {
            "path": "p=a/x.parquet",
            "partitionValues": {"p": "a"},
            "size": 5,
            "modificationTime": 7,
            "dataChange": True,
            "stats": '{"numRecords":1}',
        },
        {
            "path": "p=__HIVE_DEFAULT_PARTITION__/y.parquet",
            "partitionValues": {"p": None},
            "size": 6,
            "modificationTime": 8,
            "dataChange": False,
            "tags": {"INSERTION_TIME": "1"},
        },
    ]
    table = add_actions_to_arrow(adds)
    assert table.schema == ADD_ACTION_SCHEMA
    assert add_actions_from_arrow(table) == adds
    assert add_actions_from_arrow(table.to_batches()[0]) == adds
    assert add_actions_from_arrow(iter(table.to_batches())) == adds


def test_state_pickles_without_derived_values(root: str) -> None:
    state = make_state(root, SCHEMA, partition_by=["p"], storage_options={"anon": True})
    _ = state.arrow_schema, state.schema, state.table_properties  # fill the caches
    payload = pickle.dumps(state)
    assert b"pyarrow" not in payload
    clone = pickle.loads(payload)
    assert clone == state
    assert clone.options() == {"anon": True}
    assert clone.arrow_schema.names == ["id", "p"]


def test_for_table_defaults() -> None:
    from lakequery.metadata import Metadata
    from lakequery.protocol.features import Protocol

    md = Metadata(
        "id",
        '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}',
        (),
        {"delta.columnMapping.mode": "name", "delta.targetFileSize": "104857600"},
    )
    state = WriteState.for_table(
        "/tmp/x", md, Protocol(2, 5), target_file_size=None, data_change=False
    )
    assert state.column_mapping_mode == "name"
    assert state.target_file_size == 104857600
    assert state.compression == "zstd" and not state.data_change
    assert WriteState.for_table("/tmp/x", md, Protocol(1, 2)).column_mapping_mode == "none"
    assert (
        WriteState.for_table("/tmp/x", md, Protocol(2, 5), target_file_size=5).target_file_size == 5
    )


def test_executor_function_round_trip(root: str) -> None:
    state = make_state(root, SCHEMA, partition_by=["p"])
    fn = pickle.loads(pickle.dumps(functools.partial(write_batches_to_arrow, state=state)))
    batches = pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]}).to_batches(max_chunksize=1)
    out = list(fn(iter(batches)))
    assert all(b.schema == ADD_ACTION_SCHEMA for b in out)
    adds = add_actions_from_arrow(out)
    assert sorted(a["partitionValues"]["p"] for a in adds) == ["a", "b"]
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 3
    assert list(fn(iter([]))) == []


CHILD = """
import pickle, sys
import pyarrow as pa
fn = pickle.loads(sys.stdin.buffer.read())
batches = [pa.record_batch({"id": pa.array([1, 2], pa.int64()), "p": ["x", None]})]
sink = pa.BufferOutputStream()
out = list(fn(iter(batches)))
with pa.ipc.new_stream(sink, out[0].schema) as w:
    for b in out:
        w.write_batch(b)
sys.stdout.buffer.write(sink.getvalue().to_pybytes())
"""


def test_executor_function_in_another_process(root: str) -> None:
    state = make_state(root, SCHEMA, partition_by=["p"])
    payload = pickle.dumps(functools.partial(write_batches_to_arrow, state=state))
    done = subprocess.run(
        [sys.executable, "-c", CHILD], input=payload, capture_output=True, check=True, timeout=120
    )
    adds = add_actions_from_arrow(pa.ipc.open_stream(done.stdout).read_all())
    assert sorted(str(a["partitionValues"]["p"]) for a in adds) == ["None", "x"]
    for a in adds:
        assert (Path(root) / a["path"].replace("%25", "%")).exists()
