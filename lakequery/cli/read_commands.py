"""Subcommands that read: describe, history, files, schema, head, sql, changes, stream."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from lakequery.cli.context import Options, key_values, open_snapshot, pass_options, snapshot_options
from lakequery.cli.output import (
    arrow_records,
    emit_arrow,
    print_json,
    print_line,
    print_mapping,
    print_rows,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from lakequery.snapshot import Snapshot

_FILTER_HELP = "A SQL predicate (DuckDB dialect) over the table's columns."


def _columns(value: str | None) -> list[str] | None:
    return [c.strip() for c in value.split(",") if c.strip()] if value else None


def _file_rows(files: pa.Table) -> pa.Table:
    """Path, size, records, rows deleted by DVs and partition values per file."""
    import pyarrow as pa

    from lakequery import arrow_kernels as pc
    from lakequery.engines.deletion import dv_cardinalities

    deleted = dv_cardinalities(files)
    out = {
        "path": files.column("path"),
        "size": files.column("size"),
        "num_records": files.column("num_records"),
        "deleted_rows": deleted,
    }
    fixed = {*out, "stats"}
    if "partition_values" in files.column_names:
        parts = files.column("partition_values")
        for i in range(parts.type.num_fields):
            name = parts.type.field(i).name  # as deltalake's flattened actions, on a clash
            out[f"partition.{name}" if name in fixed else name] = pc.struct_field(parts, [i])
    out["stats"] = files.column("stats")
    return pa.table(out)


def describe_data(snap: Snapshot) -> dict[str, Any]:
    """What ``describe`` shows, as plain data: DESCRIBE DETAIL plus the version's time, the
    schema, the rows and what deletion vectors hide."""
    from lakequery import arrow_kernels as pc
    from lakequery.management.detail import describe_detail

    detail = describe_detail(snap)
    dvs = snap.files().column("deletion_vector")
    deleted = pc.sum(pc.struct_field(dvs, "cardinality")).as_py() or 0
    records = snap.num_records()
    return {
        "location": detail.location,
        "version": detail.version,
        "timestamp": snap.timestamp,
        "name": detail.name,
        "description": detail.description,
        "id": detail.id,
        "schema": [
            {"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in snap.schema
        ],
        "partition_columns": list(detail.partition_columns),
        "clustering_columns": list(detail.clustering_columns),
        "min_reader_version": detail.min_reader_version,
        "min_writer_version": detail.min_writer_version,
        "table_features": list(detail.table_features),
        "properties": dict(detail.properties),
        "num_files": detail.num_files,
        "size_in_bytes": detail.size_in_bytes,
        "num_records": records,
        "files_with_deletion_vectors": int(
            pc.sum(pc.is_valid(pc.struct_field(dvs, "storageType"))).as_py() or 0
        ),
        "rows_deleted_by_deletion_vectors": deleted,
        # of the rows the files hold, the share deletion vectors hide
        "deletion_vector_share": (
            deleted / (records + deleted) if records is not None and records + deleted else 0.0
        ),
    }


@click.command("describe")
@click.argument("path")
@snapshot_options
@pass_options
def describe_cmd(opts: Options, path: str, version: int | None, as_of: str | None) -> None:
    """Version, schema, partitioning, protocol, properties, files and DV share."""
    data = describe_data(open_snapshot(opts, path, version, as_of))
    if opts.json:
        print_json(data)
        return
    schema = data.pop("schema")
    print_mapping(f"{path} at version {data['version']}", data)
    print_rows(
        ["column", "type", "nullable"],
        [(f["name"], f["type"], f["nullable"]) for f in schema],
        title="schema",
    )


@click.command("history")
@click.argument("path")
@click.option("--limit", type=click.IntRange(min=0), help="Only the newest N commits.")
@pass_options
def history_cmd(opts: Options, path: str, limit: int | None) -> None:
    """The table's commits, newest first."""
    entries = opts.table(path).history(limit=limit)
    if opts.json:
        print_json(
            [
                {
                    "version": e.version,
                    "timestamp": e.timestamp,
                    "operation": e.operation,
                    "parameters": e.parameters,
                    "metrics": e.metrics,
                }
                for e in entries
            ]
        )
        return
    print_rows(
        ["version", "timestamp", "operation", "parameters", "metrics"],
        [(e.version, e.timestamp, e.operation, e.parameters, e.metrics) for e in entries],
    )


