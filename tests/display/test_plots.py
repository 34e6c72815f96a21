"""Plots (the ``plots`` extra): each returns a matplotlib Figure whose bars / points match
figures computed here independently from the log's statistics and commit metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pyarrow as pa
import pytest
from matplotlib.figure import Figure

import lakequery as lq
from lakequery.display.facts import format_bytes
from lakequery.plots import (
    plot_deleted_rows,
    plot_file_sizes,
    plot_history,
    plot_pruning,
    pruning_shares,
)

matplotlib.use("Agg")  # no display: the Figures are drawn and saved, never shown

DV = {"delta.enableDeletionVectors": "true"}


def _partitioned(root: Path) -> lq.DeltaTable:
    uri = str(root / "p")
    for i in range(4):  # 4 commits x 3 partitions = 12 files of different sizes
        n = 10 * (i + 1) ** 2
        data = pa.table({"x": np.arange(3 * n, dtype=np.int64), "region": ["eu", "us", "ap"] * n})
        lq.write(uri, data, partition_by=["region"], mode="append", configuration=DV)
    return lq.DeltaTable(uri)


def test_file_sizes_one_point_per_file_one_row_per_partition(tmp_path: Path) -> None:
    dt = _partitioned(tmp_path)
    fig = plot_file_sizes(dt)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    points = ax.collections[0].get_offsets()
    assert len(points) == dt.snapshot().num_files == 12
    sizes = sorted(dt.snapshot().files().column("size").to_pylist())
    assert sorted(float(p[0]) for p in points) == sorted(float(s) for s in sizes)
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "region=ap",
        "region=eu",
        "region=us",
    ]
    assert len(ax.lines) == 3  # one median tick per partition
    fig.savefig(tmp_path / "sizes.png")
    assert (tmp_path / "sizes.png").stat().st_size > 0
    few = plot_file_sizes(dt.snapshot(), max_partitions=2)
    assert len(few.axes[0].collections[0].get_offsets()) == 8
    assert few.axes[0].get_title() == ax.get_title()  # the table's totals, all partitions
    assert ax.get_title().startswith(f"12 files, {format_bytes(float(sum(sizes)))} ")


def test_deleted_rows_per_file(tmp_path: Path) -> None:
    dt = _partitioned(tmp_path)
    dt.delete("x < 40 AND region = 'eu'")
    dt.delete("x < 5")
    files = dt.snapshot().files().to_pylist()
    expected = sorted(
        (-r["deletion_vector"]["cardinality"], r["path"], r["num_records"])
        for r in files
        if r["deletion_vector"] is not None
    )
    fig = plot_deleted_rows(dt)
    ax = fig.axes[0]
    live_bars, deleted_bars = ax.containers
    assert len(deleted_bars) == len(expected) > 0
    assert [b.get_height() for b in deleted_bars] == [-e[0] for e in expected]
    totals = [
        lb.get_height() + db.get_height() for lb, db in zip(live_bars, deleted_bars, strict=True)
    ]
    assert totals == [e[2] for e in expected]  # stacked to the file's physical rows
    few = plot_deleted_rows(dt, max_files=2).axes[0]
    assert len(few.containers[1]) == 2
    deleted = -sum(e[0] for e in expected)
    share = f"{deleted / sum(e[2] for e in expected):.1%}"
    n = dt.snapshot().num_files
    assert few.get_title().startswith(f"{len(expected)} of {n} files carry a deletion vector")
    assert f"({share} of their rows deleted, 2 drawn)" in few.get_title()


def test_history_timeline_matches_commit_metrics(tmp_path: Path) -> None:
    uri = str(tmp_path / "h")
    lq.write(uri, pa.table({"x": list(range(10))}), configuration=DV)
    lq.write(uri, pa.table({"x": list(range(10, 15))}), mode="append")
    dt = lq.DeltaTable(uri)
    dt.delete("x < 3")
    dt.update("x > 12", set={"x": "x + 100"})
    dt.optimize()
    history = dt.history()
    fig = plot_history(dt)
    top, bottom = fig.axes
    added, updated, removed = top.containers
    assert len(added) == len(updated) == len(removed) == len(history) == 5
    assert [b.get_height() for b in added] == [10, 5, 0, 0, 0]
    assert [b.get_height() for b in removed] == [0, 0, 3, 0, 0]
    assert [b.get_height() for b in updated] == [0, 0, 0, 2, 0]
    bytes_added, bytes_removed = bottom.containers
    metrics = [e.metrics for e in reversed(history)]
    assert bytes_added[0].get_height() == int(metrics[0]["numOutputBytes"])
    assert bytes_added[4].get_height() == int(metrics[4]["numAddedBytes"])
    assert bytes_removed[4].get_height() == -int(metrics[4]["numRemovedBytes"])
    labels = [t.get_text() for t in bottom.get_xticklabels()]
    assert labels[0].endswith("CREATE TABLE") and labels[-1] == "v4\nOPTIMIZE"
    # a History (or any list of entries) works too, newest `limit` kept
    assert len(plot_history(history, limit=2).axes[0].containers[0]) == 2


def test_history_counts_merge_and_delta_rs_metrics(tmp_path: Path) -> None:
    """MERGE's inserted rows, not its numOutputRows (which counts updated and copied
    rows too); delta-rs's snake_case metric names."""
    import deltalake

    uri = str(tmp_path / "m")
    lq.write(uri, pa.table({"id": [1, 2, 3]}))
    dt = lq.DeltaTable(uri)
    source = pa.table({"id": [3, 4, 5]})
    (
        dt.merge(source, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(set={"id": "s.id + 10"})
        .when_not_matched_insert_all()
        .execute()
    )
    added, updated, _ = plot_history(dt).axes[0].containers
    assert [b.get_height() for b in added] == [3, 2]
    assert [b.get_height() for b in updated] == [0, 1]
    rs = str(tmp_path / "rs")
    deltalake.write_deltalake(rs, pa.table({"id": [1, 2, 3]}))
    theirs = deltalake.DeltaTable(rs)
    theirs.delete("id = 1")
    theirs.update({"id": "id + 10"}, predicate="id = 2")
    added, updated, removed = plot_history(lq.DeltaTable(rs)).axes[0].containers
    assert [b.get_height() for b in added] == [3, 0, 0]
    assert [b.get_height() for b in removed] == [0, 1, 0]
    assert [b.get_height() for b in updated] == [0, 0, 1]


def _skipped_by_stats(snap: lq.Snapshot, column: str, value: int) -> int:
    """Files whose min/max statistics exclude ``column = value`` (computed from the log)."""
    skipped = 0
    for text in snap.files().column("stats").to_pylist():
        stats = json.loads(text)
        if not stats["minValues"][column] <= value <= stats["maxValues"][column]:
            skipped += 1
    return skipped


def test_pruning_before_and_after_zorder(tmp_path: Path) -> None:
    uri = str(tmp_path / "z")
    rng = np.random.default_rng(3)
    data = pa.table({"a": rng.integers(0, 1000, 4000), "b": rng.integers(0, 1000, 4000)})
    lq.write(uri, data.to_batches(max_chunksize=500), target_file_size=4000)
    before = lq.DeltaTable(uri).snapshot()
    assert before.num_files >= 4
    total = sum(before.files().column("size").to_pylist())
    lq.DeltaTable(uri).optimize(z_order_by=["a", "b"], target_file_size=total // 8)
    after = lq.DeltaTable(uri).snapshot()
    probes = data.slice(0, 5)
    filters = {col: [f"{col} = {v}" for v in probes.column(col).to_pylist()] for col in ("a", "b")}
    shares = pruning_shares({"before": before, "after": after}, filters)
    for name, snap in (("before", before), ("after", after)):
        for col in ("a", "b"):
            expected = np.mean(
                [
                    _skipped_by_stats(snap, col, v) / snap.num_files
                    for v in probes.column(col).to_pylist()
                ]
            )
            assert shares[name][col][0] == pytest.approx(expected)
    assert shares["after"]["a"][0] > shares["before"]["a"][0]
    fig = plot_pruning({"before": before, "after": after}, filters)
    ax = fig.axes[0]
    assert len(ax.patches) == 4  # 2 layouts x 2 filter groups
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx(
        [100 * shares[n][c][0] for n in ("before", "after") for c in ("a", "b")]
    )
    again = plot_pruning({"before": before, "after": after}, filters, shares=shares)
    assert [p.get_height() for p in again.axes[0].patches] == heights
    single = plot_pruning(after, "a = 1")
    assert len(single.axes[0].patches) == 1
    with pytest.raises(ValueError, match="no filters"):
        plot_pruning(after, {"a": []})


def test_missing_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "m")
    lq.write(uri, pa.table({"x": [1]}))
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails as if absent
    with pytest.raises(ImportError, match=r"pip install lakequery\[plots\]"):
        plot_file_sizes(lq.DeltaTable(uri))


def test_dollar_signs_in_labels_are_text(tmp_path: Path) -> None:
    """matplotlib reads $...$ as math: labels from the data escape their dollars, so they
    draw as written and one that is no valid math (``$\\frac$``) still draws; the axes'
    own labels (log-scale ticks, in mathtext) keep math."""
    import io

    from matplotlib.text import Text

    from lakequery.plots import plot_file_sizes

    uri = str(tmp_path / "t")
    bands = ["$5-$10", "$\\alpha$", "$\\frac$"]
    lq.write(uri, pa.table({"id": [1, 2, 3], "band": bands}), partition_by="band")
    big = pa.table({"id": list(range(20_000)), "band": ["x"] * 20_000})
    lq.write(uri, big, mode="append")  # files of very different sizes: a log axis
    fig = plot_file_sizes(lq.DeltaTable(uri))
    assert fig.axes[0].get_xscale() == "log"
    fig.savefig(io.BytesIO(), format="png")
    texts = {t.get_text() for t in fig.findobj(Text)}
    assert {"band=" + b.replace("$", "\\$") for b in bands} <= texts
    assert all(t.get_parse_math() for t in fig.findobj(Text))
