"""How the DuckDB engine reconciles files that store a column differently.

Tables whose columns are all primitives other than ``timestamp`` are read by the log's
schema (``read_parquet``'s ``schema`` option): no footer is read to bind. The others go
through the footer check, for which lakequery's writer logs a schema fingerprint in
``add.tags``: one footer read per fingerprint, every untagged file still looked at, so files
storing other physical types are never read with the first file's types."""

from __future__ import annotations

import decimal
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablekit import TableKit

import lakequery as lq
from lakequery.engines import duckdb as duck
from lakequery.engines import layout
from lakequery.errors import ObjectNotFoundError
from lakequery.parquet_footers import SCHEMA_TAG, schema_fingerprint


def _tags(uri: str) -> list[str | None]:
    files = lq.DeltaTable(uri).snapshot().files()
    return [dict(t or {}).get(SCHEMA_TAG) for t in files.column("tags").to_pylist()]


def _declared_scans(rel: Any) -> int:
    """How many of the relation's ``read_parquet`` scans have the ``schema`` option (in the
    relation's SQL DuckDB 1.5 spells it ``("schema" = main."map"(...``, 2.0
    ``schema=MAP {...``)."""
    return len(re.findall(r'"?schema"?\s*=\s*(MAP|main\."map")', rel.sql_query()))