@click.command("files")
@click.argument("path")
@click.option("--filter", "filter_", metavar="PREDICATE", help=_FILTER_HELP + " Show kept files.")
@snapshot_options
@pass_options
def files_cmd(
    opts: Options, path: str, filter_: str | None, version: int | None, as_of: str | None
) -> None:
    """Live data files with their statistics; with --filter, what pruning keeps."""
    snap = open_snapshot(opts, path, version, as_of)
    if filter_:
        plan = snap.scan(filter=filter_).plan()
        files, total = plan.files, plan.total_files
    else:
        files = snap.files()
        total = files.num_rows
    rows = _file_rows(files)
    if opts.json:
        print_json({"total_files": total, "kept_files": files.num_rows, "files": rows.to_pylist()})
        return
    emit_arrow(False, rows.drop_columns(["stats"]))
    print_line(f"{files.num_rows} of {total} files" + (" kept by the filter" if filter_ else ""))


@click.command("schema")
@click.argument("path")
@snapshot_options
@pass_options
def schema_cmd(opts: Options, path: str, version: int | None, as_of: str | None) -> None:
    """The table's columns (Arrow types) and partition columns."""
    snap = open_snapshot(opts, path, version, as_of)
    parts = set(snap.partition_columns)
    fields = [
        {"name": f.name, "type": str(f.type), "nullable": f.nullable, "partition": f.name in parts}
        for f in snap.schema
    ]
    if opts.json:
        print_json(fields)
    else:
        print_rows(
            ["column", "type", "nullable", "partition"],
            [(f["name"], f["type"], f["nullable"], f["partition"]) for f in fields],
        )


@click.command("head")
@click.argument("path")
@click.option(
    "-n",
    "--rows",
    "n",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="How many rows.",
)
@click.option("--columns", metavar="A,B", help="Only these columns.")
@click.option("--filter", "filter_", metavar="PREDICATE", help=_FILTER_HELP)
@snapshot_options
@pass_options
def head_cmd(
    opts: Options,
    path: str,
    n: int,
    columns: str | None,
    filter_: str | None,
    version: int | None,
    as_of: str | None,
) -> None:
    """The first rows of the table."""
    from lakequery.duckdb_databases import engine_cursor

    snap = open_snapshot(opts, path, version, as_of)
    con = engine_cursor(utc=True)  # timestamps in UTC, as stream/changes/history print them
    try:
        rel = snap.scan(columns=_columns(columns), filter=filter_).to_duckdb(con)
        emit_arrow(opts.json, rel.limit(n).to_arrow_table())
    finally:
        con.close()


@click.command("sql")
@click.argument("query")
@click.option(
    "-t",
    "--table",
    "tables",
    multiple=True,
    metavar="NAME=PATH",
    help="A table visible to the query under NAME (repeatable).",
)
@snapshot_options
@pass_options
def sql_cmd(
    opts: Options, query: str, tables: tuple[str, ...], version: int | None, as_of: str | None
) -> None:
    """DuckDB SQL over one or more tables (--version / --as-of apply to each of them)."""
    from lakequery.sql import sql_over

    named = {
        name: open_snapshot(opts, uri, version, as_of)
        for name, uri in key_values(tables, "--table").items()
    }
    rel = sql_over(query, named)
    emit_arrow(opts.json, rel.to_arrow_table())


