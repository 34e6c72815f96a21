"""Rich displays: every ``_repr_html_`` parsed with html.parser and checked for what a
person asks first, for escaping, and for never showing a storage secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from htmlkit import parse
from tablekit import TableKit, commit_info, domain_action, protocol_action

import lakequery as lq
from lakequery.history import History

CONF = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}


def _table(root: Path) -> lq.DeltaTable:
    """Three partitions, columns whose names need escaping, then a DV delete."""
    uri = str(root / "t")
    data = pa.table(
        {
            "<b>id</b>": pa.array(range(9), pa.int64()),
            "a&b": [f"v{i}" for i in range(9)],
            "region": ["eu", "us", "ap"] * 3,
        }
    )
    lq.write(uri, data, partition_by=["region"], configuration=CONF)
    lq.write(uri, data.slice(0, 3), mode="append")
    lq.DeltaTable(uri).delete('"<b>id</b>" < 2')
    return lq.DeltaTable(uri)


def _fields(markup: str) -> dict[str, str]:
    """th -> td of the two-column tables."""
    return parse(markup).fields()


def test_table_shows_version_schema_partitions_files_and_operations(tmp_path: Path) -> None:
    dt = _table(tmp_path)
    markup = dt._repr_html_()
    parsed = parse(markup)
    assert parsed.unbalanced == []
    assert "b" not in parsed.tags  # the column name <b>id</b> is text, not markup
    assert "&lt;b&gt;id&lt;/b&gt;" in markup and "a&amp;b" in markup
    cells = parsed.cells()
    assert "<b>id</b>" in cells and "a&b" in cells and "region" in cells
    info = _fields(markup)
    assert info["version"] == "2"
    assert info["operation"] == "DELETE"
    assert info["partitioned by"] == "region"
    snap = dt.snapshot()
    assert info["files"].startswith(f"{snap.num_files} (")
    assert info["rows"] == str(snap.num_records()) == "8"  # 12 written, 4 deleted
    # the one-row files of the second write are removed whole; two files keep a DV
    assert info["deletion vectors"] == "2 files hide 2 rows"
    assert "deletionVectors" in info["protocol"]
    # partitions, with file counts per partition
    assert {"region=ap", "region=eu", "region=us"} <= set(cells)
    # last operations, newest first
    history_rows = [[text for _, text in r] for r in parsed.rows if len(r) == 5]
    history_rows = [r for r in history_rows if r[0].isdigit() and r[1].startswith("20")]
    assert [(r[0], r[2]) for r in history_rows] == [
        ("2", "DELETE"),
        ("1", "WRITE"),
        ("0", "CREATE TABLE"),
    ]
    partition_rows = {r[0][1]: r[1][1] for r in parsed.rows if r and r[0][1].startswith("region=")}
    assert partition_rows == {"region=ap": "2", "region=eu": "1", "region=us": "1"}
    assert "delta.enableDeletionVectors" in cells


def test_snapshot_html_is_per_version(tmp_path: Path) -> None:
    dt = _table(tmp_path)
    old = _fields(dt.snapshot(version=0)._repr_html_())
    assert old["version"] == "0"
    assert old["rows"] == "9"
    assert "deletion vectors" not in old
    assert old["files"].startswith("3 (")


def test_scan_and_plan_show_files_read_and_skipped(tmp_path: Path) -> None:
    dt = _table(tmp_path)
    scan = dt.snapshot().scan(columns=["a&b"], filter="region = 'eu'")
    plan = scan.plan()
    info = _fields(plan._repr_html_())
    assert info["files read"] == f"{plan.num_files} of {plan.total_files}" == "1 of 4"
    assert info["files skipped"] == "3 (75%)"
    cells = parse(plan._repr_html_()).cells()
    assert sum(c == "region=eu" for c in cells) == 1  # one row per file read
    scan_info = _fields(scan._repr_html_())
    assert scan_info["filter"] == "region = 'eu'"
    assert scan_info["columns"] == "a&b"
    assert repr(plan) == "ScanPlan(files=1 of 4)"


def test_history_is_a_list_with_displays_and_conversions(tmp_path: Path) -> None:
    dt = _table(tmp_path)
    history = dt.history()
    assert isinstance(history, History) and isinstance(history, list)
    assert history == list(history) and history[0].version == 2 and len(history) == 3
    assert repr(history) == "History(3 commits, versions 2..0)"
    table = history.to_arrow()
    assert table.column_names == ["version", "timestamp", "operation", "parameters", "metrics"]
    assert table.column("operation").to_pylist() == ["DELETE", "WRITE", "CREATE TABLE"]
    metrics = dict(table.column("metrics")[0].as_py())
    assert metrics["numDeletedRows"] == "4"
    frame = history.to_pandas()
    assert list(frame["version"]) == [2, 1, 0]
    parsed = parse(history._repr_html_())
    assert parsed.unbalanced == []
    assert "History: 3 commits (versions 0..2)" in parsed.text
    assert "DELETE" in parsed.cells()
    assert History()._repr_html_() and repr(History()) == "History(0 commits)"


def test_command_metrics_display(tmp_path: Path) -> None:
    uri = str(tmp_path / "m")
    lq.write(uri, pa.table({"x": list(range(10))}), configuration=CONF)
    dt = lq.DeltaTable(uri)
    dml = dt.delete("x < 4")
    info = _fields(dml._repr_html_())
    assert info["num deleted rows"] == "4"
    assert info["num deletion vectors added"] == "1"
    for i in range(3):
        lq.write(uri, pa.table({"x": [100 + i]}), mode="append")
    opt = dt.optimize()
    info = _fields(opt._repr_html_())
    assert info["files removed"] == str(opt.files_removed) == "4"
    assert info["bytes added"].startswith(f"{opt.bytes_added:,} (")
    vac = dt.vacuum(retention_hours=0, enforce_retention=False)
    assert len(vac.files) >= 4  # the replaced data files, their DV and change files
    assert "files=" not in repr(vac)  # thousands of paths stay out of the repr
    vinfo = _fields(vac._repr_html_())
    assert vinfo["files"].startswith(f"{len(vac.files)} items: ")


def test_change_scan_display(tmp_path: Path) -> None:
    dt = _table(tmp_path)
    changes = dt.changes(starting_version=1)
    info = _fields(changes._repr_html_())
    assert info["versions"] == "1..2"
    assert info["files to read"] == str(changes.num_files)
    cells = parse(changes._repr_html_()).cells()
    assert "<b>id</b>" in cells and "_change_type" in cells


def test_missing_table_renders_the_error(tmp_path: Path) -> None:
    dt = lq.DeltaTable(str(tmp_path / "nothing"))
    info = _fields(dt._repr_html_())
    assert "error" in info and "nothing" in info["error"]


def test_reprs_stay_short(tmp_path: Path) -> None:
    dt = _table(tmp_path)
    snap = dt.snapshot()
    for obj in (dt, snap, snap.scan().plan(), dt.history(), dt.changes(starting_version=1)):
        text = repr(obj)
        assert "\n" not in text and len(text) < 200, text
    wide = str(tmp_path / "wide")
    lq.write(wide, pa.table({f"column_{i}": [i] for i in range(300)}))
    wide_snap = lq.DeltaTable(wide).snapshot()
    assert repr(wide_snap.scan()).endswith("... 300 columns])")
    assert len(repr(wide_snap.scan())) < 200


SECRET_KEY = "AKIA-VISIBLE-NAME-ONLY"
SECRET = "sup3r-s3cret-d0-not-show"


def test_storage_secrets_are_never_rendered(
    s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    options = {**s3_storage_options, "key": SECRET_KEY, "secret": SECRET}
    lq.write(
        s3_table_uri,
        pa.table({"x": [1, 2], "p": ["a", "b"]}),
        partition_by=["p"],
        storage_options=options,
    )
    dt = lq.DeltaTable(s3_table_uri, storage_options=options)
    snap = dt.snapshot()
    rendered = [
        dt._repr_html_(),
        repr(dt),
        snap._repr_html_(),
        repr(snap),
        snap.scan(filter="p = 'a'")._repr_html_(),
        dt.history()._repr_html_(),
    ]
    for text in rendered:
        assert SECRET not in text and SECRET_KEY not in text
        assert options["endpoint_url"] not in text
    info = _fields(rendered[0])
    assert info["version"] == "0"
    assert info["storage options"] == (
        "4 set (client_kwargs, endpoint_url, key, secret; values hidden)"
    )


@pytest.mark.parametrize("name", ["<script>alert(1)</script>", "x\"'><img src=y>"])
def test_hostile_column_names_are_text(tmp_path: Path, name: str) -> None:
    uri = str(tmp_path / "h")
    lq.write(uri, pa.table({name: [1]}))
    parsed = parse(lq.DeltaTable(uri)._repr_html_())
    assert "script" not in parsed.tags and "img" not in parsed.tags
    assert name in parsed.cells()


def test_clustering_columns_are_shown(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "clustered")
    protocol = protocol_action(1, 7, None, ["domainMetadata", "clustering"])
    kit.create(pa.schema([("a", pa.int64()), ("b", pa.string())]), protocol=protocol)
    kit.commit(
        [domain_action("delta.clustering", '{"clusteringColumns": [["a"], ["b"]]}')],
        info=commit_info("CLUSTER BY"),
    )
    info = _fields(lq.DeltaTable(kit.uri)._repr_html_())
    assert info["clustered by"] == "a, b"
    assert "clustered by" not in _fields(lq.DeltaTable(kit.uri).snapshot(version=0)._repr_html_())


def test_clustering_columns_are_shown_by_logical_name(tmp_path: Path) -> None:
    uri = str(tmp_path / "cm")
    data = pa.table({"user": [1, 2], "day": ["a", "b"]})
    lq.write(uri, data, cluster_by=["user"], configuration={"delta.columnMapping.mode": "name"})
    dt = lq.DeltaTable(uri)
    assert dt.detail().clustering_columns == ("user",)
    assert _fields(dt._repr_html_())["clustered by"] == "user"
    assert _fields(dt.snapshot()._repr_html_())["clustered by"] == "user"


def test_partition_labels_of_bytes_and_of_a_string_named_null(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 show in hex; NULL and the string 'null' stay apart."""
    from lakequery.display.facts import partition_labels, partition_summary

    uri = str(tmp_path / "b")
    lq.write(uri, pa.table({"id": [1, 2], "b": [b"\xff\x00", b"ok"]}), partition_by="b")
    snap = lq.DeltaTable(uri).snapshot()
    labels = sorted(partition_labels(snap.files(), snap.partition_columns).to_pylist())
    assert labels == ["b=0x6f6b", "b=0xff00"]
    for shown in (lq.DeltaTable(uri), snap, snap.scan(), snap.scan().plan()):
        assert "0xff00" in shown._repr_html_()
    uri = str(tmp_path / "n")
    lq.write(uri, pa.table({"id": [1, 2, 3], "k": [None, "null", "null"]}), partition_by="k")
    snap = lq.DeltaTable(uri).snapshot()
    summary = partition_summary(snap.files(), snap.partition_columns)
    pairs = zip(summary["partition"].to_pylist(), summary["rows"].to_pylist(), strict=True)
    assert sorted(pairs) == [
        ("k='null'", 2),
        ("k=null", 1),
    ]
