"""Files from write_data_files, committed by hand, read by lakequery and by deltalake."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import deltalake
import numpy as np
import pyarrow as pa
import pytest
from tablekit import TableKit, commit_info, protocol_action
from writekit import make_state, metadata_for

import lakequery
from lakequery.writer.data_files import write_data_files

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("x", pa.float64()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us", "UTC")),
        ("dec", pa.decimal128(10, 2)),
        ("nested", pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ("region", pa.string()),
        ("day", pa.date32()),
    ]
)


def _data(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    regions = np.array(["US/East", "EU West", "100%", None, "a{b}"], dtype=object)
    base = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    return pa.table(
        {
            "id": pa.array(np.arange(n)),
            "x": pa.array(rng.random(n)),
            "s": [f"s{i:05d}" if i % 7 else None for i in range(n)],
            "ts": [base + dt.timedelta(minutes=i) for i in range(n)],
            "dec": [Decimal(i) / 4 for i in range(n)],
            "nested": [{"a": i % 100, "b": str(i)} for i in range(n)],
            "region": regions[np.arange(n) % len(regions)],
            "day": pa.array([dt.date(2024, 1, 1 + i % 3) for i in range(n)]),
        },
        schema=SCHEMA,
    )


def _rows(t: pa.Table) -> list[dict[str, object]]:
    return sorted(t.select(SCHEMA.names).to_pylist(), key=lambda r: r["id"])  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize("partition_by", [(), ("region",), ("region", "day")])
def test_written_files_read_back(root: str, partition_by: tuple[str, ...]) -> None:
    data = _data(3000)
    state = make_state(root, SCHEMA, partition_by=partition_by, target_file_size=5_000)
    adds = write_data_files(data.to_batches(max_chunksize=500), state)
    kit = TableKit(root)
    kit.commit([protocol_action(1, 2), metadata_for(state)], info=commit_info("CREATE TABLE"))
    kit.commit([{"add": a} for a in adds], info=commit_info("WRITE"))

    expected = _rows(data)
    snap = lakequery.DeltaTable(root).snapshot()
    assert snap.num_files == len(adds)
    assert _rows(snap.scan().to_arrow()) == expected
    theirs = deltalake.DeltaTable(root).to_pyarrow_table()
    assert (
        _rows(
            theirs.cast(
                pa.schema(
                    [
                        theirs.schema.field(n).with_type(SCHEMA.field(n).type)
                        for n in theirs.column_names
                    ]
                )
            )
        )
        == expected
    )

    # Statistics-based pruning: ids are written in order, so few files can hold id >= 2990.
    plan = snap.scan(filter="id >= 2990").plan()
    assert 0 < plan.num_files < len(adds)
    got = snap.scan(filter="id >= 2990").to_arrow()
    assert sorted(got.column("id").to_pylist()) == list(range(2990, 3000))
    # Timestamps (ms-truncated max) and nested struct stats prune too.
    late = snap.scan(filter="ts > TIMESTAMP '2024-01-03 01:55:00'").plan()
    assert late.num_files < len(adds)


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_tables_read_back(root: str, mode: str) -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("s", pa.struct([("x", pa.string())])), ("p", pa.string())]
    )
    state = make_state(
        root,
        schema,
        partition_by=["p"],
        mode=mode,
        configuration={"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "4"},
    )
    data = pa.table(
        {"id": range(10), "s": [{"x": str(i)} for i in range(10)], "p": ["a", "b"] * 5},
        schema=schema,
    )
    adds = write_data_files(data, state)
    kit = TableKit(root)
    protocol = protocol_action(2, 5)
    kit.commit([protocol, metadata_for(state), *({"add": a} for a in adds)], info=commit_info())
    snap = lakequery.DeltaTable(root).snapshot()
    assert sorted(snap.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == data.to_pylist()
    assert snap.scan(filter="id > 8").to_arrow().column("id").to_pylist() == [9]
    # deltalake's to_pyarrow_table ignores column mapping; its SQL engine honours it.
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(root))
    theirs = pa.table(query.execute("SELECT * FROM t ORDER BY id"))
    assert theirs.to_pylist() == data.to_pylist()
    assert json.loads(adds[0]["stats"])["nullCount"] == {"col-1-id": 0, "col-2-s": {"col-3-x": 0}}
