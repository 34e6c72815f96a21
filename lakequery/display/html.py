"""HTML for Jupyter: one renderer per object, behind the classes' ``_repr_html_``.

Every value that comes from a table (column names, paths, partition values, operation
parameters, properties) goes through :func:`esc`, so a column called ``<b>`` shows as
text. Storage options are never rendered: a table opened with credentials shows only how
many options it has and their names, never a value.

Example:
    >>> import lakequery as lq
    >>> html = snapshot_html(lq.DeltaTable(lq.demo.example_table()).snapshot())
    >>> "partition" in html and "day" in html
    True
    >>> esc("<b>")
    '&lt;b&gt;'
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from lakequery.display.facts import file_facts, format_bytes, partition_summary

if TYPE_CHECKING:
    from lakequery.cdf import ChangeScan
    from lakequery.history import CommitEntry
    from lakequery.scan import Scan, ScanPlan
    from lakequery.snapshot import Snapshot
    from lakequery.table import DeltaTable

#: Rows shown in a file, partition or history listing before "... N more".
MAX_ROWS = 20
#: Commits shown under a table's "last operations".
LAST_OPERATIONS = 5
_STYLE = (
    "<style>.lq-box{font-family:var(--jp-ui-font-family,sans-serif);font-size:13px}"
    ".lq-box table{border-collapse:collapse;margin:4px 0}"
    ".lq-box th,.lq-box td{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}"
    ".lq-box .lq-num{text-align:right;font-variant-numeric:tabular-nums}"
    ".lq-box summary{cursor:pointer;font-weight:600}</style>"
)


# --- small helpers ---------------------------------------------------------------------------


def esc(value: Any) -> str:
    """Text made safe for HTML (``<``, ``>``, ``&`` and quotes escaped)."""
    return html.escape(str(value), quote=True)


def short(value: Any, limit: int = 80) -> str:
    """A one-line text of at most ``limit`` characters (JSON for containers)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def number(n: Any) -> str:
    """An integer with thousands separators; other values as text."""
    return f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else esc(n)


def box(title: str, *parts: str) -> str:
    """The outer frame: an escaped title then already-built HTML parts."""
    return f'{_STYLE}<div class="lq-box"><strong>{esc(title)}</strong>{"".join(parts)}</div>'


