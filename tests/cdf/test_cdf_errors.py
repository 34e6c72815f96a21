"""Ranges the change feed refuses, and how versions and timestamps are resolved."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from cdfkit import CDF, simple
from deltalake import DeltaTable as DeltaRsTable

import lakequery as lq


def _t(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [str(i) for i in ids]})


@pytest.fixture
def cdf_table(tmp_path: Path) -> str:
    """Versions 0..3, CDF on from the start: inserts 1,2 / 3 / 4 / 5."""
    root = str(tmp_path / "t")
    lq.write(root, _t([1, 2]), configuration=CDF)
    for i in (3, 4, 5):
        lq.write(root, _t([i]), mode="append")
    return root


def _set_times(root: str, seconds: list[int]) -> None:
    for version, sec in enumerate(seconds):
        path = Path(root) / "_delta_log" / f"{version:020d}.json"
        os.utime(path, (sec, sec))


def test_cdf_never_enabled(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    lq.write(root, _t([1]))
    lq.write(root, _t([2]), mode="append")
    with pytest.raises(lq.ChangeDataFeedError, match=r"not enabled for versions 0\.\.1") as info:
        lq.DeltaTable(root).changes(starting_version=0)
    assert isinstance(info.value, lq.LakeQueryError)
    assert (info.value.start, info.value.end) == (0, 1)


def test_cdf_enabled_later_and_disabled_again(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    lq.write(root, _t([1]))  # v0, off
    lq.write(root, _t([2]), mode="append")  # v1, off
    DeltaRsTable(root).alter.set_table_properties(CDF)  # v2, on
    lq.write(root, _t([3]), mode="append")  # v3
    DeltaRsTable(root).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})  # v4
    lq.write(root, _t([4]), mode="append")  # v5
    dt = lq.DeltaTable(root)
    with pytest.raises(lq.ChangeDataFeedError, match=r"versions 0\.\.1"):
        dt.changes(starting_version=0, ending_version=3)
    with pytest.raises(lq.ChangeDataFeedError, match=r"versions 1\.\.1"):
        dt.changes(starting_version=1, ending_version=2)
    feed = dt.changes(starting_version=2, ending_version=3).to_arrow()
    assert simple(feed, "id", "_change_type", "_commit_version") == [(3, "insert", 3)]
    only_properties = dt.changes(starting_version=2, ending_version=2)  # no file actions
    assert only_properties.to_arrow().num_rows == 0
    assert only_properties.to_duckdb().to_arrow_table().num_rows == 0
    with pytest.raises(lq.ChangeDataFeedError, match=r"versions 4\.\.5"):
        dt.changes(starting_version=3)
    with pytest.raises(lq.ChangeDataFeedError, match=r"versions 4\.\.4"):
        dt.changes(starting_version=2, ending_version=4)


def test_range_checks(cdf_table: str) -> None:
    dt = lq.DeltaTable(cdf_table)
    with pytest.raises(lq.ChangeDataFeedError, match="after the ending version"):
        dt.changes(starting_version=3, ending_version=1)
    with pytest.raises(lq.VersionNotFoundError) as info:
        dt.changes(starting_version=4)
    assert info.value.latest == 3
    with pytest.raises(lq.VersionNotFoundError):
        dt.changes(starting_version=1, ending_version=9)
    with pytest.raises(lq.ChangeDataFeedError, match="required"):
        dt.changes()
    with pytest.raises(lq.ChangeDataFeedError, match="non-negative"):
        dt.changes(starting_version=-1)
    with pytest.raises(lq.ChangeDataFeedError, match="not both"):
        dt.changes(starting_version=0, starting_timestamp="2026-01-01T00:00:00Z")
    with pytest.raises(lq.ChangeDataFeedError, match="not both"):
        dt.changes(starting_version=0, ending_version=1, ending_timestamp="2026-01-01")
    with pytest.raises(lq.PredicateError):
        dt.changes(starting_version=0, columns=["nope"])
    with pytest.raises(lq.PredicateError):
        dt.changes(starting_version=0, filter="nope = 1")
    with pytest.raises(lq.TableNotFoundError):
        lq.DeltaTable(cdf_table + "-missing").changes(starting_version=0)


def test_defaults_and_single_versions(cdf_table: str) -> None:
    dt = lq.DeltaTable(cdf_table)
    feed = dt.changes(starting_version=2)
    assert (feed.starting_version, feed.ending_version) == (2, 3)
    assert simple(feed.to_arrow(), "id", "_commit_version") == [(4, 2), (5, 3)]
    empty = dt.changes(starting_version=1, filter="id > 100")
    assert empty.to_arrow().num_rows == 0
    assert empty.to_duckdb().to_arrow_table().num_rows == 0
    assert empty.to_polars().collect().height == 0


def test_timestamps(cdf_table: str) -> None:
    base = 1_800_000_000
    _set_times(cdf_table, [base, base + 10, base + 20, base + 30])
    dt = lq.DeltaTable(cdf_table)

    def at(sec: float) -> datetime:
        return datetime.fromtimestamp(sec, tz=timezone.utc)

    # start: first commit at or after; end: newest commit at or before
    feed = dt.changes(starting_timestamp=at(base + 5), ending_timestamp=at(base + 25))
    assert (feed.starting_version, feed.ending_version) == (1, 2)
    exact = dt.changes(starting_timestamp=at(base + 10), ending_timestamp=at(base + 20))
    assert (exact.starting_version, exact.ending_version) == (1, 2)
    naive = dt.changes(starting_timestamp=at(base + 20).replace(tzinfo=None).isoformat())
    assert (naive.starting_version, naive.ending_version) == (2, 3)
    assert dt.changes(starting_version=0, ending_timestamp=at(base + 99)).ending_version == 3
    stamps = dt.changes(starting_version=0).to_arrow()
    assert simple(stamps, "_commit_version", "_commit_timestamp")[-1] == (
        3,
        (base + 30) * 1_000_000,
    )
    with pytest.raises(lq.VersionNotFoundError):
        dt.changes(starting_timestamp=at(base + 31))
    with pytest.raises(lq.VersionNotFoundError):
        dt.changes(starting_version=0, ending_timestamp=at(base - 1))
    with pytest.raises(lq.ChangeDataFeedError, match="after the ending version"):
        dt.changes(starting_timestamp=at(base + 15), ending_timestamp=at(base + 12))
    older = at(base) - timedelta(days=1)
    assert dt.changes(starting_timestamp=older).starting_version == 0


def test_non_additive_schema_change(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    lq.write(root, _t([1]), configuration=CDF)  # v0
    lq.write(root, _t([2]), mode="append")  # v1
    narrower = pa.table({"id": pa.array([3], pa.int64())})
    lq.write(root, narrower, mode="overwrite", schema_mode="overwrite")  # v2 drops s
    lq.write(root, pa.table({"id": pa.array([4], pa.int64())}), mode="append")  # v3
    dt = lq.DeltaTable(root)
    with pytest.raises(lq.ChangeDataFeedError, match=r"version 2 .*non-additive.*s was dropped"):
        dt.changes(starting_version=0)
    assert simple(dt.changes(starting_version=0, ending_version=1).to_arrow(), "id") == [
        (1,),
        (2,),
    ]
    after = dt.changes(starting_version=2).to_arrow()
    assert after.column_names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    # the overwrite removes the old-schema files: read with the new schema
    assert simple(after, "id", "_change_type") == [
        (1, "delete"),
        (2, "delete"),
        (3, "insert"),
        (4, "insert"),
    ]


def test_missing_commit_after_log_cleanup(cdf_table: str) -> None:
    dt = lq.DeltaTable(cdf_table)
    dt.checkpoint()  # at version 3
    (Path(cdf_table) / "_delta_log" / f"{0:020d}.json").unlink()
    with pytest.raises(lq.VersionNotFoundError):
        dt.changes(starting_version=0)
    with pytest.raises(lq.VersionNotFoundError):
        dt.changes(starting_version=1)
    assert simple(dt.changes(starting_version=3).to_arrow(), "id") == [(5,)]


def test_error_pickles_with_its_fields() -> None:
    import pickle

    err = lq.ChangeDataFeedError("memory://t", "why", start=1, end=4)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is lq.ChangeDataFeedError
    assert (back.uri, back.detail, back.start, back.end, str(back)) == (
        "memory://t",
        "why",
        1,
        4,
        str(err),
    )
    assert isinstance(back, ValueError)


def test_columns_named_like_the_feed_s_own_are_refused(tmp_path: Path) -> None:
    """A table recording its changes cannot have a ``_change_type`` (``_commit_version``,
    ``_commit_timestamp``) column, as in Delta: ALTER accepted one, then every UPDATE failed
    with a raw DuckDB error. Nothing is committed."""
    uri = str(tmp_path / "t")
    with pytest.raises(lq.SchemaError, match="change data feed"):
        lq.write(uri, pa.table({"_change_type": ["x"]}), configuration=CDF)
    assert not (tmp_path / "t" / "_delta_log").exists()
    lq.write(uri, pa.table({"id": [1], "_Commit_Version": [2]}))
    dt = lq.DeltaTable(uri)
    with pytest.raises(lq.SchemaError, match="_Commit_Version"):
        dt.alter.set_properties(CDF)
    dt.alter.rename_column("_Commit_Version", "v")
    dt.alter.set_properties(CDF)
    with pytest.raises(lq.SchemaError):
        dt.alter.add_columns(pa.field("_change_type", pa.string()))
    with pytest.raises(lq.SchemaError):
        dt.alter.rename_column("v", "_commit_timestamp")
    assert dt.update("id = 1", set={"v": "3"}).num_updated_rows == 1
