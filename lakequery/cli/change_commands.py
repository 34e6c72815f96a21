"""Subcommands that change a table: write, delete, update, optimize, vacuum, restore,
checkpoint, convert.

Each prints the command's typed result (the same object the API returns) as a key/value
table or, with ``--json``, as JSON. Long ones (optimize, vacuum) draw a progress bar on
stderr when it is a terminal.
"""

from __future__ import annotations

import os
from typing import Any

import click

from lakequery.cli.context import Options, key_values, pass_options
from lakequery.cli.output import emit_result

_FORMATS = ("csv", "parquet", "json")


def _read_file(source: str, fmt: str | None) -> Any:
    """A DuckDB relation over a CSV, Parquet or (newline-delimited) JSON file or glob."""
    from lakequery.duckdb_databases import engine_cursor

    if fmt is None:
        ext = os.path.splitext(source.rstrip("/"))[1].lower().lstrip(".")
        fmt = {"ndjson": "json", "jsonl": "json", "pq": "parquet"}.get(ext, ext)
    if fmt not in _FORMATS:
        raise click.BadParameter(
            f"cannot tell the format of {source!r}: pass --format {'/'.join(_FORMATS)}",
            param_hint="--format",
        )
    con = engine_cursor()
    reader = {"csv": con.read_csv, "parquet": con.read_parquet, "json": con.read_json}[fmt]
    return reader(source)


@click.command("write")
@click.argument("path")
@click.argument("source")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), help="Default: from the name.")
@click.option(
    "--mode",
    type=click.Choice(["error", "append", "overwrite", "ignore"]),
    default="error",
    show_default=True,
    help="What to do when the table exists.",
)
@click.option("--partition-by", metavar="A,B", help="Partition columns of a new table.")
@click.option("--where", "predicate", metavar="PREDICATE", help="Overwrite only these rows.")
@click.option("--merge-schema", is_flag=True, help="Add new columns, widen types.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE")
@pass_options
def write_cmd(
    opts: Options,
    path: str,
    source: str,
    fmt: str | None,
    mode: str,
    partition_by: str | None,
    predicate: str | None,
    merge_schema: bool,
    properties: tuple[str, ...],
) -> None:
    """Write a CSV, Parquet or JSON file (or glob) to the table at PATH."""
    from lakequery.writer import write

    rel = _read_file(source, fmt)
    result = write(
        path,
        rel,
        mode=mode,  # type: ignore[arg-type]
        partition_by=[c.strip() for c in partition_by.split(",")] if partition_by else None,
        predicate=predicate,
        schema_mode="merge" if merge_schema else None,
        configuration=key_values(properties, "--property") or None,
        storage_options=opts.storage_options or None,
    )
    emit_result(opts.json, "write", result)


@click.command("delete")
@click.argument("path")
@click.option("--where", "predicate", metavar="PREDICATE", help="Which rows to delete.")
@click.option("--all", "all_rows", is_flag=True, help="Delete every row (no --where).")
@click.option("--copy-on-write", is_flag=True, help="Rewrite files instead of writing DVs.")
@pass_options
def delete_cmd(
    opts: Options, path: str, predicate: str | None, all_rows: bool, copy_on_write: bool
) -> None:
    """DELETE rows matching --where (deletion vectors when the table has them)."""
    if (predicate is None) == (not all_rows):
        raise click.UsageError("pass --where PREDICATE, or --all to delete every row")
    result = opts.table(path).delete(predicate, copy_on_write=copy_on_write)
    emit_result(opts.json, "delete", result)