def _footers_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records how many files each same-schema check looks at."""
    seen: list[int] = []
    real = duck._schema_fingerprints

    def spy(con: Any, paths: list[str], locations: list[str]) -> list[int]:
        seen.append(len(locations))
        return real(con, paths, locations)

    monkeypatch.setattr(duck, "_schema_fingerprints", spy)
    duck._SHARED_TYPES.clear()
    return seen


def _rows(rel: Any) -> list[tuple[Any, ...]]:
    return sorted(rel.fetchall())


def test_writer_tags_each_file_with_its_footer_fingerprint(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"p": [1, 2, 3], "x": [1, 2, 3]}), partition_by="p")
    tags = _tags(uri)
    assert len(tags) == 3 and len(set(tags)) == 1 and tags[0] is not None
    for path in lq.DeltaTable(uri).snapshot().files().column("path").to_pylist():
        assert schema_fingerprint(pq.read_metadata(Path(uri) / path)) == tags[0]


def test_fingerprint_tells_physical_types_apart() -> None:
    def fp(table: pa.Table) -> str:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        return schema_fingerprint(pq.read_metadata(pa.BufferReader(sink.getvalue())))

    base = fp(pa.table({"x": pa.array([1], pa.int64())}))
    assert fp(pa.table({"x": pa.array([5, 6], pa.int64())})) == base  # data is not schema
    assert fp(pa.table({"x": pa.array([1], pa.int32())})) != base
    assert fp(pa.table({"y": pa.array([1], pa.int64())})) != base
    assert fp(pa.table({"x": pa.array([1], pa.int64()), "z": [1]})) != base


def _with_timestamp(table: pa.Table, checked: bool) -> pa.Table:
    """``table``, plus a ``timestamp`` column when ``checked``: it keeps the table off the
    declared-schema read, so the footer check runs."""
    if not checked:
        return table
    return table.append_column("ts", pa.array([0] * table.num_rows, pa.timestamp("us", "UTC")))


def _values(rel: Any, checked: bool) -> list[tuple[Any, ...]]:
    """The rows without the column of :func:`_with_timestamp`."""
    if checked:
        rel = rel.project(", ".join(f'"{c}"' for c in rel.columns if c != "ts"))
    return _rows(rel)


def test_primitive_columns_are_read_by_the_log_schema_without_footers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"p": np.arange(40) % 20, "x": np.arange(40)}), partition_by="p")
    seen = _footers_read(monkeypatch)
    rel = lq.DeltaTable(uri).snapshot().scan().to_duckdb()
    # a Hive table too (its values come from file names, which DuckDB 1.5 reads beside
    # the schema option; its Hive partitioning it would not)
    assert seen == [] and _declared_scans(rel) == 1
    assert rel.aggregate("count(*), sum(x), sum(p)").fetchall() == [(40, 780, 380)]


def test_tagged_files_cost_one_footer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "t")
    data = _with_timestamp(pa.table({"p": np.arange(40) % 20, "x": np.arange(40)}), True)
    lq.write(uri, data, partition_by="p")
    seen = _footers_read(monkeypatch)
    rel = lq.DeltaTable(uri).snapshot().scan().to_duckdb()
    assert seen == [1]
    assert _declared_scans(rel) == 0
    assert rel.aggregate("count(*), sum(x), sum(p), count(ts)").fetchall() == [(40, 780, 380, 40)]


@pytest.mark.parametrize("checked", [False, True], ids=["declared", "checked"])
@pytest.mark.parametrize("foreign_first", [False, True])
def test_untagged_file_with_narrower_physical_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, foreign_first: bool, checked: bool
) -> None:
    """A file of another writer storing ``long``/``double``/``decimal`` columns as
    int32/float32/a smaller scale is read with its own types, before or after the tagged
    ones (read with the first file's types, the decimal would be rounded and a tagged
    long beyond int32 would fail). Declared, DuckDB casts each file to the log's types;
    checked, the footers of one tagged file and the foreign one are read."""
    kit = TableKit(tmp_path / "t")
    big = 2**40
    tagged = _with_timestamp(
        pa.table(
            {
                "x": pa.array([big, 2], pa.int64()),
                "v": pa.array([0.5, 1.25], pa.float64()),
                "d": pa.array(
                    [decimal.Decimal("1.2345"), decimal.Decimal("2.5")], pa.decimal128(12, 4)
                ),
            }
        ),
        checked,
    )
    foreign = _with_timestamp(
        pa.table(
            {
                "x": pa.array([-(2**31)], pa.int32()),
                "v": pa.array([0.1], pa.float32()),
                "d": pa.array([decimal.Decimal("3.25")], pa.decimal128(5, 2)),
            }
        ),
        checked,
    )
    kit.create(tagged.schema)
    if foreign_first:
        kit.commit([kit.write_parquet(foreign)])
    lq.write(kit.uri, tagged, mode="append")
    lq.write(kit.uri, tagged.slice(1), mode="append")
    if not foreign_first:
        kit.commit([kit.write_parquet(foreign)])
    tags = _tags(kit.uri)
    assert tags.count(None) == 1 and len({t for t in tags if t}) == 1
    seen = _footers_read(monkeypatch)
    rel = lq.DeltaTable(kit.uri).snapshot().scan().to_duckdb()
    # checked: one tagged file for both, and the foreign one
    assert seen == ([2] if checked else [])
    want = [
        (-(2**31), float(np.float32(0.1)), decimal.Decimal("3.2500")),
        (2, 1.25, decimal.Decimal("2.5000")),
        (2, 1.25, decimal.Decimal("2.5000")),
        (big, 0.5, decimal.Decimal("1.2345")),
    ]
    assert _values(rel, checked) == want
    # DML reads the same files with row positions (``file_row_number``)
    lq.DeltaTable(kit.uri).delete("x = 2")
    rel = lq.DeltaTable(kit.uri).snapshot().scan().to_duckdb()
    assert _values(rel, checked) == [want[0], want[3]]


@pytest.mark.parametrize("checked", [False, True], ids=["declared", "checked"])
def test_schema_evolution_between_tagged_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checked: bool
) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, _with_timestamp(pa.table({"x": [1, 2]}), checked))
    lq.write(
        uri,
        _with_timestamp(pa.table({"x": [3], "y": ["c"]}), checked),
        mode="append",
        schema_mode="merge",
    )
    tags = _tags(uri)
    assert len(set(tags)) == 2 and None not in tags
    seen = _footers_read(monkeypatch)
    rel = lq.DeltaTable(uri).snapshot().scan().to_duckdb()
    assert seen == ([2] if checked else [])
    assert _values(rel, checked) == [(1, None), (2, None), (3, "c")]


@pytest.mark.parametrize("checked", [False, True], ids=["declared", "checked"])
@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_missing_tagged_file_is_reported(
    tmp_path: Path, checked: bool, partitioned: bool, which: int
) -> None:
    """Whichever file of the scan is missing (DuckDB binds a declared scan by its first
    file alone), the relation's build names it."""
    uri = str(tmp_path / "t")
    data = _with_timestamp(pa.table({"p": [1, 2, 3], "x": [1, 2, 3]}), checked)
    for i in range(3):  # three files either way
        part = data if partitioned else data.slice(i, 1)
        lq.write(uri, part, mode="append", partition_by="p" if partitioned else None)
        if partitioned:
            break
    scan = lq.DeltaTable(uri).snapshot().scan()
    path = scan.plan().location_list[which]
    Path(path).unlink()
    duck._SHARED_TYPES.clear()
    with pytest.raises(ObjectNotFoundError, match=path.rsplit("/", 1)[-1]):
        lq.DeltaTable(uri).snapshot().scan().to_duckdb()


@pytest.mark.parametrize("long", [False, True])
def test_long_file_lists_are_stat_ed_on_their_first_build_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, long: bool
) -> None:
    """A stat costs ~3-4 us a file, so a list longer than ``STAT_EVERY_BUILD`` is checked on
    its first build in the process only (a file removed later surfaces as DuckDB's error
    when the query runs); shorter lists at every build."""
    import duckdb

    if long:
        monkeypatch.setattr(layout, "STAT_EVERY_BUILD", 2)
    uri = str(tmp_path / "t")
    for i in range(3):
        lq.write(uri, pa.table({"x": [i]}), mode="append")
    scan = lq.DeltaTable(uri).snapshot().scan()
    assert sorted(scan.to_duckdb().fetchall()) == [(0,), (1,), (2,)]
    Path(scan.plan().location_list[-1]).unlink()
    if long:
        rel = lq.DeltaTable(uri).snapshot().scan().to_duckdb()
        with pytest.raises(duckdb.IOException, match="No files found"):
            rel.fetchall()
    else:
        with pytest.raises(ObjectNotFoundError):
            lq.DeltaTable(uri).snapshot().scan().to_duckdb()
    # a list not built before is checked at its first build, long or not
    lq.write(uri, pa.table({"x": [3]}), mode="append")
    with pytest.raises(ObjectNotFoundError):
        lq.DeltaTable(uri).snapshot().scan().to_duckdb()


