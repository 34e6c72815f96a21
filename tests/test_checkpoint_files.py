"""Checkpoint files of different shapes in one checkpoint: the parts of a multi-part
checkpoint and the sidecars of a V2 checkpoint are each read by their own footer (digest
7.3: a column a file lacks is null in that file only), and sidecar paths are read as the
digest (4.10) spells them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakequery as lq
from lakequery.errors import CorruptLogError

ADD_FIELDS = [
    ("path", pa.string()),
    ("partitionValues", pa.map_(pa.string(), pa.string())),
    ("size", pa.int64()),
    ("modificationTime", pa.int64()),
    ("dataChange", pa.bool_()),
]
DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
PROTOCOL = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])
METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("format", pa.struct([("provider", pa.string())])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", pa.map_(pa.string(), pa.string())),
    ]
)
SCHEMA = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)
METADATA_ROW = {
    "id": "t",
    "format": {"provider": "parquet"},
    "schemaString": SCHEMA,
    "partitionColumns": [],
    "configuration": [],
}
V2_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["v2Checkpoint"],
    "writerFeatures": ["v2Checkpoint"],
}


def _table(tmp_path: Path, files: int = 2) -> tuple[Path, list[dict[str, Any]], list[int]]:
    """A table directory with ``files`` data files and an empty commit 1 (commit 0 gone):
    the checkpoint of version 1 the test writes is the only state."""
    root = tmp_path / "t"
    (root / "_delta_log" / "_sidecars").mkdir(parents=True)
    adds, ids = [], []
    for i in range(files):
        name = f"part-{i}.parquet"
        rows = [10 * i + j for j in range(3)]
        pq.write_table(pa.table({"id": pa.array(rows, pa.int64())}), root / name)
        ids += rows
        size = (root / name).stat().st_size
        adds.append(
            {
                "path": name,
                "partitionValues": [],
                "size": size,
                "modificationTime": 0,
                "dataChange": False,
            }
        )
    (root / "_delta_log" / f"{1:020d}.json").write_text('{"commitInfo":{"timestamp":1}}\n')
    return root, adds, ids


def _ids(uri: str) -> dict[str, list[int]]:
    scan = lq.DeltaTable(uri).snapshot().scan()
    return {
        "arrow": sorted(scan.to_arrow().column("id").to_pylist()),
        "duckdb": sorted(r[0] for r in scan.to_duckdb().fetchall()),
        "polars": sorted(scan.to_polars().collect()["id"].to_list()),
    }


def _part(root: Path, i: int, n: int, columns: dict[str, pa.Array]) -> None:
    path = root / "_delta_log" / f"{1:020d}.checkpoint.{i:010d}.{n:010d}.parquet"
    pq.write_table(pa.table(columns), path)


def test_a_part_without_an_add_column_hides_no_other_part(tmp_path: Path) -> None:
    root, adds, ids = _table(tmp_path)
    _part(
        root,
        1,
        3,
        {
            "protocol": pa.array([{"minReaderVersion": 1, "minWriterVersion": 2}, None], PROTOCOL),
            "metaData": pa.array([None, METADATA_ROW], METADATA),
        },
    )
    for i, add in enumerate(adds, start=2):
        _part(root, i, 3, {"add": pa.array([add], pa.struct(ADD_FIELDS))})
    assert lq.DeltaTable(str(root)).snapshot().files().num_rows == 2
    assert _ids(str(root)) == dict.fromkeys(("arrow", "duckdb", "polars"), ids)


def test_parts_whose_add_structs_differ(tmp_path: Path) -> None:
    """One part's ``add`` has a ``deletionVector`` field (all null), the other's has not."""
    root, adds, ids = _table(tmp_path)
    _part(
        root,
        1,
        2,
        {
            "protocol": pa.array(
                [{"minReaderVersion": 1, "minWriterVersion": 2}, None, None], PROTOCOL
            ),
            "metaData": pa.array([None, METADATA_ROW, None], METADATA),
            "add": pa.array([None, None, adds[0]], pa.struct(ADD_FIELDS)),
        },
    )
    with_dv = pa.struct([*ADD_FIELDS, ("deletionVector", DV)])
    _part(root, 2, 2, {"add": pa.array([{**adds[1], "deletionVector": None}], with_dv)})
    assert _ids(str(root)) == dict.fromkeys(("arrow", "duckdb", "polars"), ids)


def _v2_checkpoint(root: Path, sidecars: list[tuple[str, str]]) -> None:
    """A JSON V2 checkpoint of version 1 naming ``sidecars`` ((path as logged, file name))."""
    lines: list[dict[str, Any]] = [
        {"checkpointMetadata": {"version": 1}},
        {"protocol": V2_PROTOCOL},
        {"metaData": {**METADATA_ROW, "configuration": {}}},
    ]
    for logged, name in sidecars:
        size = (root / "_delta_log" / "_sidecars" / name).stat().st_size
        lines.append({"sidecar": {"path": logged, "sizeInBytes": size, "modificationTime": 1}})
    path = root / "_delta_log" / f"{1:020d}.checkpoint.{uuid.uuid4()}.json"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_sidecars_of_different_columns(tmp_path: Path) -> None:
    """The first sidecar holds only removes: the second's adds still count."""
    root, adds, ids = _table(tmp_path)
    sidecars = root / "_delta_log" / "_sidecars"
    remove = pa.struct(
        [("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_())]
    )
    gone = {"path": "old.parquet", "deletionTimestamp": 1, "dataChange": False}
    pq.write_table(pa.table({"remove": pa.array([gone], remove)}), sidecars / "a.parquet")
    pq.write_table(pa.table({"add": pa.array(adds, pa.struct(ADD_FIELDS))}), sidecars / "b.parquet")
    _v2_checkpoint(root, [("a.parquet", "a.parquet"), ("b.parquet", "b.parquet")])
    assert _ids(str(root)) == dict.fromkeys(("arrow", "duckdb", "polars"), ids)


def test_a_sidecar_listed_twice_counts_once(tmp_path: Path) -> None:
    root, adds, ids = _table(tmp_path)
    table = pa.table({"add": pa.array(adds, pa.struct(ADD_FIELDS))})
    pq.write_table(table, root / "_delta_log" / "_sidecars" / "s.parquet")
    _v2_checkpoint(root, [("s.parquet", "s.parquet"), ("s.parquet", "s.parquet")])
    assert _ids(str(root)) == dict.fromkeys(("arrow", "duckdb", "polars"), ids)


@pytest.mark.parametrize("form", ["name", "encoded", "absolute", "file-uri", "colon"])
def test_sidecar_paths_as_the_digest_spells_them(tmp_path: Path, form: str) -> None:
    """A URI-encoded name in ``_delta_log/_sidecars``, or an absolute location there."""
    root, adds, ids = _table(tmp_path)
    name = f"{uuid.uuid4()} x{':y' if form == 'colon' else ''}.parquet"
    directory = root / "_delta_log" / "_sidecars"
    pq.write_table(pa.table({"add": pa.array(adds, pa.struct(ADD_FIELDS))}), directory / name)
    logged = {
        "name": name,
        "encoded": name.replace(" ", "%20"),
        "absolute": f"{directory}/{name}".replace(" ", "%20"),
        "file-uri": f"file://{directory}/{name}".replace(" ", "%20"),
        "colon": name.replace(" ", "%20").replace(":", "%3A"),  # a name, not a location
    }[form]
    _v2_checkpoint(root, [(logged, name)])
    assert _ids(str(root)) == dict.fromkeys(("arrow", "duckdb", "polars"), ids)


@pytest.mark.parametrize("where", ["parent", "other-table", "dots"])
def test_a_sidecar_outside_the_sidecar_directory_is_refused(tmp_path: Path, where: str) -> None:
    root, adds, _ = _table(tmp_path)
    directory = root / "_delta_log" / "_sidecars"
    outside = tmp_path / "other" / "_delta_log" / "_sidecars"
    outside.mkdir(parents=True)
    table = pa.table({"add": pa.array(adds, pa.struct(ADD_FIELDS))})
    pq.write_table(table, directory / "s.parquet")
    pq.write_table(table, outside / "s.parquet")
    pq.write_table(table, root / "_delta_log" / "s.parquet")
    logged = {
        "parent": "../s.parquet",
        "other-table": f"{outside}/s.parquet",
        "dots": "..",
    }[where]
    _v2_checkpoint(root, [(logged, "s.parquet")])
    # the checkpoint is refused; without older commits nothing else holds the state
    with pytest.raises(CorruptLogError, match="sidecar"):
        lq.DeltaTable(str(root)).snapshot()