@click.command("update")
@click.argument("path")
@click.option(
    "--set",
    "assignments",
    multiple=True,
    required=True,
    metavar="COLUMN=EXPR",
    help="A column and its new value as SQL (repeatable).",
)
@click.option("--where", "predicate", metavar="PREDICATE", help="Which rows (default: all).")
@click.option("--copy-on-write", is_flag=True, help="Rewrite files instead of writing DVs.")
@pass_options
def update_cmd(
    opts: Options,
    path: str,
    assignments: tuple[str, ...],
    predicate: str | None,
    copy_on_write: bool,
) -> None:
    """UPDATE rows: --set col=expr for those matching --where."""
    result = opts.table(path).update(
        predicate, set=key_values(assignments, "--set"), copy_on_write=copy_on_write
    )
    emit_result(opts.json, "update", result)


@click.command("optimize")
@click.argument("path")
@click.option("--where", "predicate", metavar="PREDICATE", help="Only these partitions.")
@click.option("--zorder-by", metavar="A,B", help="Cluster the files on these columns.")
@click.option(
    "--curve",
    type=click.Choice(["zorder", "hilbert"]),
    default="zorder",
    show_default=True,
    help="Space-filling curve for --zorder-by.",
)
@click.option("--target-size", type=int, metavar="BYTES", help="Target bytes per file.")
@pass_options
def optimize_cmd(
    opts: Options,
    path: str,
    predicate: str | None,
    zorder_by: str | None,
    curve: str,
    target_size: int | None,
) -> None:
    """OPTIMIZE: compact small files, or Z-order / Hilbert-cluster them."""
    result = opts.table(path).optimize(
        predicate=predicate,
        target_file_size=target_size,
        z_order_by=[c.strip() for c in zorder_by.split(",")] if zorder_by else None,
        curve=curve,  # type: ignore[arg-type]
    )
    emit_result(opts.json, "optimize", result)


@click.command("vacuum")
@click.argument("path")
@click.option("--retention-hours", type=float, help="Default: the table's (7 days).")
@click.option("--execute", is_flag=True, help="Delete the files (default: a dry run).")
@click.option(
    "--no-enforce-retention",
    "unenforced",
    is_flag=True,
    help="Allow a retention shorter than the table's (readers of older versions may fail).",
)
@pass_options
def vacuum_cmd(
    opts: Options, path: str, retention_hours: float | None, execute: bool, unenforced: bool
) -> None:
    """VACUUM: list (or, with --execute, delete) files no retained version needs."""
    result = opts.table(path).vacuum(
        retention_hours=retention_hours, dry_run=not execute, enforce_retention=not unenforced
    )
    emit_result(opts.json, "vacuum" if execute else "vacuum (dry run)", result)


@click.command("restore")
@click.argument("path")
@click.option("--version", "version", type=int, help="The version to restore.")
@click.option("--as-of", "as_of", metavar="TIME", help="Or the version current at this time.")
@pass_options
def restore_cmd(opts: Options, path: str, version: int | None, as_of: str | None) -> None:
    """RESTORE the table to an older version (one new commit)."""
    if (version is None) == (as_of is None):
        raise click.UsageError("pass exactly one of --version and --as-of")
    result = opts.table(path).restore(version=version, as_of=as_of)
    emit_result(opts.json, "restore", result)


@click.command("checkpoint")
@click.argument("path")
@pass_options
def checkpoint_cmd(opts: Options, path: str) -> None:
    """Write a checkpoint of the latest version."""
    emit_result(opts.json, "checkpoint", opts.table(path).checkpoint())


@click.command("convert")
@click.argument("path")
@click.option(
    "--partition-by",
    metavar="A,B",
    help="Partition columns (Hive directories); types inferred from the values.",
)
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE")
@pass_options
def convert_cmd(
    opts: Options, path: str, partition_by: str | None, properties: tuple[str, ...]
) -> None:
    """CONVERT TO DELTA: make a folder of Parquet files a table, in place."""
    from lakequery.management.convert import convert_to_delta

    table = convert_to_delta(
        path,
        partition_by=[c.strip() for c in partition_by.split(",")] if partition_by else None,
        configuration=key_values(properties, "--property") or None,
        storage_options=opts.storage_options or None,
    )
    emit_result(opts.json, "convert", table.detail())
