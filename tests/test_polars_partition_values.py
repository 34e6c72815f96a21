"""The Polars engine over more partition-value groups than it unions: one ``scan_parquet``
of every file, each row's partition values picked by the path of its file
(``engines.polars._group_frame`` with ``joined``), checked against the DuckDB engine and
the rows written."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest

import lakequery as lq
from lakequery.engines import polars as polars_engine
from lakequery.engines.layout import MAX_UNION_GROUPS, hive_layout

GROUPS = MAX_UNION_GROUPS + 6


def _rows(groups: int = GROUPS) -> pa.Table:
    """Two rows per group; ``s`` holds a space, so no layout is Hive and every engine takes
    the values from the log. Every fifth group has null partition values but ``s`` and ``d``."""
    n = 2 * groups
    g = [i // 2 for i in range(n)]
    null = [k % 5 == 0 for k in g]
    return pa.table(
        {
            "s": pa.array([f"v {k}" for k in g]),
            "d": pa.array([dt.date(2000, 1, 1) + dt.timedelta(days=k) for k in g], pa.date32()),
            "ts": pa.array(
                [
                    None if z else dt.datetime(2024, 1, 1, k % 24, tzinfo=dt.timezone.utc)
                    for k, z in zip(g, null, strict=True)
                ],
                pa.timestamp("us", "UTC"),
            ),
            "m": pa.array(
                [None if z else decimal.Decimal(k) / 100 for k, z in zip(g, null, strict=True)],
                pa.decimal128(9, 2),
            ),
            "b": pa.array([None if z else k % 2 == 0 for k, z in zip(g, null, strict=True)]),
            "x": pa.array(range(n), pa.int64()),
        }
    )


def _sorted(table: pa.Table) -> list[tuple[Any, ...]]:
    cols = [table.column(c).to_pylist() for c in table.column_names]
    return sorted(zip(*cols, strict=True), key=lambda r: r[-1])


def _scans(lf: pl.LazyFrame) -> int:
    return lf.explain().count("Parquet SCAN")


@pytest.fixture
def partitioned(tmp_path: Path) -> tuple[str, pa.Table]:
    uri = str(tmp_path / "t")
    rows = _rows()
    lq.write(uri, rows, partition_by=["s", "d", "ts", "m", "b"])
    return uri, rows


def test_one_scan_reads_every_group_with_its_values(
    partitioned: tuple[str, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, rows = partitioned
    scan = lq.DeltaTable(uri).snapshot().scan()
    assert not hive_layout(scan)
    lf = scan.to_polars()
    assert _scans(lf) == 1
    got = lf.collect().to_arrow()
    assert got.column_names == rows.column_names
    assert _sorted(got) == _sorted(rows)
    assert _sorted(got) == _sorted(scan.to_duckdb().to_arrow_table())
    # the same frame as one scan per group, the layout below the limit
    monkeypatch.setattr(polars_engine, "MAX_UNION_GROUPS", 10**6)
    union = scan.to_polars()
    assert _scans(union) == GROUPS
    assert union.collect_schema() == lf.collect_schema()
    assert _sorted(union.collect().to_arrow()) == _sorted(got)


def test_filters_and_projections_on_the_picked_values(partitioned: tuple[str, pa.Table]) -> None:
    uri, rows = partitioned
    snap = lq.DeltaTable(uri).snapshot()
    want = [r[-1] for r in _sorted(rows) if r[0] == "v 7" or r[2] is None]
    by_polars = snap.scan().to_polars().filter(pl.col("s").eq("v 7") | pl.col("ts").is_null())
    assert sorted(by_polars.collect()["x"].to_list()) == want
    # the plan's own filter prunes files first; the rest still reads as one scan
    scan = snap.scan(filter="b = true OR m IS NULL", columns=["x", "m"])
    wanted = sorted(r[-1] for r in _sorted(rows) if r[4] is True or r[3] is None)
    assert sorted(scan.to_polars().collect()["x"].to_list()) == wanted
    # partition columns alone: the rows are counted without reading a data column
    only = snap.scan(columns=["m", "b"]).to_polars().collect()
    assert sorted(only.rows(), key=repr) == sorted(
        zip(rows["m"].to_pylist(), rows["b"].to_pylist(), strict=True), key=repr
    )
    # a query that does not use the partition columns drops their expressions
    assert snap.scan().to_polars().select(pl.col("x").sum()).collect().item() == sum(
        rows["x"].to_pylist()
    )


def test_deletion_vectors_across_many_partitions(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    rows = _rows()
    lq.write(
        uri,
        rows,
        partition_by=["s", "d"],
        configuration={"delta.enableDeletionVectors": "true"},
    )
    table = lq.DeltaTable(uri)
    table.delete("x % 3 = 0")
    scan = table.snapshot().scan()
    assert any(d is not None for d in scan.plan().files.column("deletion_vector").to_pylist())
    lf = scan.to_polars()
    assert _scans(lf) == 1
    want = [r for r in _sorted(rows) if r[-1] % 3 != 0]
    assert _sorted(lf.collect().to_arrow()) == want
    assert _sorted(scan.to_duckdb().to_arrow_table()) == want


def test_column_mapped_table_whose_data_column_is_stored_under_a_partition_name(
    tmp_path: Path,
) -> None:
    """Renames enable column mapping and keep the stored names: the data column ``w`` is
    stored as ``v``, the logical name of the partition column (stored as ``p``)."""
    uri = str(tmp_path / "t")
    rows = _rows().select(["s", "x"]).rename_columns(["p", "v"])
    lq.write(uri, rows, partition_by="p")
    table = lq.DeltaTable(uri)
    table.alter.rename_column("v", "w")
    table.alter.rename_column("p", "v")
    scan = table.snapshot().scan()
    assert scan.snapshot.column_mapping_mode == "name"
    lf = scan.to_polars()
    assert _scans(lf) == 1
    got = lf.collect().to_arrow()
    assert got.column_names == ["v", "w"]
    assert _sorted(got) == _sorted(rows)
    assert _sorted(scan.to_duckdb().to_arrow_table()) == _sorted(rows)


def test_change_feed_of_many_commits(tmp_path: Path) -> None:
    """Each commit's files carry their own version and timestamp: the Polars frame of the
    feed reads the data files of all commits in one scan, and equals DuckDB's rows."""
    uri = str(tmp_path / "t")
    lq.write(
        uri, pa.table({"id": [0], "v": ["a"]}), configuration={"delta.enableChangeDataFeed": "true"}
    )
    for i in range(1, GROUPS):
        lq.write(uri, pa.table({"id": [i], "v": ["a"]}), mode="append")
    table = lq.DeltaTable(uri)
    table.update("id % 10 = 0", set={"v": "'b'"})
    table.delete("id = 3")
    feed = table.changes(starting_version=0)
    lf = feed.to_polars()
    assert _scans(lf) < 10  # not one per commit
    order = ["_commit_version", "id", "_change_type"]
    got = lf.collect().sort(order).to_arrow()
    want = pl.from_arrow(feed.to_duckdb().to_arrow_table()).sort(order).to_arrow()
    assert got.equals(want.cast(got.schema))
    assert got.num_rows == GROUPS + 2 * len(range(0, GROUPS, 10)) + 1
    versions = got.column("_commit_version").to_pylist()
    assert sorted(set(versions)) == list(range(GROUPS + 2))


