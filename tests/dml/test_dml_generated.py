"""UPDATE and MERGE on tables with generated columns: a generated column the statement does
not give a value gets its expression evaluated over the row's new values (as Spark-Delta
does); a value given explicitly is still checked against the expression."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import lakequery as lq
from lakequery.errors import ConstraintViolationError


def _table(root: Path, *, dvs: bool) -> lq.DeltaTable:
    gen = {b"delta.metadata": json.dumps({"delta.generationExpression": "id * 2"}).encode()}
    day = {
        b"delta.metadata": json.dumps({"delta.generationExpression": "CAST(ts AS DATE)"}).encode()
    }
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("twice", pa.int64(), metadata=gen),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
            pa.field("day", pa.date32(), metadata=day),
            pa.field("s", pa.string()),
        ]
    )
    uri = str(root / "t")
    day_us = 86_400_000_000
    data = {
        "id": [1, 2, 3],
        "twice": [2, 4, 6],
        "ts": [0, day_us, 2 * day_us],
        "day": [0, 1, 2],
        "s": ["a", "b", "c"],
    }
    configuration = {"delta.enableDeletionVectors": str(dvs).lower()}
    lq.write(uri, pa.table(data, schema=schema), configuration=configuration)
    dt = lq.DeltaTable(uri)
    assert dt.snapshot().schema == schema
    return dt


def _rows(dt: lq.DeltaTable) -> list[tuple[object, ...]]:
    t = dt.snapshot().scan(columns=["id", "twice", "day", "s"]).to_arrow()
    return sorted((r["id"], r["twice"], str(r["day"]), r["s"]) for r in t.to_pylist())


@pytest.mark.parametrize("dvs", [True, False])
def test_update_recomputes_generated_columns(tmp_path: Path, dvs: bool) -> None:
    dt = _table(tmp_path, dvs=dvs)
    assert dt.update(
        "id = 1", set={"id": "10", "ts": "TIMESTAMP '2030-05-06 23:00:00+00'"}
    ).committed
    assert dt.update("id = 2", set={"s": "'bb'"}).committed  # inputs unchanged: same values
    assert _rows(dt) == [
        (2, 4, "1970-01-02", "bb"),
        (3, 6, "1970-01-03", "c"),
        (10, 20, "2030-05-06", "a"),
    ]
    with pytest.raises(ConstraintViolationError, match="twice"):
        dt.update("id = 3", set={"twice": "7"})  # an explicit value must still fit
    assert dt.update("id = 3", set={"twice": "6", "s": "'cc'"}).committed


def test_merge_recomputes_generated_columns(tmp_path: Path) -> None:
    dt = _table(tmp_path, dvs=True)
    source = pa.table(
        {
            "id": [2, 3, 7],
            "ts": pa.array([None, None, 0], pa.timestamp("us", tz="UTC")),
            "s": ["B", "C", "new"],
        }
    )
    m = (
        dt.merge(source, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(set={"id": "s.id + 100"}, predicate="s.id = 2")
        .when_matched_update_all()  # the source has no twice/day: computed from its row
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (2, 1)
    assert _rows(dt) == [
        (1, 2, "1970-01-01", "a"),
        (3, 6, "None", "C"),
        (7, 14, "1970-01-01", "new"),
        (102, 204, "1970-01-02", "b"),
    ]
    with pytest.raises(ConstraintViolationError, match="twice"):
        dt.merge(
            pa.table({"id": [1], "twice": [5]}),
            on="t.id = s.id",
            source_alias="s",
            target_alias="t",
        ).when_matched_update_all().execute()
