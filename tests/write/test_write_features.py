"""``lq.write`` on real tables with table features (copies of the shared conformance
tables), refusals of features lakequery does not write, and row tracking."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from writekit import commit_actions, copy_conformance_table, dl_rows, lq_rows, normalize

import lakequery
from lakequery.errors import ConstraintViolationError, UnsupportedFeatureError
from lakequery.protocol.column_mapping import ID_KEY, PHYSICAL_NAME_KEY
from lakequery.txn import Transaction


def _latest(uri: str) -> int:
    return lakequery.DeltaTable(uri).snapshot().version


def _new_adds(uri: str, version: int) -> list[dict[str, Any]]:
    return [a["add"] for a in commit_actions(uri, version) if "add" in a]


def _letters(date: dt.date, **values: Any) -> pa.Table:
    """A row of the DAT tables' schema (letter string, int long, date date)."""
    return pa.table(
        {
            "letter": [values.get("letter", "z")],
            "int": pa.array([values.get("int", 5)], pa.int64()),
            "date": pa.array([date], pa.date32()),
        }
    )


def test_check_constraints_table(tmp_path: Path) -> None:
    uri = copy_conformance_table("dat_check_constraints", tmp_path)
    before = normalize(lq_rows(uri))
    v = _latest(uri)
    with pytest.raises(ConstraintViolationError) as err:
        lakequery.write(uri, _letters(dt.date(2020, 1, 1), int=-1), mode="append")
    assert err.value.constraint == "const1"
    assert _latest(uri) == v
    r = lakequery.write(uri, _letters(dt.date(2020, 1, 1), int=7), mode="append")
    assert r.version == v + 1
    expected = sorted(
        [*before, *normalize([{"letter": "z", "int": 7, "date": dt.date(2020, 1, 1)}])], key=repr
    )
    assert normalize(lq_rows(uri)) == expected
    assert normalize(dl_rows(uri)) == expected


def test_generated_columns_table(tmp_path: Path) -> None:
    uri = copy_conformance_table("dat_generated_columns", tmp_path)
    today = dt.datetime.now(dt.timezone.utc).date()
    lakequery.write(uri, _letters(dt.date(2020, 1, 1), letter="gen"), mode="append")
    snap = lakequery.DeltaTable(uri).snapshot()
    row = snap.scan(filter="letter = 'gen'").to_arrow().to_pylist()
    # creation = CAST(now() AS DATE), computed by the writer (allow a midnight rollover)
    assert len(row) == 1
    assert row[0]["creation"] in (today, today + dt.timedelta(days=1))
    assert normalize(dl_rows(uri)) == normalize(lq_rows(uri))


def test_in_commit_timestamps_table(tmp_path: Path) -> None:
    uri = copy_conformance_table("deltars_cdc_ict_table", tmp_path)
    v = _latest(uri)
    previous = commit_actions(uri, v)[0]["commitInfo"]["inCommitTimestamp"]
    data = pa.table(
        {
            "name": ["Zed"],
            "birthyear": pa.array([2001], pa.int32()),
            "age": pa.array([24], pa.int32()),
        }
    )
    r = lakequery.write(uri, data, mode="append")
    assert r.version == v + 1
    actions = commit_actions(uri, v + 1)
    assert list(actions[0]) == ["commitInfo"]
    ict = actions[0]["commitInfo"]["inCommitTimestamp"]
    assert isinstance(ict, int) and ict > previous
    # time travel by timestamp uses the in-commit timestamps
    table = lakequery.DeltaTable(uri)
    at = dt.datetime.fromtimestamp(ict / 1000, dt.timezone.utc)
    assert table.version_as_of(at) == v + 1
    assert table.version_as_of(at - dt.timedelta(milliseconds=1)) == v
    assert table.version_as_of(dt.datetime.fromtimestamp(previous / 1000, dt.timezone.utc)) == v
    assert "Zed" in [r["name"] for r in lq_rows(uri)]
    assert normalize(dl_rows(uri)) == normalize(lq_rows(uri))
    assert normalize(dl_rows(uri, v)) == normalize(lq_rows(uri, v))