def test_on_s3(s3_table_uri: str, s3_storage_options: dict[str, Any]) -> None:
    """Polars reports the paths of an object store as they were handed over too."""
    rows = _rows().select(["s", "x"])
    lq.write(s3_table_uri, rows, partition_by="s", storage_options=s3_storage_options)
    scan = lq.DeltaTable(s3_table_uri, storage_options=s3_storage_options).snapshot().scan()
    lf = scan.to_polars()
    assert _scans(lf) == 1
    assert _sorted(lf.collect().to_arrow()) == _sorted(rows)


def test_below_the_limit_each_group_is_its_own_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    rows = _rows(6).select(["s", "x"])
    lq.write(uri, rows, partition_by="s")
    scan = lq.DeltaTable(uri).snapshot().scan()
    assert _scans(scan.to_polars()) == 6
    monkeypatch.setattr(polars_engine, "MAX_UNION_GROUPS", 5)
    lf = scan.to_polars()
    assert _scans(lf) == 1
    assert _sorted(lf.collect().to_arrow()) == _sorted(rows)


@pytest.mark.parametrize("parent", ["x=1", "p=99"])
def test_a_table_under_a_key_value_directory(tmp_path: Path, parent: str) -> None:
    """Polars reads key=value from every directory of a path: a Hive table whose root sits
    under such a directory is read with the values from the log instead."""
    uri = str(tmp_path / parent / "t")
    rows = pa.table({"x": pa.array([1, 2, 3], pa.int64()), "p": pa.array([1, 2, 1], pa.int64())})
    lq.write(uri, rows, partition_by="p")
    snap = lq.DeltaTable(uri).snapshot()
    assert hive_layout(snap.scan())
    got = snap.scan().to_polars().collect().to_arrow()
    assert _sorted(got.select(["x", "p"])) == _sorted(rows)
    picked = snap.scan().to_polars().filter(pl.col("p") == 1).collect()
    assert sorted(picked["x"].to_list()) == [1, 3]