@click.command("changes")
@click.argument("path")
@click.option("--from-version", "start", type=int, help="First version (inclusive).")
@click.option("--to-version", "end", type=int, help="Last version (inclusive; latest).")
@click.option("--from-time", "start_time", metavar="TIME", help="Or the first commit at/after.")
@click.option("--to-time", "end_time", metavar="TIME", help="Or the last commit at/before.")
@click.option("--columns", metavar="A,B", help="Only these columns (plus the change columns).")
@click.option("--filter", "filter_", metavar="PREDICATE", help=_FILTER_HELP)
@pass_options
def changes_cmd(
    opts: Options,
    path: str,
    start: int | None,
    end: int | None,
    start_time: str | None,
    end_time: str | None,
    columns: str | None,
    filter_: str | None,
) -> None:
    """The change data feed of a version range (_change_type, _commit_version, ...)."""
    scan = opts.table(path).changes(
        starting_version=start,
        ending_version=end,
        starting_timestamp=start_time,
        ending_timestamp=end_time,
        columns=_columns(columns),
        filter=filter_,
    )
    data = scan.to_arrow()
    if "_commit_version" in data.column_names:
        data = data.sort_by([("_commit_version", "ascending")])
    emit_arrow(opts.json, data)


def _offset(value: str | None) -> str | dict[str, Any] | None:
    """``--offset``: a line the command printed (``{"offset": {...}}``) or the offset
    itself; anything else goes on to ``StreamOffset.parse``, which names what is wrong."""
    if value is None:
        return None
    try:
        doc = json.loads(value)
    except ValueError:
        return value
    if isinstance(doc, dict) and set(doc) == {"offset"} and isinstance(doc["offset"], dict):
        return dict(doc["offset"])
    return value


@click.command("stream")
@click.argument("path")
@click.option("--from-version", "start", type=int, help="Start at this version's changes.")
@click.option(
    "--offset",
    help='Resume after a stored offset: an {"offset": ...} line of --json output, or its value.',
)
@click.option("--follow", is_flag=True, help="Keep polling for new commits (Ctrl-C stops).")
@click.option("--poll-interval", default=1.0, show_default=True, help="Seconds between polls.")
@click.option("--max-files", type=int, help="At most this many files per batch.")
@click.option("--columns", metavar="A,B", help="Only these columns.")
@click.option("--filter", "filter_", metavar="PREDICATE", help=_FILTER_HELP)
@click.option("--change-feed", is_flag=True, help="Stream the change data feed.")
@click.option(
    "--ignore-deletes", is_flag=True, help="Pass over commits that only remove whole files."
)
@click.option(
    "--skip-change-commits", is_flag=True, help="Pass over every commit that removes rows."
)
@pass_options
def stream_cmd(
    opts: Options,
    path: str,
    start: int | None,
    offset: str | None,
    follow: bool,
    poll_interval: float,
    max_files: int | None,
    columns: str | None,
    filter_: str | None,
    change_feed: bool,
    ignore_deletes: bool,
    skip_change_commits: bool,
) -> None:
    """The table as a message queue: its rows, then each new commit's, batch by batch.

    With --json every row is one JSON line; a line {"offset": ...} after each batch can
    be passed back with --offset to resume (the whole line, or the value of "offset").
    """
    batches = opts.table(path).stream(
        starting_version=start,
        starting_offset=_offset(offset),
        columns=_columns(columns),
        filter=filter_,
        max_files_per_batch=max_files,
        read_change_feed=change_feed,
        ignore_deletes=ignore_deletes,
        skip_change_commits=skip_change_commits,
        follow=follow,
        poll_interval=poll_interval,
    )
    try:
        for batch in batches:
            data = batch.to_arrow()
            if opts.json:
                for row in arrow_records(data):
                    print_json(row)
                print_json({"offset": json.loads(batch.offset.to_json())})
            else:
                title = f"versions {batch.start_version}..{batch.end_version}"
                emit_arrow(False, data, title=title)
    except KeyboardInterrupt:  # Ctrl-C ends a followed stream: the shell's 128 + SIGINT
        raise SystemExit(130) from None