def fields(rows: Iterable[tuple[str, str]]) -> str:
    """A two-column table of label -> value; values are HTML already (escape first)."""
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def grid(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, total: int | None = None) -> str:
    """A table with a header row; every cell is escaped (numbers right-aligned)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    count = 0
    for row in rows:
        count += 1
        cells = []
        for v in row:
            if isinstance(v, int | float) and not isinstance(v, bool):
                cells.append(f'<td class="lq-num">{number(v)}</td>')
            else:
                cells.append(f"<td>{esc('' if v is None else v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = ""
    if total is not None and total > count:
        more = f"<tr><td colspan={len(headers)}>… {total - count:,} more</td></tr>"
    return f"<table><tr>{head}</tr>{''.join(body)}{more}</table>"


def section(title: str, body: str, *, open: bool = False) -> str:
    """A collapsible part (``<details>``)."""
    flag = " open" if open else ""
    return f"<details{flag}><summary>{esc(title)}</summary>{body}</details>"


# --- renderers ---------------------------------------------------------------------------------


def _schema_grid(snap: Snapshot) -> str:
    parts = set(snap.partition_columns)
    rows = [
        (f.name, str(f.type), "yes" if f.nullable else "no", "partition" if f.name in parts else "")
        for f in snap.schema
    ]
    return grid(["column", "type", "nullable", ""], rows)


def _partitions_grid(snap: Snapshot) -> str:
    summary = partition_summary(snap.files(), snap.partition_columns)
    rows = summary.slice(0, MAX_ROWS).to_pylist()
    return grid(
        ["partition", "files", "size", "rows", "deleted rows"],
        (
            (r["partition"], r["files"], format_bytes(r["bytes"]), r["rows"], r["deleted_rows"])
            for r in rows
        ),
        total=summary.num_rows,
    )


def _features(snap: Snapshot) -> str:
    p = snap.protocol
    names = sorted(p.effective_features())
    return esc(f"reader {p.min_reader_version}, writer {p.min_writer_version}") + (
        " · " + esc(", ".join(names)) if names else ""
    )


def clustering_columns(snap: Snapshot) -> list[str]:
    """Liquid clustering columns (logical names); empty when the table is not clustered
    or its clustering domain is malformed (the display never raises for it)."""
    from lakequery.clustering.domain import clustering_columns as logical
    from lakequery.errors import CorruptLogError

    try:
        return logical(snap) or []
    except CorruptLogError:
        return []


def snapshot_summary(snap: Snapshot) -> list[tuple[str, str]]:
    """Label -> HTML value of what a person asks first about a snapshot."""
    facts = file_facts(snap.files())
    info = snap.commit_info or {}
    rows = [
        ("version", number(snap.version)),
        ("committed", esc(snap.timestamp.isoformat() if snap.timestamp else "unknown")),
        ("operation", esc(info.get("operation", "unknown"))),
        ("partitioned by", esc(", ".join(snap.partition_columns) or "(not partitioned)")),
        *(
            [("clustered by", esc(", ".join(clustering)))]
            if (clustering := clustering_columns(snap))
            else []
        ),
        ("files", f"{number(facts.num_files)} ({esc(format_bytes(facts.total_bytes))})"),
        ("rows", number(facts.live_rows) if facts.live_rows is not None else "unknown"),
    ]
    if facts.files_with_dv:
        rows.append(
            (
                "deletion vectors",
                f"{number(facts.files_with_dv)} files hide {number(facts.deleted_rows)} rows",
            )
        )
    rows.append(("protocol", _features(snap)))
    return rows


def snapshot_html(snap: Snapshot, *, title: str | None = None) -> str:
    """A snapshot: summary, schema (partition columns marked), partitions, properties."""
    parts = [fields(snapshot_summary(snap)), section("schema", _schema_grid(snap), open=True)]
    if snap.partition_columns:
        parts.append(section("partitions", _partitions_grid(snap)))
    config = snap.metadata.configuration
    if config:
        parts.append(section("properties", grid(["property", "value"], sorted(config.items()))))
    return box(title or f"Snapshot {snap.table_uri} @ version {snap.version}", *parts)


def _options_note(dt: DeltaTable) -> list[tuple[str, str]]:
    options = dt.storage_options
    if not options:
        return []
    names = ", ".join(sorted(str(k) for k in options))
    return [("storage options", esc(f"{len(options)} set ({names}; values hidden)"))]


def table_html(dt: DeltaTable) -> str:
    """A table: its latest snapshot and last operations (never its storage options)."""
    from lakequery.errors import LakeQueryError

    try:
        snap = dt.snapshot()
        entries = dt.history(limit=LAST_OPERATIONS)
    except LakeQueryError as exc:
        return box(f"DeltaTable {dt.uri}", fields([*_options_note(dt), ("error", esc(exc))]))
    parts = [
        fields([*snapshot_summary(snap), *_options_note(dt)]),
        section("schema", _schema_grid(snap), open=True),
    ]
    if snap.partition_columns:
        parts.append(section("partitions", _partitions_grid(snap)))
    parts.append(section("last operations", _history_grid(entries), open=True))
    config = snap.metadata.configuration
    if config:
        parts.append(section("properties", grid(["property", "value"], sorted(config.items()))))
    return box(f"DeltaTable {dt.uri}", *parts)


def _history_grid(entries: Sequence[CommitEntry], total: int | None = None) -> str:
    rows = (
        (
            e.version,
            e.timestamp.isoformat(timespec="seconds"),
            e.operation or "",
            short(e.parameters) if e.parameters else "",
            short(e.metrics) if e.metrics else "",
        )
        for e in entries[:MAX_ROWS]
    )
    return grid(
        ["version", "timestamp", "operation", "parameters", "metrics"], rows, total=len(entries)
    )


def history_html(entries: Sequence[CommitEntry]) -> str:
    """Commits newest first: version, time, operation, parameters and metrics."""
    if not entries:
        return box("History (no commits)")
    span = f"versions {entries[-1].version}..{entries[0].version}"
    return box(f"History: {len(entries)} commits ({span})", _history_grid(entries))


def _files_grid(files: Any, partition_columns: Sequence[str]) -> str:
    from lakequery.display.facts import partition_labels
    from lakequery.engines.deletion import dv_cardinalities

    head = files.slice(0, MAX_ROWS)
    labels = partition_labels(head, partition_columns).to_pylist()
    deleted = dv_cardinalities(head).to_pylist()
    rows = zip(
        head.column("path").to_pylist(),
        labels,
        (format_bytes(s) for s in head.column("size").to_pylist()),
        head.column("num_records").to_pylist(),
        deleted,
        strict=True,
    )
    return grid(["path", "partition", "size", "rows", "deleted rows"], rows, total=files.num_rows)


def _plan_parts(plan: ScanPlan) -> list[str]:
    facts = file_facts(plan.files)
    share = plan.skipped_files / plan.total_files if plan.total_files else 0.0
    partition_columns: list[str] = []
    if "partition_values" in plan.files.column_names:
        partition_columns = [f.name for f in plan.files.schema.field("partition_values").type]
    summary = [
        ("files read", f"{number(plan.num_files)} of {number(plan.total_files)}"),
        ("files skipped", f"{number(plan.skipped_files)} ({share:.0%})"),
        ("bytes read", esc(format_bytes(facts.total_bytes))),
        ("rows (before filter)", number(facts.live_rows) if facts.live_rows is not None else "?"),
    ]
    return [fields(summary), section("files", _files_grid(plan.files, partition_columns))]


def scan_plan_html(plan: ScanPlan) -> str:
    """Files read vs skipped by pruning, bytes and rows to read, the first files."""
    return box("ScanPlan", *_plan_parts(plan))


def scan_html(scan: Scan) -> str:
    """A scan: version, columns, filter, then its plan."""
    filt = scan.filter_source
    head = fields(
        [
            ("version", number(scan.snapshot.version)),
            ("columns", esc(", ".join(scan.columns))),
            ("filter", esc(filt if filt is not None else "(none)")),
        ]
    )
    return box(f"Scan of {scan.snapshot.table_uri}", head, *_plan_parts(scan.plan()))


def change_scan_html(changes: ChangeScan) -> str:
    """A change feed: the version range, output columns and files to read."""
    schema = changes.output_schema
    return box(
        f"ChangeScan: versions {changes.starting_version}..{changes.ending_version}",
        fields(
            [
                ("versions", esc(f"{changes.starting_version}..{changes.ending_version}")),
                ("files to read", number(changes.num_files)),
                ("columns", number(len(schema))),
            ]
        ),
        section("schema", grid(["column", "type"], ((f.name, str(f.type)) for f in schema))),
    )


_BYTE_FIELDS = ("bytes", "size")


def metrics_html(result: Any) -> str:
    """Any command result dataclass: one row per field (sizes in readable units, long
    tuples of locations summarised)."""
    rows = []
    for f in dataclasses.fields(result):
        value = getattr(result, f.name)
        if isinstance(value, tuple) and len(value) > 3:
            shown = esc(f"{len(value):,} items: " + ", ".join(map(str, value[:3])) + ", …")
        elif isinstance(value, int) and any(w in f.name for w in _BYTE_FIELDS):
            shown = f"{number(value)} ({esc(format_bytes(value))})"
        elif isinstance(value, tuple):
            shown = esc(", ".join(map(str, value)) or "(none)")
        else:
            shown = number(value) if value is not None else "none"
        rows.append((f.name.replace("_", " "), shown))
    return box(type(result).__name__, fields(rows))