@pytest.mark.parametrize(
    "name",
    [
        "dat_column_mapping",
        "golden_table_with_columnmapping_mode_id",
        "deltars_table_with_column_mapping",
    ],
)
def test_column_mapping_tables(tmp_path: Path, name: str) -> None:
    uri = copy_conformance_table(name, tmp_path)
    snap = lakequery.DeltaTable(uri).snapshot()
    mode = snap.column_mapping_mode
    before = lq_rows(uri)
    new_rows = snap.scan().to_arrow().slice(0, 2)
    r = lakequery.write(uri, new_rows, mode="append")
    adds = _new_adds(uri, r.version)
    assert adds
    fields = {f["name"]: f for f in json.loads(snap.metadata.schema_string)["fields"]}
    parts = set(snap.partition_columns)
    data_fields = [f for n, f in fields.items() if n not in parts]
    for add in adds:
        # partition values are keyed by physical name
        assert set(add["partitionValues"]) == {
            fields[p]["metadata"][PHYSICAL_NAME_KEY] for p in parts
        }
        schema = pq.read_schema(Path(uri) / unquote(add["path"]))
        assert schema.names == [f["metadata"][PHYSICAL_NAME_KEY] for f in data_fields]
        if mode == "id":
            ids = [int((f.metadata or {})[b"PARQUET:field_id"]) for f in schema]
            assert ids == [f["metadata"][ID_KEY] for f in data_fields]
        stats = json.loads(add["stats"])
        assert set(stats["nullCount"]) <= {f["metadata"][PHYSICAL_NAME_KEY] for f in data_fields}
    expected = sorted([*normalize(before), *normalize(new_rows.to_pylist())], key=repr)
    assert normalize(lq_rows(uri)) == expected
    assert normalize(dl_rows(uri)) == expected
    # merge adds a column with a fresh id and physical name
    extra = new_rows.slice(0, 1).append_column("added", pa.array(["new"]))
    lakequery.write(uri, extra, mode="append", schema_mode="merge")
    meta = lakequery.DeltaTable(uri).snapshot().metadata
    added = json.loads(meta.schema_string)["fields"][-1]
    old_max = int(snap.metadata.configuration["delta.columnMapping.maxColumnId"])
    assert added["name"] == "added" and added["metadata"][ID_KEY] == old_max + 1
    assert meta.configuration["delta.columnMapping.maxColumnId"] == str(old_max + 1)
    assert added["metadata"][PHYSICAL_NAME_KEY] not in {
        f["metadata"][PHYSICAL_NAME_KEY] for f in fields.values()
    }
    got = [r["added"] for r in lq_rows(uri)]
    assert got.count("new") == 1 and got.count(None) == len(got) - 1
    assert sorted(map(str, (r["added"] for r in dl_rows(uri)))) == sorted(map(str, got))


def test_deletion_vectors_table_keeps_dvs(tmp_path: Path) -> None:
    uri = copy_conformance_table("dat_deletion_vectors", tmp_path)
    snap = lakequery.DeltaTable(uri).snapshot()
    files = snap.files()
    dvs = {
        p: dv
        for p, dv in zip(
            files.column("path").to_pylist(),
            files.column("deletion_vector").to_pylist(),
            strict=True,
        )
        if dv
    }
    assert dvs, "the conformance table has a deletion vector"
    before = lq_rows(uri)
    lakequery.write(uri, _letters(dt.date(2020, 1, 1), int=1234), mode="append")
    after = lakequery.DeltaTable(uri).snapshot().files()
    kept = {
        p: dv
        for p, dv in zip(
            after.column("path").to_pylist(),
            after.column("deletion_vector").to_pylist(),
            strict=True,
        )
        if dv
    }
    assert kept == dvs
    expected = sorted(
        [
            *normalize(before),
            *normalize([{"letter": "z", "int": 1234, "date": dt.date(2020, 1, 1)}]),
        ],
        key=repr,
    )
    assert normalize(lq_rows(uri)) == expected
    assert normalize(dl_rows(uri)) == expected