def test_timestamp_columns_stored_two_ways_read_in_any_session(tmp_path: Path) -> None:
    """A ``timestamp`` column stored as INT96 (Spark's default) in one file and as a
    UTC-adjusted timestamp in another: DuckDB's cast between the two follows the session's
    time zone, so such tables are not read by a declared schema; both files give the same
    instants in a session far from UTC."""
    import datetime

    import duckdb

    kit = TableKit(tmp_path / "t")
    when = datetime.datetime(2020, 1, 1, 12, tzinfo=datetime.timezone.utc)
    table = pa.table({"ts": pa.array([when], pa.timestamp("us", tz="UTC"))})
    kit.create(table.schema)
    kit.commit([kit.write_parquet(table)])
    int96 = tmp_path / "t" / "legacy.parquet"
    pq.write_table(
        pa.table({"ts": pa.array([when.replace(tzinfo=None)], pa.timestamp("ns"))}),
        int96,
        use_deprecated_int96_timestamps=True,
    )
    assert pq.read_metadata(int96).schema.column(0).physical_type == "INT96"
    add = {"path": "legacy.parquet", "partitionValues": {}, "size": int96.stat().st_size}
    kit.commit([{"add": add | {"modificationTime": 0, "dataChange": True}}])
    con = duckdb.connect()
    con.execute("SET TimeZone = 'America/New_York'")
    scan = lq.DeltaTable(kit.uri).snapshot().scan()
    rel = scan.to_duckdb(con)
    assert _declared_scans(rel) == 0
    assert rel.to_arrow_table().column("ts").to_pylist() == [when, when]
    # the other engines, which no session's time zone reaches, agree
    assert scan.to_arrow().column("ts").to_pylist() == [when, when]
    assert scan.to_polars().collect().get_column("ts").to_list() == [when, when]


def test_same_schema_check_ignores_column_order_and_sees_each_difference(
    tmp_path: Path,
) -> None:
    """The check over untagged footers: the same columns in another order share a schema;
    a missing column, another physical type or another nesting does not."""
    import duckdb

    base = pa.table({"a": pa.array([1], pa.int64()), "b": ["x"], "c": [1.5]})
    variants = {
        "same": base,
        "reordered": base.select(["c", "a", "b"]),
        "missing": base.select(["a", "b"]),
        "narrower": base.set_column(0, "a", pa.array([1], pa.int32())),
        "nested": base.set_column(1, "b", pa.array([{"b": "x"}])),
    }
    paths = {}
    for name, table in variants.items():
        paths[name] = str(tmp_path / f"{name}.parquet")
        pq.write_table(table, paths[name])
    con = duckdb.connect()

    def same(*names: str) -> bool:
        locations = [paths[n] for n in names]
        return len(set(duck._schema_fingerprints(con, locations, locations))) == 1

    assert same("same", "reordered")
    for other in ("missing", "narrower", "nested"):
        assert not same("same", other), other
        assert not same(other, "reordered", "same"), other


def test_one_scan_is_declared_and_files_with_deletion_vectors_read_their_own_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``read_parquet`` with the ``schema`` option costs DuckDB more per scan, so the
    one-file scans of files with deletion vectors are bound to the types their footers
    store (one footer: they share a logged fingerprint) while the other files are read in
    one declared scan."""
    uri = str(tmp_path / "t")
    for start in (0, 3, 6):
        lq.write(uri, pa.table({"x": np.arange(start, start + 3)}), mode="append")
    lq.DeltaTable(uri).delete("x = 1 OR x = 4")
    seen = _footers_read(monkeypatch)
    rel = lq.DeltaTable(uri).snapshot().scan().to_duckdb()
    sql = rel.sql_query()
    assert sql.count("POSITIONAL JOIN") == 2
    assert _declared_scans(rel) == (1 if duck._DECLARES_ALL else 0)
    assert seen == [1]
    assert _rows(rel) == [(0,), (2,), (3,), (5,), (6,), (7,), (8,)]


def test_a_union_of_partition_groups_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition values that Hive directories cannot carry verbatim are read as one scan
    per group: those scans are not declared (each would pay the option's cost), and the
    tagged files cost one footer."""
    uri = str(tmp_path / "t")
    data = pa.table({"p": ["a b", "c d", "a b"], "x": [1, 2, 3]})
    lq.write(uri, data, partition_by="p")
    seen = _footers_read(monkeypatch)
    rel = lq.DeltaTable(uri).snapshot().scan().to_duckdb()
    assert _declared_scans(rel) == 0
    assert seen == [1]
    assert _rows(rel) == [("a b", 1), ("a b", 3), ("c d", 2)]
