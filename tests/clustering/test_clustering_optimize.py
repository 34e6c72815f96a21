"""OPTIMIZE on clustered tables: Hilbert clustering by the clustering columns, files marked
as Delta Spark marks them, incremental (clustered files left alone unless ``full=True``),
``z_order_by`` refused, the marks surviving checkpoints, and the result read exactly by
``deltalake`` and every lakequery engine."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from clusterkit import adds_of, commit_actions, dl_ids, engine_ids, ranges, table_of

import lakequery as lq
from lakequery.errors import ClusteringError

#: Small files so that a few thousand rows make several clustered files.
TARGET = 16 * 1024


def appended(tmp_path: Path, batches: int = 4, rows: int = 2000) -> str:
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(rows), cluster_by=["id"])
    for b in range(1, batches):
        lq.write(uri, table_of(rows, start=b * rows), mode="append")
    return uri


def live_paths(uri: str) -> set[str]:
    return set(lq.DeltaTable(uri).snapshot().files().column("path").to_pylist())


def test_optimize_clusters_by_the_clustering_columns_with_hilbert(tmp_path: Path) -> None:
    uri = appended(tmp_path)
    m = lq.DeltaTable(uri).optimize(target_file_size=TARGET)
    assert m.files_removed == 4 and m.files_added > 1
    assert (m.z_order_by, m.curve) == (("id",), "hilbert")
    actions = commit_actions(uri, m.version)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    params = info["operationParameters"]
    assert json.loads(params["clusterBy"]) == ["id"]
    assert params["curve"] == "hilbert" and json.loads(params["isFull"]) is False
    adds = adds_of(uri, m.version)
    zcube = {a["tags"]["ZCUBE_ID"] for a in adds}
    assert len(zcube) == 1
    for a in adds:
        assert a["clusteringProvider"] == "liquid"
        assert a["dataChange"] is False
        assert a["tags"]["ZCUBE_ZORDER_BY"] == '["id"]'
        assert a["tags"]["ZCUBE_ZORDER_CURVE"] == "hilbert"
    # clustered on one column: the files hold disjoint id ranges
    spans = ranges(uri, m.version, "id")
    assert all(hi < lo for (_, hi), (lo, _) in itertools.pairwise(spans))
    assert dl_ids(uri) == list(range(8000))
    assert all(ids == list(range(8000)) for ids in engine_ids(uri).values())


def test_optimize_is_incremental_and_full_reclusters_everything(tmp_path: Path) -> None:
    uri = appended(tmp_path)
    dt = lq.DeltaTable(uri)
    first = dt.optimize(target_file_size=TARGET)
    clustered = live_paths(uri)
    again = dt.optimize(target_file_size=TARGET)
    assert not again.committed and again.files_removed == 0
    # a new append: only the new file is clustered, the clustered files stay
    lq.write(uri, table_of(500, start=8000), mode="append")
    new_file = live_paths(uri) - clustered
    inc = dt.optimize(target_file_size=TARGET)
    assert inc.committed and inc.files_removed == 1
    removed = {a["remove"]["path"] for a in commit_actions(uri, inc.version) if "remove" in a}
    assert removed == new_file
    assert clustered <= live_paths(uri)
    new_cube = {a["tags"]["ZCUBE_ID"] for a in adds_of(uri, inc.version)}
    old_cube = {a["tags"]["ZCUBE_ID"] for a in adds_of(uri, first.version)}
    assert len(new_cube) == 1 and new_cube != old_cube
    # full: every live file is rewritten into one cube
    before = live_paths(uri)
    full = dt.optimize(target_file_size=TARGET, full=True)
    assert full.files_removed == len(before)
    assert not before & live_paths(uri)
    assert len({a["tags"]["ZCUBE_ID"] for a in adds_of(uri, full.version)}) == 1
    assert (
        json.loads(
            next(a for a in commit_actions(uri, full.version) if "commitInfo" in a)["commitInfo"][
                "operationParameters"
            ]["isFull"]
        )
        is True
    )
    assert dl_ids(uri) == list(range(8500))


def test_a_single_unclustered_file_is_clustered_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(300), cluster_by=["id"])
    m = lq.DeltaTable(uri).optimize()
    assert m.files_removed == 1 and m.files_added == 1
    assert adds_of(uri, m.version)[0]["clusteringProvider"] == "liquid"
    # sorted by the key inside the file
    path = adds_of(uri, m.version)[0]["path"]
    assert pq.read_table(Path(uri) / path).column("id").to_pylist() == list(range(300))
    assert not lq.DeltaTable(uri).optimize().committed


def test_deletes_make_clustered_files_candidates_again(tmp_path: Path) -> None:
    uri = appended(tmp_path, batches=2)
    dt = lq.DeltaTable(uri)
    dt.optimize(target_file_size=TARGET)
    # a deletion vector that hides few rows keeps its file clustered
    dt.delete("id = 3")
    assert not dt.optimize(target_file_size=TARGET).committed
    # one hiding most rows of a file makes it a candidate (its rows are purged)
    dt.delete("id < 1000")
    m = dt.optimize(target_file_size=TARGET)
    assert m.committed and m.rows_purged > 0
    assert dl_ids(uri) == list(range(1000, 4000))


def test_z_order_by_is_refused_on_a_clustered_table(tmp_path: Path) -> None:
    uri = appended(tmp_path, batches=2, rows=10)
    with pytest.raises(ClusteringError, match="z_order_by cannot be used on a clustered table"):
        lq.DeltaTable(uri).optimize(z_order_by=["k"])
    plain = str(tmp_path / "plain")
    lq.write(plain, table_of(3))
    with pytest.raises(ClusteringError, match="not clustered"):
        lq.DeltaTable(plain).optimize(full=True)


def test_marks_survive_checkpoints_and_deletion_vectors(tmp_path: Path) -> None:
    uri = appended(tmp_path, batches=2, rows=500)
    dt = lq.DeltaTable(uri)
    dt.optimize(target_file_size=TARGET)
    d = dt.delete("id = 7")  # re-adds one file with a DV: provider and tags come along
    readded = adds_of(uri, d.version)
    assert len(readded) == 1 and readded[0]["deletionVector"]
    assert readded[0]["clusteringProvider"] == "liquid"
    assert readded[0]["tags"]["ZCUBE_ZORDER_BY"] == '["id"]'
    info = dt.checkpoint()
    cp = pq.read_table(Path(uri) / "_delta_log" / f"{info.version:020d}.checkpoint.parquet")
    adds = [a for a in cp.column("add").to_pylist() if a]
    assert adds and all(a["clusteringProvider"] == "liquid" for a in adds)
    assert all(dict(a["tags"])["ZCUBE_ZORDER_BY"] == '["id"]' for a in adds)
    files = lq.DeltaTable(uri).snapshot().files()
    assert set(files.column("clustering_provider").to_pylist()) == {"liquid"}
    # a fresh reader starting from the checkpoint still sees every file as clustered
    assert not lq.DeltaTable(uri).optimize(target_file_size=TARGET).committed
    assert dl_ids(uri) == [i for i in range(1000) if i != 7]


def test_two_clustering_columns(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    rng = np.random.default_rng(7)
    data = pa.table(
        {
            "x": pa.array(rng.integers(0, 64, 4096), pa.int64()),
            "y": pa.array(rng.integers(0, 64, 4096).astype(float)),
            "payload": pa.array([f"row-{v:016x}" for v in rng.integers(0, 1 << 62, 4096)]),
        }
    )
    lq.write(uri, data.slice(0, 2048), cluster_by=["x", "y"])
    lq.write(uri, data.slice(2048), mode="append")
    m = lq.DeltaTable(uri).optimize(target_file_size=8 * 1024)
    assert m.files_added > 1 and m.z_order_by == ("x", "y")
    assert {a["tags"]["ZCUBE_ZORDER_BY"] for a in adds_of(uri, m.version)} == {'["x","y"]'}
    # each file covers a box much smaller than the whole 64 x 64 square
    for a in adds_of(uri, m.version):
        s = json.loads(a["stats"])
        area = (s["maxValues"]["x"] - s["minValues"]["x"] + 1) * (
            s["maxValues"]["y"] - s["minValues"]["y"] + 1
        )
        assert area < 64 * 64 / 2
    got = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    assert sorted(zip(got["x"].to_pylist(), got["y"].to_pylist(), strict=True)) == sorted(
        zip(data["x"].to_pylist(), data["y"].to_pylist(), strict=True)
    )


def test_files_of_another_clustering_provider_are_left_alone(tmp_path: Path) -> None:
    # digest §14: only files of the same (or no) provider are reclustered by default
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [3, 1, 2], "v": ["c", "a", "b"]}), cluster_by=["id"])
    first = Path(uri) / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in first.read_text().splitlines()]
    for action in actions:
        if "add" in action:
            action["add"]["clusteringProvider"] = "acme"
            theirs = action["add"]["path"]
    first.write_text("".join(json.dumps(a) + "\n" for a in actions))
    lq.write(uri, pa.table({"id": [9], "v": ["z"]}), mode="append")
    metrics = lq.DeltaTable(uri).optimize()
    assert metrics.files_removed == 1
    assert theirs in live_paths(uri)
    full = lq.DeltaTable(uri).optimize(full=True)  # FULL reclusters every file
    assert full.files_removed == 2 and theirs not in live_paths(uri)