def test_timestamp_ntz_table(tmp_path: Path) -> None:
    uri = copy_conformance_table("dat_timestamp_ntz", tmp_path)
    when = dt.datetime(2031, 5, 6, 7, 8, 9, 123456)
    data = _letters(dt.date(2020, 1, 1), letter="ntz").append_column(
        "timestampNTZ", pa.array([when], pa.timestamp("us"))
    )
    r = lakequery.write(uri, data, mode="append")
    add = _new_adds(uri, r.version)[0]
    schema = pq.read_schema(Path(uri) / unquote(add["path"]))
    assert schema.field("timestampNTZ").type == pa.timestamp("us")  # not UTC-adjusted
    ours = [x for x in lq_rows(uri) if x["letter"] == "ntz"]
    assert ours[0]["timestampNTZ"] == when
    assert normalize(dl_rows(uri)) == normalize(lq_rows(uri))
    # a tz-aware value does not fit a timestamp_ntz column
    aware = data.set_column(3, "timestampNTZ", pa.array([when], pa.timestamp("us", tz="UTC")))
    with pytest.raises(lakequery.errors.SchemaMismatchError):
        lakequery.write(uri, aware, mode="append")


def test_type_widening_table(tmp_path: Path) -> None:
    uri = copy_conformance_table("kernelrs_type_widening", tmp_path)
    before = lq_rows(uri)
    row = lakequery.DeltaTable(uri).snapshot().scan().to_arrow().slice(0, 1)
    r = lakequery.write(uri, row, mode="append")
    after = lq_rows(uri)
    assert normalize(after) == sorted([*normalize(before), *normalize(row.to_pylist())], key=repr)
    add = _new_adds(uri, r.version)[0]
    schema = pq.read_schema(Path(uri) / unquote(add["path"]))
    # new files are written with the current (widened) types
    assert schema.field("int_long").type == pa.int64()
    assert schema.field("float_double").type == pa.float64()


def test_cdf_table_domains_preserved(tmp_path: Path) -> None:
    uri = copy_conformance_table("kernelrs_cdf_table_with_cdc_and_dvs", tmp_path)
    snap = lakequery.DeltaTable(uri).snapshot()
    domains = snap.domains
    before = lq_rows(uri)
    r = lakequery.write(
        uri, pa.table({"id": pa.array([1000], pa.int32()), "comment": ["lq"]}), mode="append"
    )
    after = lakequery.DeltaTable(uri).snapshot()
    assert after.domains == domains
    assert after.protocol == snap.protocol and after.metadata == snap.metadata
    # an insert-only commit needs no cdc files; readers see the row
    assert not [a for a in commit_actions(uri, r.version) if "cdc" in a]
    expected = sorted([*normalize(before), *normalize([{"id": 1000, "comment": "lq"}])], key=repr)
    assert normalize(lq_rows(uri)) == expected
    assert normalize(dl_rows(uri)) == expected


def _data_files(uri: str) -> set[Path]:
    return {p for p in Path(uri).rglob("*") if p.is_file() and "_delta_log" not in p.parts}


@pytest.mark.parametrize(
    ("name", "feature"),
    [
        ("dat_iceberg_compat_v1", "icebergCompatV1"),
        ("kernelrs_unshredded_variant", "variantType"),
    ],
)
@pytest.mark.parametrize("operation", ["append", "overwrite", "update", "optimize"])
def test_unsupported_features_refused_before_writing(
    tmp_path: Path, name: str, feature: str, operation: str
) -> None:
    # refused before any data file is written: a refusal at commit left them behind (and
    # variant columns reached the Parquet writer: a raw pyarrow error)
    uri = copy_conformance_table(name, tmp_path)
    v, files = _latest(uri), _data_files(uri)
    table = lakequery.DeltaTable(uri)
    snap = table.snapshot()
    row = snap.scan().to_arrow().slice(0, 1)
    first = snap.schema.names[0]
    with pytest.raises(UnsupportedFeatureError) as err:
        if operation in ("append", "overwrite"):
            lakequery.write(uri, row, mode=operation)
        elif operation == "update":
            table.update(set={first: first}, predicate=f"{first} IS NOT NULL")
        else:
            table.optimize(min_file_size=1 << 40)
    assert feature in str(err.value)
    assert _latest(uri) == v
    assert _data_files(uri) == files
    # reading is unaffected
    assert lq_rows(uri)


