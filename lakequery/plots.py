"""Plots of a table, as matplotlib Figures (the optional ``plots`` extra).

``pip install lakequery[plots]`` brings matplotlib; without it each function raises an
``ImportError`` saying so. Every function returns a :class:`matplotlib.figure.Figure`
built without ``pyplot`` (no global figure state: Jupyter shows the returned figure once,
scripts call ``fig.savefig(...)``). The data is prepared with Arrow kernels over the
snapshot's file table (:mod:`lakequery.display.facts`).

- :func:`plot_file_sizes` -- every file's size, one row per partition.
- :func:`plot_deleted_rows` -- live vs deleted rows of each file with a deletion vector.
- :func:`plot_history` -- rows and bytes added and removed per commit, with operations.
- :func:`plot_pruning` -- share of files skipped by filters on one or more layouts
  (e.g. before and after Z-order).

Example:
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import lakequery as lq
    >>> from lakequery.plots import plot_file_sizes
    >>> fig = plot_file_sizes(lq.DeltaTable(lq.demo.example_table()))
    >>> len(fig.axes[0].collections[0].get_offsets())  # one point per file
    4
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakequery.display.facts import format_bytes, partition_labels
from lakequery.engines.deletion import dv_cardinalities

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from lakequery.history import CommitEntry
    from lakequery.snapshot import Snapshot
    from lakequery.table import DeltaTable

#: Files shown at most by :func:`plot_deleted_rows` (the ones with most deleted rows).
MAX_DV_FILES = 40

# operationMetrics names per meaning, first present wins (WRITE, DML, MERGE, OPTIMIZE,
# RESTORE as lakequery, Spark and delta-rs write them). MERGE's own names come first: its
# numOutputRows counts the updated and copied rows too.
ROWS_ADDED = (
    "numTargetRowsInserted",
    "num_target_rows_inserted",
    "numInsertedRows",
    "numOutputRows",
    "num_added_rows",
)
ROWS_REMOVED = (
    "numTargetRowsDeleted",
    "num_target_rows_deleted",
    "numDeletedRows",
    "num_deleted_rows",
)
ROWS_UPDATED = (
    "numTargetRowsUpdated",
    "num_target_rows_updated",
    "numUpdatedRows",
    "num_updated_rows",
)
BYTES_ADDED = ("numOutputBytes", "numAddedBytes", "numTargetBytesAdded", "restoredFilesSize")
BYTES_REMOVED = ("numRemovedBytes", "numTargetBytesRemoved", "removedFilesSize")


def _figure(**kwargs: Any) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            "lakequery's plots need matplotlib: pip install lakequery[plots]"
        ) from exc
    return Figure(layout="constrained", **kwargs)


def _text(label: str) -> str:
    """A label from the data drawn as written: matplotlib reads ``$...$`` as math (a
    partition ``band=$5-$10`` came out as math, ``$\\frac$`` failed to draw), and an
    escaped dollar is a dollar. (Turning math off for the whole figure would also print
    log-axis ticks as ``$\\mathdefault{10^{3}}$``.)"""
    return label.replace("$", r"\$")


def _snapshot(source: DeltaTable | Snapshot) -> Snapshot:
    from lakequery.table import DeltaTable

    return source.snapshot() if isinstance(source, DeltaTable) else source


def plot_file_sizes(source: DeltaTable | Snapshot, *, max_partitions: int = 30) -> Figure:
    """Every live file's size as a point, one row per partition (the first
    ``max_partitions`` by name), with the median marked: small-file problems and skewed
    partitions show at a glance.

    Args:
        source: a table (its latest snapshot) or a snapshot.
        max_partitions: partitions drawn at most.
    """
    snap = _snapshot(source)
    files = snap.files()
    total = format_bytes(float(pc.sum(files.column("size")).as_py() or 0))
    labels = partition_labels(files, snap.partition_columns)
    names = pc.unique(labels).sort().slice(0, max_partitions)
    keep = pc.is_in(labels, value_set=names)
    labels = labels.filter(keep)
    sizes = np.asarray(files.column("size").filter(keep).to_numpy(), dtype=np.float64)
    row = np.asarray(pc.index_in(labels, value_set=names).to_numpy(zero_copy_only=False))
    rng = np.random.default_rng(0)
    jitter = rng.uniform(-0.2, 0.2, row.size)
    fig = _figure(figsize=(8, 1.2 + 0.35 * max(len(names), 1)))
    ax = fig.add_subplot()
    ax.scatter(sizes, row + jitter, s=14, alpha=0.7)
    for i in range(len(names)):  # one median tick per partition
        in_row = sizes[row == i]
        if in_row.size:
            ax.plot([np.median(in_row)] * 2, [i - 0.35, i + 0.35], color="black", lw=1.5)
    ax.set_yticks(range(len(names)), [_text(str(n)) for n in names.to_pylist()])
    ax.invert_yaxis()
    if sizes.size and sizes.max() > 20 * max(sizes.min(), 1):
        ax.set_xscale("log")
    ax.set_xlabel("file size (bytes)")
    ax.set_title(f"{snap.num_files} files, {total} (version {snap.version}); | = median")
    return fig


def plot_deleted_rows(source: DeltaTable | Snapshot, *, max_files: int = MAX_DV_FILES) -> Figure:
    """Live and deleted rows of each file with a deletion vector (the ``max_files`` with
    the most deleted rows), as stacked bars: what DELETE/UPDATE/MERGE left for OPTIMIZE
    to purge.

    Args:
        source: a table (its latest snapshot) or a snapshot.
        max_files: files drawn at most.
    """
    snap = _snapshot(source)
    files = snap.files()
    deleted = dv_cardinalities(files)
    with_dv = files.filter(pc.greater(deleted, pa.scalar(0, pa.int64())))
    table = pa.table(
        {
            "path": with_dv.column("path"),
            "rows": with_dv.column("num_records").cast(pa.int64()),
            "deleted": dv_cardinalities(with_dv),
        }
    ).sort_by([("deleted", "descending"), ("path", "ascending")])
    all_deleted = int(pc.sum(table.column("deleted")).as_py() or 0)
    all_rows = int(pc.sum(table.column("rows")).as_py() or 0)
    share = all_deleted / max(all_rows, 1)
    table = table.slice(0, max_files)
    dele = np.asarray(table.column("deleted").to_numpy(), dtype=np.int64)
    rows: Any = pc.fill_null(table.column("rows"), pa.scalar(0, pa.int64()))
    live = np.asarray(rows.to_numpy(), dtype=np.int64) - dele
    fig = _figure(figsize=(8, 4))
    ax = fig.add_subplot()
    x = np.arange(table.num_rows)
    ax.bar(x, live, label="live rows", color="tab:blue")
    ax.bar(x, dele, bottom=live, label="deleted rows (DV)", color="tab:red")
    paths = _short_names([str(p) for p in table.column("path").to_pylist()])
    ax.set_xticks(x, [_text(p) for p in paths])
    ax.tick_params(axis="x", labelrotation=60, labelsize=7)
    ax.set_ylabel("rows")
    shown = f", {table.num_rows} drawn" if table.num_rows < with_dv.num_rows else ""
    ax.set_title(
        f"{with_dv.num_rows} of {snap.num_files} files carry a deletion vector "
        f"({share:.1%} of their rows deleted{shown})"
    )
    ax.legend()
    return fig


def _short_names(paths: Sequence[str], width: int = 10) -> list[str]:
    """File names without directories and the ``part-00000-`` prefix, cut to ``width``."""
    return [re.sub(r"^part-\d+-", "", p.rsplit("/", 1)[-1])[:width] for p in paths]


def _first_metric(metrics: Any, names: Sequence[str]) -> np.ndarray[Any, Any]:
    """Per commit, the first of ``names`` present in the metrics map, as int (0 when
    none is)."""
    out: Any = pa.nulls(len(metrics), pa.int64())
    for name in names:  # per metric name, not per commit
        found: Any = pc.map_lookup(metrics, pa.scalar(name), "first")
        out = pc.coalesce(out, pc.cast(found, pa.int64()))
    return np.asarray(pc.fill_null(out, pa.scalar(0, pa.int64())).to_numpy(), dtype=np.int64)


def plot_history(source: DeltaTable | Sequence[CommitEntry], *, limit: int = 50) -> Figure:
    """A timeline of commits (oldest left): rows added, updated and removed on top,
    bytes added and removed below, each bar labelled with its operation. Figures come
    from ``commitInfo.operationMetrics`` (commits without them show empty bars).

    Args:
        source: a table (its history) or a :class:`~lakequery.history.History`.
        limit: newest commits drawn at most.
    """
    from lakequery.history import History
    from lakequery.table import DeltaTable

    if isinstance(source, DeltaTable):
        entries = source.history(limit=limit)
    else:
        entries = History(source[:limit])
    table = entries.to_arrow()[::-1]
    metrics = table.column("metrics").combine_chunks()
    versions = np.asarray(table.column("version").to_numpy(), dtype=np.int64)
    x = np.arange(len(versions))
    added = _first_metric(metrics, ROWS_ADDED)
    updated = _first_metric(metrics, ROWS_UPDATED)
    removed = _first_metric(metrics, ROWS_REMOVED)
    b_added = _first_metric(metrics, BYTES_ADDED)
    b_removed = _first_metric(metrics, BYTES_REMOVED)
    fig = _figure(figsize=(max(6, 0.5 * len(x) + 2), 6))
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.bar(x - 0.27, added, width=0.27, label="rows added", color="tab:green")
    top.bar(x, updated, width=0.27, label="rows updated", color="tab:orange")
    top.bar(x + 0.27, removed, width=0.27, label="rows removed", color="tab:red")
    top.set_ylabel("rows")
    top.legend(fontsize=8)
    bottom.bar(x - 0.2, b_added, width=0.4, label="bytes added", color="tab:green")
    bottom.bar(x + 0.2, -b_removed, width=0.4, label="bytes removed", color="tab:red")
    bottom.axhline(0, color="black", lw=0.8)
    bottom.set_ylabel("bytes (removed below 0)")
    bottom.legend(fontsize=8)
    ops = table.column("operation").to_pylist()
    bottom.set_xticks(x, [_text(f"v{v}\n{op or '?'}") for v, op in zip(versions, ops, strict=True)])
    bottom.tick_params(axis="x", labelsize=7)
    top.set_title(f"history: {len(x)} commits")
    return fig


def pruning_shares(
    layouts: Mapping[str, DeltaTable | Snapshot],
    filters: str | Sequence[str] | Mapping[str, Sequence[str]],
) -> dict[str, dict[str, tuple[float, float]]]:
    """Per layout, per filter group: (mean share of files skipped, mean files read).

    ``filters`` is one SQL filter, a list of them (each its own group) or a mapping of
    group name to filters whose shares are averaged (the paper's Figure 5: one group per
    column, each a set of point queries).
    """
    groups = _filter_groups(filters)
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for name, source in layouts.items():
        snap = _snapshot(source)
        per_group = {}
        for group, exprs in groups.items():  # one plan per filter (queries, not rows)
            plans = [snap.scan(filter=f).plan() for f in exprs]
            total = max(snap.num_files, 1)
            skipped = float(np.mean([p.skipped_files / total for p in plans]))
            read = float(np.mean([p.num_files for p in plans]))
            per_group[group] = (skipped, read)
        out[name] = per_group
    return out


def _filter_groups(
    filters: str | Sequence[str] | Mapping[str, Sequence[str]],
) -> dict[str, list[str]]:
    if isinstance(filters, str):
        return {filters: [filters]}
    if isinstance(filters, Mapping):
        groups = {str(k): list(v) for k, v in filters.items()}
        empty = [k for k, v in groups.items() if not v]
        if empty:
            raise ValueError(f"filter group {empty[0]!r} has no filters")
        return groups
    return {f: [f] for f in filters}


def plot_pruning(
    layouts: Mapping[str, DeltaTable | Snapshot] | DeltaTable | Snapshot,
    filters: str | Sequence[str] | Mapping[str, Sequence[str]],
    *,
    shares: Mapping[str, Mapping[str, tuple[float, float]]] | None = None,
) -> Figure:
    """Share of files each filter lets a scan skip, one bar per layout and filter group,
    labelled with the files read: compare a table before and after OPTIMIZE / Z-order.

    Args:
        layouts: ``{"before": snap0, "after": snap1}`` (tables or snapshots), or one.
        filters: a SQL filter, a list, or ``{group: [filters...]}`` averaged per group.
        shares: the result of :func:`pruning_shares` for these layouts and filters, when
            already computed (the scans are then not planned again).

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import lakequery as lq
        >>> from lakequery.plots import plot_pruning
        >>> dt = lq.DeltaTable(lq.demo.example_table())
        >>> fig = plot_pruning(dt, ["day = DATE '2026-11-02'", "id < 3"])
        >>> len(fig.axes[0].patches)  # one bar per filter
        2
    """
    if not isinstance(layouts, Mapping):
        layouts = {"table": layouts}
    if shares is None:
        shares = pruning_shares(layouts, filters)
    groups = list(_filter_groups(filters))
    width = 0.8 / max(len(shares), 1)
    x = np.arange(len(groups))
    fig = _figure(figsize=(min(12, max(6, 0.8 * len(groups) * len(shares) + 2)), 4))
    ax = fig.add_subplot()
    for i, (name, per_group) in enumerate(shares.items()):
        values = [100 * per_group[g][0] for g in groups]
        offset = (i - (len(shares) - 1) / 2) * width
        bars = ax.bar(x + offset, values, width=width, label=_text(name))
        ax.bar_label(bars, labels=[f"{per_group[g][1]:.3g} read" for g in groups], fontsize=7)
    ax.set_xticks(x, [_text(g) for g in groups])
    ax.set_ylim(0, 110)
    ax.set_ylabel("files skipped (%)")
    ax.set_title("pruning: share of files skipped per filter")
    if len(shares) > 1:
        ax.legend()
    return fig


__all__ = [
    "plot_deleted_rows",
    "plot_file_sizes",
    "plot_history",
    "plot_pruning",
    "pruning_shares",
]
