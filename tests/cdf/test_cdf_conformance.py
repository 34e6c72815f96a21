"""The change feed of the three conformance tables with change data, over every version
range (sampled for the 26-version table), against deltalake's ``load_cdf`` and against
expectations derived by hand from the logs.

deltalake agrees with the digest on these tables, DV refinement included; the one
difference is ``_commit_timestamp`` without in-commit timestamps: deltalake reports
``commitInfo.timestamp`` (1970 for commits without commitInfo), lakequery the commit
file's modification time made strictly increasing (digest §13, §16). Timestamps are
therefore compared with deltalake only on the in-commit-timestamp table, and with
:func:`lakequery.history.commit_timestamps` everywhere.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from cdfkit import CONFORMANCE, oracle, rows, simple

import lakequery as lq
from lakequery.history import commit_timestamps
from lakequery.log_segment import list_log
from lakequery.protocol.properties import TableProperties

DV_TABLE = "kernelrs_cdf_table_with_dv"
CDC_DV_TABLE = "kernelrs_cdf_table_with_cdc_and_dvs"
ICT_TABLE = "deltars_cdc_ict_table"
LATEST = {DV_TABLE: 6, CDC_DV_TABLE: 25, ICT_TABLE: 3}


def _ranges(name: str) -> list[tuple[int, int]]:
    last = LATEST[name]
    if last <= 6:
        return [(s, e) for s in range(last + 1) for e in range(s, last + 1)]
    out = {(v, v) for v in range(last + 1)}
    out |= {(0, e) for e in range(0, last + 1, 3)} | {(s, last) for s in range(0, last + 1, 4)}
    out |= {(1, 12), (2, 9), (5, 20), (8, 18), (11, 24), (0, last)}
    return sorted(out)


CASES = [(name, s, e) for name in LATEST for s, e in _ranges(name)]


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Copies (the shared tables stay untouched by any reader side effect)."""
    base = tmp_path_factory.mktemp("cdf_conformance")
    out = {}
    for name in LATEST:
        dst = base / name
        shutil.copytree(CONFORMANCE / name, dst)
        out[name] = str(dst)
    return out


@pytest.mark.parametrize(("name", "start", "end"), CASES)
def test_matches_deltalake(tables: dict[str, str], name: str, start: int, end: int) -> None:
    path = tables[name]
    ours = lq.DeltaTable(path).changes(starting_version=start, ending_version=end).to_arrow()
    expected = oracle(path, start, end)
    with_ts = name == ICT_TABLE
    assert rows(ours, timestamps=with_ts) == rows(expected, timestamps=with_ts)


@pytest.mark.parametrize("name", list(LATEST))
def test_engines_agree(tables: dict[str, str], name: str) -> None:
    feed = lq.DeltaTable(tables[name]).changes(starting_version=0)
    arrow = rows(feed.to_arrow(), timestamps=True)
    assert rows(feed.to_arrow_reader(), timestamps=True) == arrow
    assert rows(feed.to_duckdb(), timestamps=True) == arrow
    assert rows(feed.to_polars(), timestamps=True) == arrow
    df = feed.to_pandas(types_mapper=pd.ArrowDtype)
    assert rows(pa.Table.from_pandas(df, preserve_index=False), timestamps=True) == arrow