# -- row tracking ------------------------------------------------------------------------------


def test_row_tracking(tmp_path: Path) -> None:
    uri = str(tmp_path / "rt")
    config = {"delta.enableRowTracking": "true"}
    lakequery.write(
        uri,
        pa.table({"id": [0, 1, 2], "p": ["a", "b", "a"]}),
        configuration=config,
        partition_by=["p"],
    )
    big = pa.table({"id": range(100, 5100), "p": ["a"] * 2500 + ["b"] * 2500})
    lakequery.write(uri, big, mode="append", target_file_size=8 * 1024)
    lakequery.write(uri, pa.table({"id": [7], "p": ["c"]}), mode="append")
    # a user domain survives the writes; the row-tracking domain is lakequery's
    dt_ = lakequery.DeltaTable(uri)
    txn = Transaction(dt_.storage, dt_.snapshot(), operation="SET DOMAIN")
    txn.set_domain("app.owner", '{"team": "x"}')
    txn.commit()
    lakequery.write(uri, pa.table({"id": [8], "p": ["b"]}), mode="overwrite", predicate="p = 'b'")
    snap = lakequery.DeltaTable(uri).snapshot()
    assert snap.protocol.supports("rowTracking") and snap.protocol.supports("domainMetadata")
    config_ = snap.metadata.configuration
    assert config_["delta.enableRowTracking"] == "true"
    assert config_["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    assert config_["delta.rowTracking.materializedRowCommitVersionColumnName"].startswith(
        "_row-commit-version-col-"
    )
    # every add of every commit carries baseRowId and defaultRowCommitVersion
    ranges = []
    for version in range(snap.version + 1):
        for add in _new_adds(uri, version):
            assert add["defaultRowCommitVersion"] == version
            n = json.loads(add["stats"])["numRecords"]
            ranges.append((add["baseRowId"], add["baseRowId"] + n - 1))
    assert len(ranges) > 4
    ranges.sort()
    assert ranges[0][0] == 0
    for (_, hi), (lo, _) in itertools.pairwise(ranges):
        assert lo > hi  # unique, non-overlapping row id ranges
    mark = json.loads(snap.domains["delta.rowTracking"])["rowIdHighWaterMark"]
    assert mark == ranges[-1][1]
    assert json.loads(snap.domains["app.owner"]) == {"team": "x"}
    live = snap.files()
    assert all(b is not None for b in live.column("base_row_id").to_pylist())
    assert deltalake.DeltaTable(uri).version() == snap.version
    assert normalize(dl_rows(uri)) == normalize(lq_rows(uri))
    assert sorted(r["id"] for r in lq_rows(uri)) == sorted([0, 2, 7, 8, *range(100, 2600)])


def test_enabling_row_tracking_needs_row_ids_on_every_file(tmp_path: Path) -> None:
    uri = str(tmp_path / "late")
    lakequery.write(uri, pa.table({"id": [1]}))
    with pytest.raises(lakequery.errors.SchemaError, match="baseRowId"):
        lakequery.write(
            uri,
            pa.table({"id": [2]}),
            mode="append",
            configuration={"delta.enableRowTracking": "true"},
        )
    assert _latest(uri) == 0
    # a full overwrite removes every file without row ids: enabling is fine then
    lakequery.write(
        uri,
        pa.table({"id": [3]}),
        mode="overwrite",
        schema_mode="overwrite",
        configuration={"delta.enableRowTracking": "true"},
    )
    add = _new_adds(uri, 1)[0]
    assert add["baseRowId"] == 0 and add["defaultRowCommitVersion"] == 1
