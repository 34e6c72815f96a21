"""Classic checkpoints written by lakequery (digest §2.5, §7): content, layout, interop.

Tables are built by hand with ``tablekit`` (independent of lakequery); the oracle for a
checkpoint is always a replay of the JSON commits alone (a copy of the log without the
checkpoint, or tablekit's own replay), and ``deltalake`` as an independent reader.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from tablekit import (
    TableKit,
    commit_info,
    conformance_dir,
    domain_action,
    metadata_action,
    protocol_action,
    remove_action,
    replay,
    txn_action,
    with_dv,
    z85_encode,
)

import lakequery as lq
from lakequery.checkpoint_writer import ROW_GROUP_ROWS, write_checkpoint
from lakequery.errors import VersionNotFoundError
from lakequery.protocol.last_checkpoint import parse_last_checkpoint

UTC = dt.timezone.utc

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _json_only_copy(src: Path, dst: Path) -> Path:
    """A copy of the table whose log has no checkpoint and no ``_last_checkpoint``."""
    shutil.copytree(src, dst)
    log = dst / "_delta_log"
    for p in log.iterdir():
        if ".checkpoint." in p.name or p.name == "_last_checkpoint":
            p.unlink()
    return dst


def _checkpoint_file(root: Path, version: int) -> Path:
    return root / "_delta_log" / f"{version:020d}.checkpoint.parquet"


def _files(snap: lq.Snapshot) -> list[dict[str, Any]]:
    rows = snap.files().to_pylist()
    return sorted(rows, key=lambda r: (r["path"], json.dumps(r["deletion_vector"], default=str)))


def _state(snap: lq.Snapshot) -> dict[str, Any]:
    return {
        "version": snap.version,
        "files": _files(snap),
        "txns": snap.txns,
        "domains": snap.domains,
        "protocol": snap.protocol.to_action(),
        "metadata": snap.metadata.to_action(),
    }


def _rows(table: pa.Table) -> Counter[str]:
    return Counter(repr(sorted(r.items())) for r in table.to_pylist())


def _leaves(value: Any) -> set[Any]:
    if isinstance(value, dict):
        return set().union(*(_leaves(v) for v in value.values()))
    return {value}


def _uses_checkpoint(snap: lq.Snapshot, version: int) -> bool:
    seg = snap._state.segment
    return seg.checkpoint is not None and seg.checkpoint.version == version


# --------------------------------------------------------------------------------------------
# 1. property: checkpoint + tail == full JSON replay
# --------------------------------------------------------------------------------------------

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
        ("p", pa.string()),
    ]
)
TS_TEXTS = ["2024-01-01T10:00:00.123Z", "2023-06-30T23:59:59.999-08:00", "2024-03-01T00:00:00Z"]

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"), st.integers(1, 3), st.integers(0, 100), st.sampled_from(TS_TEXTS)
        ),
        st.tuples(st.just("remove"), st.integers(0, 50)),
        st.tuples(st.just("dv"), st.integers(0, 50), st.booleans()),
        st.tuples(st.just("txn"), st.sampled_from(["app-a", "app-b"]), st.integers(0, 9)),
        st.tuples(st.just("domain"), st.sampled_from(["x.one", "x.two"]), st.booleans()),
        st.tuples(st.just("metadata"), st.text("abc", max_size=3)),
    ),
    min_size=1,
    max_size=10,
)


class _Builder:
    """Applies random operations as commits, keeping the live adds to pick from."""

    def __init__(self, root: Path, partitioned: bool) -> None:
        self.kit = TableKit(root)
        self.partitioned = partitioned
        self.table_id = str(uuid.uuid4())
        self.kit.create(
            SCHEMA,
            partition_by=["p"] if partitioned else [],
            protocol=protocol_action(
                3, 7, ["deletionVectors"], ["deletionVectors", "domainMetadata"]
            ),
        )
        # fix the table id so metadata changes keep it
        meta = json.loads(self.kit.commit_path(0).read_text().splitlines()[2])
        self.table_id = meta["metaData"]["id"]
        self.live: list[dict[str, Any]] = []
        self.n = 0

    def _add(self, value: int, ts: str) -> dict[str, Any]:
        self.n += 1
        part = {"p": None if value % 5 == 0 else f"v {value % 3}"} if self.partitioned else {}
        data_cols = ["id", "s", "ts", "d"]
        stats = {
            "numRecords": value + 1,
            "minValues": {"id": value, "s": f"s{value:03d}", "ts": ts, "d": "2024-01-02"},
            "maxValues": {"id": value + 10, "s": f"t{value:03d}", "ts": ts, "d": "2024-02-03"},
            "nullCount": dict.fromkeys(data_cols, 0),
        }
        if not self.partitioned:
            stats["nullCount"]["p"] = value + 1
        name = f"dir/part {self.n:05d}-{uuid.uuid4()}.parquet"
        return {
            "add": {
                "path": name.replace(" ", "%20"),
                "partitionValues": part,
                "size": 100 + value,
                "modificationTime": 1_700_000_000_000 + value,
                "dataChange": True,
                "stats": json.dumps(stats),
                "tags": {"INSERTION_TIME": str(value)} if value % 2 else None,
            }
        }

    def apply(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        actions: list[dict[str, Any]] = []
        if kind == "add":
            new = [self._add(op[2] + i, op[3]) for i in range(op[1])]
            self.live.extend(new)
            actions = new
        elif kind == "remove" and self.live:
            victim = self.live.pop(op[1] % len(self.live))
            # some tombstones are old enough to be expired at checkpoint time
            ts = 1_000 if op[1] % 3 == 0 else None
            actions = [remove_action(victim, deletion_timestamp=ts)]
        elif kind == "dv" and self.live:
            i = op[1] % len(self.live)
            old = self.live[i]
            dv = None
            if op[2]:
                dv = {
                    "storageType": "u",
                    "pathOrInlineDv": z85_encode(uuid.uuid4().bytes),
                    "offset": 1,
                    "sizeInBytes": 40,
                    "cardinality": 1,
                }
            new = with_dv(old, dv)
            self.live[i] = new
            actions = [remove_action(old), new]
        elif kind == "txn":
            actions = [txn_action(op[1], op[2], last_updated=1_700_000_000_000 + op[2])]
        elif kind == "domain":
            actions = [domain_action(op[1], json.dumps({"n": self.n}), removed=op[2])]
        elif kind == "metadata":
            actions = [
                metadata_action(
                    SCHEMA,
                    ["p"] if self.partitioned else [],
                    {"user.k": op[1], "delta.enableDeletionVectors": "true"},
                    table_id=self.table_id,
                )
            ]
        if not actions:
            actions = [txn_action("noop", self.n)]
        self.kit.commit(actions, info=commit_info())


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    before=ops,
    after=ops,
    again=ops,
    partitioned=st.booleans(),
    data=st.data(),
)
def test_checkpoint_plus_tail_equals_full_replay(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[tuple[Any, ...]],
    after: list[tuple[Any, ...]],
    again: list[tuple[Any, ...]],
    partitioned: bool,
    data: st.DataObject,
) -> None:
    base = tmp_path_factory.mktemp("prop")
    root = base / "t"
    b = _Builder(root, partitioned)
    for op in before:
        b.apply(op)
    v1 = data.draw(st.integers(0, b.kit.versions()[-1]), label="checkpoint version")
    info = write_checkpoint(lq.DeltaTable(str(root)).storage, v1)
    assert info.version == v1
    for op in after:
        b.apply(op)
    # a second checkpoint, built from the first one plus the commits after it
    v2 = b.kit.versions()[-1]
    write_checkpoint(lq.DeltaTable(str(root)).storage)
    for op in again:
        b.apply(op)

    oracle = _json_only_copy(root, base / "json_only")
    latest = b.kit.versions()[-1]
    dt_cp, dt_json = lq.DeltaTable(str(root)), lq.DeltaTable(str(oracle))
    snap = dt_cp.snapshot()
    assert _uses_checkpoint(snap, v2)
    assert _state(snap) == _state(dt_json.snapshot())

    # tablekit's independent replay agrees on files, txns and domains
    kit_state = replay(root, latest)
    assert {
        (f["path"], (f["deletion_vector"] or {}).get("pathOrInlineDv")) for f in _files(snap)
    } == {
        (path, (a.get("deletionVector") or {}).get("pathOrInlineDv"))
        for (path, _), a in kit_state.adds.items()
    }
    assert snap.txns == {k: t["version"] for k, t in kit_state.txns.items()}
    assert snap.domains == kit_state.live_domains()

    # time travel around both checkpoints
    for v in sorted({max(v1 - 1, 0), v1, min(v1 + 1, latest), v2}):
        assert _state(dt_cp.snapshot(version=v)) == _state(dt_json.snapshot(version=v)), v

    # the tombstones in the latest checkpoint are exactly the unexpired ones
    rows = pq.read_table(_checkpoint_file(root, v2)).column("remove").to_pylist()
    removes = [r for r in rows if r is not None]
    cutoff = int(time.time() * 1000) - 7 * 24 * 3600 * 1000
    expected = {
        k for k, r in replay(root, v2).tombstones.items() if r["deletionTimestamp"] > cutoff
    }
    assert len(removes) == len(expected)
    assert all(r["dataChange"] is False for r in removes)


# --------------------------------------------------------------------------------------------
# 2. deltalake reads lakequery's checkpoint
# --------------------------------------------------------------------------------------------


def _data_table(root: Path) -> tuple[TableKit, int]:
    kit = TableKit(root)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("part", pa.int32())])
    kit.create(schema, partition_by=["part"])
    adds = []
    for i in range(6):
        data = pa.table(
            {
                "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                "name": [f"n{j}" for j in range(10)],
            }
        )
        adds.append(kit.write_parquet(data, partition_values={"part": i % 3}))
        kit.commit([adds[-1]], info=commit_info())
    kit.commit([remove_action(adds[1]), txn_action("app", 3, 1)], info=commit_info("DELETE"))
    v = kit.commit([remove_action(adds[4])], info=commit_info("DELETE"))
    return kit, v


def test_deltalake_reads_lakequery_checkpoint(tmp_path: Path) -> None:
    import deltalake

    root = tmp_path / "t"
    kit, v = _data_table(root)
    expected = lq.DeltaTable(str(root)).snapshot().scan().to_arrow()
    write_checkpoint(lq.DeltaTable(str(root)).storage, v)
    extra = kit.write_parquet(
        pa.table({"id": pa.array([100], pa.int64()), "name": ["late"]}),
        partition_values={"part": 7},
    )
    kit.commit([extra], info=commit_info())
    for old in range(v):  # only the checkpoint and the commits from v on remain
        kit.commit_path(old).unlink()

    snap = lq.DeltaTable(str(root)).snapshot()
    assert _uses_checkpoint(snap, v)
    ours = snap.scan().to_arrow()
    assert ours.num_rows == expected.num_rows + 1

    theirs_dt = deltalake.DeltaTable(str(root))
    assert theirs_dt.version() == v + 1
    assert sorted(Path(u).name for u in theirs_dt.file_uris()) == sorted(
        Path(p).name for p in snap.files().column("path").to_pylist()
    )
    theirs = theirs_dt.to_pyarrow_table().select(ours.column_names).cast(ours.schema)
    assert _rows(theirs) == _rows(ours)
    # deltalake at the checkpoint version itself
    at_v = deltalake.DeltaTable(str(root), version=v).to_pyarrow_table()
    assert at_v.num_rows == expected.num_rows


# --------------------------------------------------------------------------------------------
# 3. layout: §7.3 schema, typed stats, partitionValues_parsed, row groups
# --------------------------------------------------------------------------------------------


def _field(name: str, typ: Any, physical: str, ident: int) -> dict[str, Any]:
    return {
        "name": name,
        "type": typ,
        "nullable": True,
        "metadata": {"delta.columnMapping.id": ident, "delta.columnMapping.physicalName": physical},
    }


MAPPED_SCHEMA = {
    "type": "struct",
    "fields": [
        _field("id", "long", "col-id", 1),
        _field(
            "n",
            {
                "type": "struct",
                "fields": [_field("x", "string", "col-x", 3), _field("b", "boolean", "col-b", 4)],
            },
            "col-n",
            2,
        ),
        _field("ts", "timestamp", "col-ts", 5),
        _field("ntz", "timestamp_ntz", "col-ntz", 6),
        _field("d", "date", "col-d", 7),
        _field("dec", "decimal(10,2)", "col-dec", 8),
        _field("f", "double", "col-f", 9),
        _field(
            "arr", {"type": "array", "elementType": "integer", "containsNull": True}, "col-arr", 10
        ),
        _field("p", "date", "col-p", 11),
    ],
}


def _mapped_table(root: Path, configuration: dict[str, str] | None = None) -> TableKit:
    kit = TableKit(root)
    features = ["columnMapping", "timestampNtz", "deletionVectors"]
    meta = {
        "metaData": {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(MAPPED_SCHEMA),
            "partitionColumns": ["p"],
            "configuration": {
                "delta.columnMapping.mode": "name",
                "delta.columnMapping.maxColumnId": "11",
                **(configuration or {}),
            },
            "createdTime": 1,
        }
    }
    kit.commit([protocol_action(3, 7, features, features), meta], info=commit_info())
    stats = {
        "numRecords": 3,
        "minValues": {
            "col-id": 1,
            "col-n": {"col-x": "a"},
            "col-ts": "2024-01-01T10:00:00.123-08:00",
            "col-ntz": "2024-01-01T10:00:00",
            "col-d": "2024-01-02",
            "col-dec": 1.25,
            "col-f": "-Infinity",
        },
        "maxValues": {
            "col-id": "bogus",
            "col-n": {"col-x": "zz"},
            "col-ts": "2024-01-02T00:00:00Z",
            "col-ntz": "2024-01-01T11:00:00.5",
            "col-d": "2024-12-31",
            "col-dec": 99999999.99,
            "col-f": "NaN",
        },
        "nullCount": {"col-id": 0, "col-n": {"col-x": 1, "col-b": 3}, "col-arr": 2, "col-f": 0},
        "tightBounds": False,
    }
    adds = [
        {
            "add": {
                "path": "a.parquet",
                "partitionValues": {"col-p": "2024-05-06"},
                "size": 10,
                "modificationTime": 1,
                "dataChange": True,
                "stats": json.dumps(stats),
                "baseRowId": 7,
                "defaultRowCommitVersion": 0,
                "clusteringProvider": "liquid",
                "deletionVector": {
                    "storageType": "i",
                    "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@fTp",
                    "sizeInBytes": 40,
                    "cardinality": 1,
                },
            }
        },
        {
            "add": {
                "path": "b.parquet",
                "partitionValues": {"col-p": None},
                "size": 10,
                "modificationTime": 1,
                "dataChange": True,
                "stats": '{"numRecords": "many", "minValues": 5, "maxValues": {"col-n": 1}}',
            }
        },
        {
            "add": {
                "path": "c.parquet",
                "partitionValues": {"col-p": ""},
                "size": 10,
                "modificationTime": 1,
                "dataChange": True,
            }
        },
    ]
    kit.commit(adds, info=commit_info())
    return kit


def test_checkpoint_schema_and_typed_stats(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _mapped_table(root)
    info = lq.DeltaTable(str(root)).checkpoint()
    assert (info.version, info.num_add_files, info.num_actions) == (1, 3, 5)
    table = pq.read_table(info.path)
    schema = table.schema
    assert schema.names == ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"]
    add = schema.field("add").type
    assert [add.field(i).name for i in range(add.num_fields)] == [
        "path", "partitionValues", "size", "modificationTime", "dataChange", "stats", "tags",
        "deletionVector", "baseRowId", "defaultRowCommitVersion", "clusteringProvider",
        "partitionValues_parsed", "stats_parsed",
    ]  # fmt: skip
    assert pa.types.is_map(add.field("partitionValues").type)
    assert add.field("deletionVector").type == pa.struct(
        [
            ("storageType", pa.string()),
            ("pathOrInlineDv", pa.string()),
            ("offset", pa.int32()),
            ("sizeInBytes", pa.int32()),
            ("cardinality", pa.int64()),
        ]
    )
    remove = schema.field("remove").type
    assert "stats" not in [remove.field(i).name for i in range(remove.num_fields)]
    proto = schema.field("protocol").type
    assert proto.field("minReaderVersion").type == pa.int32()
    assert proto.field("readerFeatures").type == pa.list_(pa.string())

    assert add.field("partitionValues_parsed").type == pa.struct([("col-p", pa.date32())])
    sp = add.field("stats_parsed").type
    bounds = pa.struct(
        [
            ("col-id", pa.int64()),
            ("col-n", pa.struct([("col-x", pa.string())])),
            ("col-ts", pa.timestamp("us", tz="UTC")),
            ("col-ntz", pa.timestamp("us")),
            ("col-d", pa.date32()),
            ("col-dec", pa.decimal128(10, 2)),
            ("col-f", pa.float64()),
        ]
    )
    assert sp == pa.struct(
        [
            ("numRecords", pa.int64()),
            ("minValues", bounds),
            ("maxValues", bounds),
            (
                "nullCount",
                pa.struct(
                    [
                        ("col-id", pa.int64()),
                        ("col-n", pa.struct([("col-x", pa.int64()), ("col-b", pa.int64())])),
                        ("col-ts", pa.int64()),
                        ("col-ntz", pa.int64()),
                        ("col-d", pa.int64()),
                        ("col-dec", pa.int64()),
                        ("col-f", pa.int64()),
                        ("col-arr", pa.int64()),
                    ]
                ),
            ),
            ("tightBounds", pa.bool_()),
        ]
    )

    adds = {a["path"]: a for a in table.column("add").to_pylist() if a is not None}
    a = adds["a.parquet"]
    assert a["dataChange"] is False
    assert (a["baseRowId"], a["defaultRowCommitVersion"], a["clusteringProvider"]) == (
        7,
        0,
        "liquid",
    )
    assert a["deletionVector"]["storageType"] == "i"
    assert a["partitionValues_parsed"] == {"col-p": dt.date(2024, 5, 6)}
    parsed = a["stats_parsed"]
    mins, maxs = parsed["minValues"], parsed["maxValues"]
    assert parsed["numRecords"] == 3 and parsed["tightBounds"] is False
    assert mins["col-ts"] == dt.datetime(2024, 1, 1, 18, 0, 0, 123000, tzinfo=UTC)
    assert maxs["col-ts"] == dt.datetime(2024, 1, 2, tzinfo=UTC)
    assert mins["col-ntz"] == dt.datetime(2024, 1, 1, 10) and maxs["col-ntz"] == dt.datetime(
        2024, 1, 1, 11, 0, 0, 500000
    )
    assert (mins["col-d"], maxs["col-d"]) == (dt.date(2024, 1, 2), dt.date(2024, 12, 31))
    assert (str(mins["col-dec"]), str(maxs["col-dec"])) == ("1.25", "99999999.99")
    assert mins["col-f"] == float("-inf") and maxs["col-f"] != maxs["col-f"]  # NaN
    assert (mins["col-id"], maxs["col-id"]) == (1, None)  # "bogus" does not parse: NULL
    assert (mins["col-n"], maxs["col-n"]) == ({"col-x": "a"}, {"col-x": "zz"})
    assert parsed["nullCount"]["col-n"] == {"col-x": 1, "col-b": 3}
    assert parsed["nullCount"]["col-arr"] == 2
    # statistics of the wrong shape become NULL; missing stats: no stats_parsed
    b = adds["b.parquet"]["stats_parsed"]
    assert b["numRecords"] is None
    assert _leaves(b["minValues"]) == {None} and _leaves(b["maxValues"]) == {None}
    assert adds["c.parquet"]["stats_parsed"] is None and adds["c.parquet"]["stats"] is None
    assert adds["b.parquet"]["partitionValues_parsed"] == {"col-p": None}
    assert adds["c.parquet"]["partitionValues_parsed"] == {"col-p": None}

    protocol = next(p for p in table.column("protocol").to_pylist() if p is not None)
    assert protocol["readerFeatures"] == ["columnMapping", "timestampNtz", "deletionVectors"]
    # lakequery reads its own checkpoint back to the same files
    snap = lq.DeltaTable(str(root)).snapshot()
    assert _uses_checkpoint(snap, 1)
    assert _files(snap) == _files(
        lq.DeltaTable(str(_json_only_copy(root, tmp_path / "j"))).snapshot()
    )


def test_stats_settings_and_v2_policy(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _mapped_table(
        root,
        {
            "delta.checkpoint.writeStatsAsJson": "false",
            "delta.checkpoint.writeStatsAsStruct": "true",
            "delta.checkpointPolicy": "v2",
        },
    )
    info = write_checkpoint(lq.DeltaTable(str(root)).storage)
    table = pq.read_table(info.path)
    assert table.schema.names[-1] == "checkpointMetadata"
    add = table.schema.field("add").type
    names = [add.field(i).name for i in range(add.num_fields)]
    assert "stats" not in names and "stats_parsed" in names
    cm = [c for c in table.column("checkpointMetadata").to_pylist() if c is not None]
    assert cm == [{"version": 1, "tags": None}]
    # readable by lakequery (stats come from stats_parsed)
    snap = lq.DeltaTable(str(root)).snapshot()
    assert snap.num_files == 3
    stats = {r["path"]: r["stats"] for r in snap.files().to_pylist()}
    assert json.loads(stats["a.parquet"])["numRecords"] == 3

    root2 = tmp_path / "u"
    _mapped_table(
        root2,
        {
            "delta.checkpoint.writeStatsAsJson": "true",
            "delta.checkpoint.writeStatsAsStruct": "false",
        },
    )
    info = write_checkpoint(lq.DeltaTable(str(root2)).storage)
    add = pq.read_schema(info.path).field("add").type
    names = [add.field(i).name for i in range(add.num_fields)]
    assert "stats" in names and "stats_parsed" not in names
    assert "partitionValues_parsed" not in names
    assert "checkpointMetadata" not in pq.read_schema(info.path).names


def test_unpartitioned_table_has_no_partition_values_parsed(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(pa.schema([("id", pa.int64())]))
    kit.commit([kit.write_parquet(pa.table({"id": [1, 2]}))])
    info = write_checkpoint(lq.DeltaTable(kit.uri).storage)
    add = pq.read_schema(info.path).field("add").type
    assert add.get_field_index("partitionValues_parsed") < 0
    proto = next(p for p in pq.read_table(info.path).column("protocol").to_pylist() if p)
    assert proto == {
        "minReaderVersion": 1,
        "minWriterVersion": 2,
        "readerFeatures": None,
        "writerFeatures": None,
    }


def test_large_state_has_several_row_groups(tmp_path: Path) -> None:
    root = tmp_path / "t"
    kit = TableKit(root)
    kit.create(pa.schema([("id", pa.int64()), ("p", pa.int32())]), partition_by=["p"])
    n = 250_000
    lines = [
        json.dumps(
            {
                "add": {
                    "path": f"p={i % 7}/f-{i:07d}.parquet",
                    "partitionValues": {"p": str(i % 7)},
                    "size": i,
                    "modificationTime": i,
                    "dataChange": True,
                    "stats": f'{{"numRecords":1,"minValues":{{"id":{i}}},"maxValues":{{"id":{i}}},"nullCount":{{"id":0}}}}',
                }
            }
        )
        for i in range(n)
    ]
    kit.write_commit_text(1, "\n".join(lines) + "\n")
    info = write_checkpoint(lq.DeltaTable(str(root)).storage)
    assert info.num_add_files == n and info.num_actions == n + 2
    meta = pq.ParquetFile(info.path).metadata
    assert meta.num_rows == n + 2
    assert meta.num_row_groups >= 3
    assert max(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) <= ROW_GROUP_ROWS
    snap = lq.DeltaTable(str(root)).snapshot()
    assert _uses_checkpoint(snap, 1) and snap.num_files == n
    # partition and stats pruning through the checkpoint
    plan = snap.scan(filter="p = 3 AND id < 1000").plan()
    assert plan.num_files == len([i for i in range(1000) if i % 7 == 3])


# --------------------------------------------------------------------------------------------
# 4. pruning through the checkpoint == pruning from JSON
# --------------------------------------------------------------------------------------------

FILTERS = [
    "id > 50",
    "id < 3",
    "s = 's010'",
    "s >= 't050'",
    "ts >= TIMESTAMP '2024-01-01 18:00:00+00:00'",
    "ts < TIMESTAMP '2024-01-01 00:00:00+00:00'",
    "d > DATE '2024-02-03'",
    "p = 'v 1'",
    "p IS NULL",
    "p = 'v 2' AND id >= 40",
    "p IS NULL OR ts > TIMESTAMP '2024-02-01 00:00:00+00:00'",
]


@pytest.mark.parametrize("stats_as_json", ["true", "false"])
def test_pruning_through_checkpoint(tmp_path: Path, stats_as_json: str) -> None:
    root = tmp_path / "t"
    b = _Builder(root, partitioned=True)
    # a metadata change sets the checkpoint stats property
    b.kit.commit(
        [
            metadata_action(
                SCHEMA,
                ["p"],
                {"delta.checkpoint.writeStatsAsJson": stats_as_json},
                table_id=b.table_id,
            )
        ]
    )
    for i, ts in enumerate(TS_TEXTS * 4):
        b.apply(("add", 2, i * 5, ts))
    b.apply(("remove", 3))
    b.apply(("dv", 4, True))
    write_checkpoint(lq.DeltaTable(str(root)).storage)
    b.apply(("add", 1, 77, TS_TEXTS[0]))  # a tail commit

    oracle = lq.DeltaTable(str(_json_only_copy(root, tmp_path / "j"))).snapshot()
    snap = lq.DeltaTable(str(root)).snapshot()
    assert snap._state.segment.checkpoint is not None
    cp_add = pq.read_schema(snap._state.segment.checkpoint.files[0].path).field("add").type
    assert (cp_add.get_field_index("stats") >= 0) == (stats_as_json == "true")
    pruned_any = False
    for f in FILTERS:
        want = sorted(oracle.scan(filter=f).plan().files.column("path").to_pylist())
        got = sorted(snap.scan(filter=f).plan().files.column("path").to_pylist())
        assert got == want, f
        pruned_any |= len(want) < oracle.num_files
    assert pruned_any


# --------------------------------------------------------------------------------------------
# 5. conformance tables: a checkpoint at the latest version changes nothing
# --------------------------------------------------------------------------------------------


def _manifest_tables() -> list[dict[str, Any]]:
    manifest = conformance_dir() / "manifest.json"
    if not manifest.is_file():
        pytest.fail(f"conformance data missing: {manifest}")
    return list(json.loads(manifest.read_text())["tables"])


def _expected_errors() -> dict[tuple[str, int], Any]:
    from conformance._cases import EXPECTED_ERRORS

    return EXPECTED_ERRORS


@pytest.mark.parametrize("table", _manifest_tables(), ids=lambda t: str(t["name"]))
def test_conformance_checkpoint_roundtrip(tmp_path: Path, table: dict[str, Any]) -> None:
    src = conformance_dir() / table["path"]
    root = tmp_path / "t"
    shutil.copytree(src, root)
    latest = int(table["latest_version"])
    spec = _expected_errors().get((str(table["name"]), latest))
    dt_ = lq.DeltaTable(str(root))
    try:
        before = dt_.snapshot()
    except lq.LakeQueryError as exc:
        assert spec is not None and spec.stage == "snapshot", exc
        with pytest.raises(lq.LakeQueryError):
            dt_.checkpoint()
        return
    read_fails = spec is not None
    rows_before = None if read_fails else before.scan().to_arrow()

    info = dt_.checkpoint()
    assert info.version == latest
    after = lq.DeltaTable(str(root)).snapshot()
    assert _uses_checkpoint(after, latest)
    assert _state(after) == _state(before)
    if rows_before is not None:
        assert _rows(after.scan().to_arrow()) == _rows(rows_before)
    # and once more, now replaying from lakequery's own checkpoint
    again = dt_.checkpoint()
    assert again.num_actions == info.num_actions
    assert _state(lq.DeltaTable(str(root)).snapshot()) == _state(before)


# --------------------------------------------------------------------------------------------
# 6. _last_checkpoint, atomicity, refusal
# --------------------------------------------------------------------------------------------


def test_last_checkpoint_and_no_temp_files(tmp_path: Path) -> None:
    kit, v = _data_table(tmp_path / "t")
    info = write_checkpoint(lq.DeltaTable(kit.uri).storage)
    raw = (kit.log / "_last_checkpoint").read_bytes()
    doc = json.loads(raw)
    assert list(doc) == ["version", "size", "sizeInBytes", "numOfAddFiles", "checksum"]
    hint = parse_last_checkpoint(raw)
    assert hint is not None and hint.version == v and hint.size == info.num_actions
    assert doc["sizeInBytes"] == _checkpoint_file(kit.root, v).stat().st_size == info.size_in_bytes
    assert doc["numOfAddFiles"] == info.num_add_files == 4
    names = sorted(p.name for p in kit.log.iterdir())
    assert not [n for n in names if n.startswith(".") or "tmp" in n]
    assert f"{v:020d}.checkpoint.parquet" in names


def test_existing_checkpoint_of_the_version_is_kept(tmp_path: Path) -> None:
    # A second checkpoint of the same version keeps the file (another process may be
    # reading it; DuckDB opens a file more than once per read) and reports that file.
    kit, v = _data_table(tmp_path / "t")
    first = write_checkpoint(lq.DeltaTable(kit.uri).storage)
    path = _checkpoint_file(kit.root, v)
    inode, mtime = path.stat().st_ino, path.stat().st_mtime_ns
    (kit.log / "_last_checkpoint").unlink()
    second = write_checkpoint(lq.DeltaTable(kit.uri).storage)
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (inode, mtime)
    assert second == first
    hint = parse_last_checkpoint((kit.log / "_last_checkpoint").read_bytes())
    assert hint is not None and (hint.version, hint.size) == (v, first.num_actions)
    assert pq.ParquetFile(path).metadata.num_rows == second.num_actions
    # a checkpoint that does not load is replaced by a good one
    path.write_bytes(b"PAR1 not a checkpoint")
    third = write_checkpoint(lq.DeltaTable(kit.uri).storage)
    assert third.num_actions == first.num_actions
    assert pq.ParquetFile(path).metadata.num_rows == first.num_actions


@pytest.mark.parametrize("theirs", ["good", "corrupt"])
def test_checkpoint_created_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, theirs: str
) -> None:
    # Another process finishes the same version's checkpoint while this one writes: a
    # good one is kept (never replaced under its readers), a corrupt one is replaced.
    import lakequery.checkpoint_writer as cw

    kit, v = _data_table(tmp_path / "t")
    first = write_checkpoint(lq.DeltaTable(kit.uri).storage)
    path = _checkpoint_file(kit.root, v)
    good = path.read_bytes()
    path.unlink()
    (kit.log / "_last_checkpoint").unlink()
    real = cw._write_tables
    theirs_inode: list[int] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        path.write_bytes(good if theirs == "good" else b"PAR1 torn")
        theirs_inode.append(path.stat().st_ino)
        return real(*args, **kwargs)

    monkeypatch.setattr(cw, "_write_tables", racing)
    info = write_checkpoint(lq.DeltaTable(kit.uri).storage)
    assert info.num_actions == first.num_actions == pq.ParquetFile(path).metadata.num_rows
    assert info.size_in_bytes == path.stat().st_size
    kept = path.stat().st_ino == theirs_inode[0]
    assert kept == (theirs == "good")
    names = sorted(p.name for p in kit.log.iterdir())
    assert not [n for n in names if n.startswith(".")], names


def test_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lakequery.checkpoint_writer as cw

    kit, _ = _data_table(tmp_path / "t")

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    # fail while the Parquet bytes are being produced (after the temp file exists)
    monkeypatch.setattr(cw, "_remove_batches", broken)
    with pytest.raises(OSError, match="disk full"):
        write_checkpoint(lq.DeltaTable(kit.uri).storage)
    names = sorted(p.name for p in kit.log.iterdir())
    assert not [n for n in names if "checkpoint" in n or n.startswith(".")], names


def test_refuses_version_without_commit_file(tmp_path: Path) -> None:
    kit, v = _data_table(tmp_path / "t")
    write_checkpoint(lq.DeltaTable(kit.uri).storage, v - 1)
    for old in range(v):
        kit.commit_path(old).unlink()
    before = sorted(p.name for p in kit.log.iterdir())
    with pytest.raises(VersionNotFoundError):
        write_checkpoint(lq.DeltaTable(kit.uri).storage, v - 1)
    with pytest.raises(VersionNotFoundError):
        write_checkpoint(lq.DeltaTable(kit.uri).storage, v + 5)
    assert sorted(p.name for p in kit.log.iterdir()) == before


def test_memory_storage(tmp_path: Path) -> None:
    kit, v = _data_table(tmp_path / "t")
    dt_local = lq.DeltaTable(kit.uri)
    mem = lq.DeltaTable(f"memory://ckpt-{uuid.uuid4().hex}")
    for p in kit.root.rglob("*"):
        if p.is_file():
            mem.storage.put(mem.storage.join(str(p.relative_to(kit.root))), p.read_bytes())
    info = mem.checkpoint()
    assert info.version == v and mem.storage.exists(info.path)
    snap = mem.snapshot()
    assert _uses_checkpoint(snap, v)
    assert _files(snap) == _files(dt_local.snapshot())


@pytest.mark.parametrize("stats_as_json", ["true", "false"])
def test_wide_decimal_bounds_are_exact_or_left_out(tmp_path: Path, stats_as_json: str) -> None:
    """A decimal of more than 15 digits: DuckDB 1.x parses its JSON statistics through a
    double, which would round the bound (12345678901234567890.123456789012345678 read as
    ...567525.49...). The checkpoint's typed bound is then left out rather than written
    rounded, and a filter on the exact value finds its row through the checkpoint (from
    the JSON statistics or without them)."""
    from decimal import Decimal

    from lakequery.protocol.sql_spelling import json_decimals_exact

    big = Decimal("12345678901234567890.123456789012345678")
    uri = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "dec": pa.array([big, big - 1])})
    data = data.cast(pa.schema([("id", pa.int64()), ("dec", pa.decimal128(38, 18))]))
    lq.write(uri, data, configuration={"delta.checkpoint.writeStatsAsJson": stats_as_json})
    info = lq.DeltaTable(uri).checkpoint()
    adds = pq.read_table(info.path, columns=["add"]).column("add").drop_null().to_pylist()
    (add,) = adds
    bounds = {k: (add["stats_parsed"] or {}).get(k) or {} for k in ("minValues", "maxValues")}
    if json_decimals_exact():
        assert bounds["minValues"]["dec"] == big - 1 and bounds["maxValues"]["dec"] == big
    else:
        assert "dec" not in bounds["minValues"] and "dec" not in bounds["maxValues"]
    fresh = lq.DeltaTable(uri).snapshot(version=info.version)
    assert fresh._state.segment.checkpoint is not None
    got = fresh.scan(filter=f"dec = {big}").to_duckdb().project("id").fetchall()
    assert got == [(1,)]


def _stats_parsed_type(uri: str, version: int) -> pa.StructType:
    path = Path(uri) / "_delta_log" / f"{version:020d}.checkpoint.parquet"
    add = pq.read_schema(path).field("add").type
    return add.field(add.get_field_index("stats_parsed")).type


def test_stats_parsed_holds_the_columns_that_get_statistics(tmp_path: Path) -> None:
    # it mirrored every column: a 400-column table's checkpoint took seconds per column
    # batch, and every tenth write paid for it (Delta Spark's stats schema follows
    # delta.dataSkippingNumIndexedCols / dataSkippingStatsColumns)
    uri = str(tmp_path / "t")
    wide = pa.table({f"c{i}": [i] for i in range(400)})
    lq.write(uri, wide, configuration={"delta.dataSkippingNumIndexedCols": "5"})
    write_checkpoint(lq.DeltaTable(uri).storage, 0)
    parsed = _stats_parsed_type(uri, 0)
    low = parsed.field(parsed.get_field_index("minValues")).type
    assert [low.field(i).name for i in range(low.num_fields)] == ["c0", "c1", "c2", "c3", "c4"]
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.scan(filter="c3 = 99").plan().num_files == 0  # still skips by them


def test_columns_nested_past_arrows_depth_keep_json_statistics(tmp_path: Path) -> None:
    # a struct 60 deep made the checkpoint fail ('Recursion level in ArrowSchema struct
    # exceeded'), so the log was never checkpointed
    uri = str(tmp_path / "t")
    value: Any = 1
    typ: pa.DataType = pa.int64()
    for depth in range(60):
        value, typ = {f"f{depth}": value}, pa.struct([(f"f{depth}", typ)])
    lq.write(uri, pa.table({"id": [1], "deep": pa.array([value], typ)}))
    write_checkpoint(lq.DeltaTable(uri).storage, 0)
    parsed = _stats_parsed_type(uri, 0)
    low = parsed.field(parsed.get_field_index("minValues")).type
    assert [low.field(i).name for i in range(low.num_fields)] == ["id"]
    assert lq.DeltaTable(uri).snapshot().scan(columns=["id"]).to_arrow().to_pylist() == [{"id": 1}]
