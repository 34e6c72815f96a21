"""The Databricks-written row-tracking table of the conformance set
(``deltars_table_with_liquid_clustering``: ten one-row files, ``baseRowId`` 0..9, Spark's
``_row-id-col-<uuid>`` / ``_row-commit-version-col-<uuid>`` names in its configuration),
read by lakequery and rewritten by lakequery's UPDATE, MERGE and OPTIMIZE, then read back
by ``deltalake``. Copies in ``tmp_path`` only; the shared tables are never modified."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rtkit import check_invariants, config_names
from tablekit import copy_conformance_table

import lakequery as lq

NAME = "deltars_table_with_liquid_clustering"
SPARK_ROW_ID = "_row-id-col-4cbc7924-f662-4db1-aa59-22c23f59eb5d"
SPARK_ROW_VERSION = "_row-commit-version-col-2f60dcc1-9e36-4424-95e7-799b707e4ddb"


def _copy(tmp_path: Path) -> Path:
    return copy_conformance_table(NAME, tmp_path)


def _unclustered_copy(tmp_path: Path) -> Path:
    """The copy with its clustering taken out of the log (the ``liquid`` writer feature,
    the clustering property and the ``delta.liquid`` domain), so that the row tracking
    commands run whether or not lakequery writes clustered tables; its row tracking
    (protocol, materialized column names, baseRowIds, high-water mark) is Spark's own."""
    root = _copy(tmp_path)
    log = root / "_delta_log" / "00000000000000000000.json"
    out = []
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "protocol" in action:
            features = action["protocol"]["writerFeatures"]
            action["protocol"]["writerFeatures"] = [f for f in features if f != "liquid"]
        if "metaData" in action:
            action["metaData"]["configuration"].pop("delta.liquid.clusteringColumns")
        if action.get("domainMetadata", {}).get("domain") == "delta.liquid":
            continue
        out.append(json.dumps(action))
    log.write_text("\n".join(out) + "\n")
    (root / "_delta_log" / "00000000000000000000.crc").unlink()
    return root


def _ids(root: Path) -> dict[int, tuple[int, int]]:
    t = lq.DeltaTable(str(root)).snapshot().scan(row_tracking=True).to_arrow().to_pydict()
    return {
        k: (i, v) for k, i, v in zip(t["id"], t["_row_id"], t["_row_commit_version"], strict=True)
    }


def _deltalake_ids(root: Path) -> list[int]:
    import deltalake

    dt = deltalake.DeltaTable(str(root))
    t = pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t"))
    assert t.column_names == ["id"]  # Spark's materialized columns stay hidden
    return sorted(t.column("id").to_pylist())


def test_reads_spark_row_ids(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    assert config_names(root) == (SPARK_ROW_ID, SPARK_ROW_VERSION)
    # each file holds one row: its id is its baseRowId, written by Databricks as id = row
    assert _ids(root) == {k: (k, 0) for k in range(10)}


def test_spark_table_as_is(tmp_path: Path) -> None:
    """UPDATE on the untouched copy (clustered and row-tracked, as Databricks wrote it)."""
    root = _copy(tmp_path)
    lq.DeltaTable(str(root)).update("id = 3", set={"id": "30"})
    ids = _ids(root)
    assert ids[30] == (3, 1) and all(ids[k] == (k, 0) for k in range(10) if k != 3)
    assert _deltalake_ids(root) == sorted([k for k in range(10) if k != 3] + [30])


def test_update_merge_optimize_keep_spark_row_ids(tmp_path: Path) -> None:
    root = _unclustered_copy(tmp_path)
    dt = lq.DeltaTable(str(root))
    assert _ids(root) == {k: (k, 0) for k in range(10)}

    dt.update("id IN (3, 4)", set={"id": "id * 10"})  # version 1 (DVs: the table enables them)
    source = pa.table({"id": pa.array([5, 77], pa.int64())})
    (
        dt.merge(source, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(set={"id": "t.id + 100"})
        .when_not_matched_insert_all()
        .execute()
    )  # version 2
    dt.delete("id = 6", copy_on_write=True)  # version 3
    expected = {k: (k, 0) for k in range(10) if k not in (3, 4, 5, 6)}
    expected |= {30: (3, 1), 40: (4, 1), 105: (5, 2)}
    ids = _ids(root)
    new_id, new_version = ids.pop(77)
    assert new_id > 9 and new_version == 2
    assert ids == expected
    assert _deltalake_ids(root) == sorted([*expected, 77])

    before = _ids(root)
    assert dt.optimize().committed  # version 4: one file, DVs purged
    assert _ids(root) == before
    assert _deltalake_ids(root) == sorted(before)
    check_invariants(root)
    # the rewritten file stores the ids under Spark's names from the configuration
    (path,) = dt.snapshot().files().column("path").to_pylist()
    stored = pq.read_table(root / path)
    assert SPARK_ROW_ID in stored.column_names and SPARK_ROW_VERSION in stored.column_names
    got = dict(zip(stored["id"].to_pylist(), stored[SPARK_ROW_ID].to_pylist(), strict=True))
    assert got == {k: i for k, (i, _) in before.items()}