@pytest.mark.parametrize("name", list(LATEST))
def test_schema_and_timestamps(tables: dict[str, str], name: str) -> None:
    dt = lq.DeltaTable(tables[name])
    feed = dt.changes(starting_version=0).to_arrow()
    assert feed.schema.names[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    assert feed.schema.field("_change_type").type == pa.string()
    assert feed.schema.field("_commit_version").type == pa.int64()
    assert feed.schema.field("_commit_timestamp").type == pa.timestamp("us", tz="UTC")
    commits = list(list_log(dt.storage, 0).commits)
    props = TableProperties(dt.snapshot().metadata.configuration)
    expected = dict(
        zip(
            [c.version for c in commits],
            commit_timestamps(dt.storage, commits, props),
            strict=True,
        )
    )
    for version, ts in zip(
        feed.column("_commit_version").to_pylist(),
        feed.column("_commit_timestamp").to_pylist(),
        strict=True,
    ):
        assert ts == datetime.fromtimestamp(expected[version] / 1000, tz=timezone.utc)


# --- hand-derived expectations -------------------------------------------------------------


def _one(path: str, version: int) -> list[tuple[object, ...]]:
    feed = lq.DeltaTable(path).changes(starting_version=version, ending_version=version)
    table = feed.to_arrow()
    data = [c for c in table.column_names if not c.startswith("_")]
    return simple(table, *data, "_change_type")


def test_dv_table_by_hand(tables: dict[str, str]) -> None:
    """One file of values 0..9 at positions 0..9; each commit swaps its DV:
    v1 DV {0, 9}, v2 no DV, v3 {0, 1, 4, 5}, v4 {0, 5}, v5 {3}, v6 none."""
    path = tables[DV_TABLE]
    assert _one(path, 0) == [(i, "insert") for i in range(10)]
    assert _one(path, 1) == [(0, "delete"), (9, "delete")]
    assert _one(path, 2) == [(0, "insert"), (9, "insert")]
    assert _one(path, 3) == [(0, "delete"), (1, "delete"), (4, "delete"), (5, "delete")]
    assert _one(path, 4) == [(1, "insert"), (4, "insert")]
    # v5: the inline DV's last Z85 group is written the "padded" way ('##093')
    assert _one(path, 5) == [(0, "insert"), (3, "delete"), (5, "insert")]
    assert _one(path, 6) == [(3, "insert")]


def test_cdc_dv_table_by_hand(tables: dict[str, str]) -> None:
    path = tables[CDC_DV_TABLE]
    assert _one(path, 0) == [(1, "initial", "insert")]
    # DELETE id = 3 by attaching a DV: only the deleted row, not the whole file
    assert _one(path, 2) == [(3, "insert1-delete1", "delete")]
    # OPTIMIZE (dataChange=false) produces nothing
    assert _one(path, 3) == []
    # UPDATE with a cdc file: the change file's rows only
    assert _one(path, 12) == [(2, "update1", "update_preimage"), (2, "update2", "update_postimage")]
    # DELETE id < 10 via a 6-row DV on an 8-row file, no cdc file
    assert [r[0] for r in _one(path, 24)] == [2, 3, 4, 5, 6, 9]


def test_ict_table_by_hand(tables: dict[str, str]) -> None:
    path = tables[ICT_TABLE]
    feed = lq.DeltaTable(path).changes(starting_version=3, ending_version=3).to_arrow()
    assert simple(feed, "name", "birthyear", "age", "_change_type") == [
        ("Kate", 1995, 36, "update_preimage"),
        ("Kate", 1995, 37, "update_postimage"),
        ("Steve", 1986, 40, "update_preimage"),
        ("Steve", 1986, 41, "update_postimage"),
    ]
    # partition values of change files come from the cdc action; the commit's ICT is used
    ts = set(feed.column("_commit_timestamp").to_pylist())
    assert ts == {datetime.fromtimestamp(1783874213.881, tz=timezone.utc)}
    one = lq.DeltaTable(path).changes(starting_version=1, ending_version=1).to_arrow()
    # version 1's ICT is before version 0's: reported as recorded
    assert set(one.column("_commit_timestamp").to_pylist()) == {
        datetime.fromtimestamp(1683874206.883, tz=timezone.utc)
    }


def test_filter_prunes_by_change_columns(tables: dict[str, str]) -> None:
    dt = lq.DeltaTable(tables[CDC_DV_TABLE])
    feed = dt.changes(starting_version=0, filter="_change_type = 'update_postimage'")
    every = dt.changes(starting_version=0)
    assert feed.num_files < every.num_files
    table = feed.to_arrow()
    assert set(table.column("_change_type").to_pylist()) == {"update_postimage"}
    assert table.num_rows == 6
    versions = dt.changes(starting_version=0, filter="_commit_version BETWEEN 9 AND 12")
    assert set(versions.to_arrow().column("_commit_version").to_pylist()) == {9, 10, 12}
    assert rows(versions.to_duckdb()) == rows(versions.to_arrow())
    assert rows(versions.to_polars()) == rows(versions.to_arrow())


def test_columns_subset(tables: dict[str, str]) -> None:
    dt = lq.DeltaTable(tables[ICT_TABLE])
    table = dt.changes(starting_version=0, columns=["age"]).to_arrow()
    assert table.column_names == ["age", "_change_type", "_commit_version", "_commit_timestamp"]
    picked = dt.changes(starting_version=0, columns=["_commit_version", "name"]).to_arrow()
    assert picked.column_names == ["_commit_version", "name", "_change_type", "_commit_timestamp"]


def test_vacuumed_change_file_names_it(tmp_path: Path) -> None:
    dst = tmp_path / "t"
    shutil.copytree(CONFORMANCE / ICT_TABLE, dst)
    victim = next((dst / "_change_data").rglob("*.parquet"))
    victim.unlink()
    with pytest.raises(lq.ObjectNotFoundError):
        lq.DeltaTable(str(dst)).changes(starting_version=0).to_arrow()
