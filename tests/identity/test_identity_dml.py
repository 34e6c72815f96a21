"""DML on identity tables: MERGE inserts generate ids, UPDATE of identity columns and
explicit MERGE values for ALWAYS columns are refused (as Spark does), DELETE is plain."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import lakequery as lq
from lakequery.writer.identity import Identity

NO_DV = {"delta.enableDeletionVectors": "false"}


def rows(uri: str) -> list[dict[str, object]]:
    table = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    return sorted(table.to_pylist(), key=lambda r: r["k"])


def mark(uri: str) -> int | None:
    schema = json.loads(lq.DeltaTable(uri).snapshot().metadata.schema_string)
    value = schema["fields"][0]["metadata"].get("delta.identity.highWaterMark")
    return None if value is None else int(value)


def make(tmp_path: Path, *, always: bool = True, step: int = 1) -> str:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"k": [1, 2], "v": ["a", "b"]}),
        identity={"id": Identity(start=1, step=step, always=always)},
        configuration=NO_DV,
    )
    return uri


def test_merge_inserts_generate_ids(tmp_path: Path) -> None:
    uri = make(tmp_path, step=5)
    dt = lq.DeltaTable(uri)
    source = pa.table({"k": [2, 3, 4], "v": ["B", "c", "d"]})
    m = (
        dt.merge(source, on="target.k = source.k")
        .when_matched_update({"v": "source.v"})
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (1, 2)
    got = rows(uri)
    # the updated row keeps its id; inserted rows get 11 and 16 (above the mark 6)
    assert got[:2] == [{"id": 1, "k": 1, "v": "a"}, {"id": 6, "k": 2, "v": "B"}]
    assert sorted(r["id"] for r in got[2:]) == [11, 16]
    assert {r["k"] for r in got[2:]} == {3, 4}
    assert mark(uri) == 16
    info = json.loads(
        (Path(uri) / "_delta_log" / f"{m.version:020d}.json").read_text().split("\n")[0]
    )
    assert info["commitInfo"]["tags"] == {"delta.identity.schemaUpdate": "true"}
    theirs = deltalake.DeltaTable(uri).to_pyarrow_table()
    assert sorted(theirs.column("id").to_pylist()) == [1, 6, 11, 16]
    # a later append continues after the MERGE's values
    lq.write(uri, pa.table({"k": [5], "v": ["e"]}), mode="append")
    assert max(r["id"] for r in rows(uri)) == 21


def test_merge_without_inserts_keeps_the_mark(tmp_path: Path) -> None:
    uri = make(tmp_path)
    dt = lq.DeltaTable(uri)
    m = (
        dt.merge(pa.table({"k": [1], "v": ["A"]}), on="target.k = source.k")
        .when_matched_update({"v": "source.v"})
        .when_not_matched_insert_all()
        .execute()
    )
    assert m.num_inserted_rows == 0
    assert mark(uri) == 2
    commit = (Path(uri) / "_delta_log" / f"{m.version:020d}.json").read_text()
    assert '"metaData"' not in commit


def test_merge_explicit_values(tmp_path: Path) -> None:
    uri = make(tmp_path)
    dt = lq.DeltaTable(uri)
    with pytest.raises(lq.IdentityColumnError, match="GENERATED ALWAYS"):
        dt.merge(
            pa.table({"k": [9], "id": [90]}), on="target.k = source.k"
        ).when_not_matched_insert_all().execute()
    with pytest.raises(lq.IdentityColumnError, match="cannot be updated"):
        dt.merge(pa.table({"k": [1]}), on="target.k = source.k").when_matched_update(
            {"id": "100"}
        ).execute()
    assert dt.snapshot().version == 0
    # BY DEFAULT: an explicit value in a MERGE insert is kept
    by_default = make(tmp_path / "bd", always=False)
    lq.DeltaTable(by_default).merge(
        pa.table({"k": [9, 10], "id": [90, None]}), on="target.k = source.k"
    ).when_not_matched_insert({"k": "source.k", "id": "source.id"}).execute()
    assert sorted((r["k"], r["id"]) for r in rows(by_default)) == [
        (1, 1),
        (2, 2),
        (9, 90),
        (10, None),
    ]
    assert mark(by_default) == 2


def test_update_of_identity_column_refused_other_columns_fine(tmp_path: Path) -> None:
    for always in (True, False):
        uri = make(tmp_path / str(always), always=always)
        dt = lq.DeltaTable(uri)
        with pytest.raises(lq.IdentityColumnError, match="'id'"):
            dt.update("k = 1", set={"id": "id + 100"})
        assert dt.snapshot().version == 0
        dt.update("k = 1", set={"v": "'z'"})
        assert rows(uri)[0] == {"id": 1, "k": 1, "v": "z"}
        assert mark(uri) == 2


def test_delete_keeps_the_mark(tmp_path: Path) -> None:
    uri = make(tmp_path)
    lq.DeltaTable(uri).delete("k = 2")
    assert rows(uri) == [{"id": 1, "k": 1, "v": "a"}]
    lq.write(uri, pa.table({"k": [3], "v": ["c"]}), mode="append")
    assert [r["id"] for r in rows(uri)] == [1, 3]  # 2 is never handed out again


def test_restore_keeps_the_high_water_mark(tmp_path: Path) -> None:
    uri = make(tmp_path)  # ids 1, 2 (version 0)
    lq.write(uri, pa.table({"k": [3, 4], "v": ["c", "d"]}), mode="append")  # ids 3, 4
    dt = lq.DeltaTable(uri)
    m = dt.restore(version=0)
    assert [r["id"] for r in rows(uri)] == [1, 2]
    # the restored metadata is version 0's, except that the mark stays at 4
    assert mark(uri) == 4
    lq.write(uri, pa.table({"k": [5], "v": ["e"]}), mode="append")
    assert [r["id"] for r in rows(uri)] == [1, 2, 5]  # 3 and 4 are not handed out again
    # restoring to a version with the same metadata but the mark of a later one: no change
    assert dt.restore(version=m.version).version is not None
    assert mark(uri) == 5


def test_merge_past_the_end_of_the_long_range_is_an_identity_error(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"k": [1], "v": ["a"]}),
        identity={"id": Identity(start=-(2**63) + 1, step=-1)},  # one value left after it
        configuration=NO_DV,
    )
    dt = lq.DeltaTable(uri)
    source = pa.table({"k": [2, 3], "v": ["b", "c"]})
    with pytest.raises(lq.IdentityColumnError, match="overflows long"):
        dt.merge(source, on="target.k = source.k").when_not_matched_insert_all().execute()
    assert dt.snapshot().version == 0


def test_identity_and_row_tracking_tags_are_both_kept(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"k": [1], "v": ["a"]}),
        identity={"id": Identity(start=1, step=1)},
        configuration={**NO_DV, "delta.enableRowTracking": "true"},
    )
    dt = lq.DeltaTable(uri)
    m = (
        dt.merge(pa.table({"k": [1, 2], "v": ["A", "b"]}), on="target.k = source.k")
        .when_matched_update({"v": "source.v"})
        .when_not_matched_insert_all()
        .execute()
    )
    line = (Path(uri) / "_delta_log" / f"{m.version:020d}.json").read_text().split("\n")[0]
    tags = json.loads(line)["commitInfo"]["tags"]
    assert tags["delta.identity.schemaUpdate"] == "true"
    assert tags["delta.rowTracking.preserved"] == "true"
