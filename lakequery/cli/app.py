"""The command group: global options, one-line errors and exit codes.

Decision: errors lakequery raises on purpose (:class:`~lakequery.LakeQueryError`),
DuckDB's errors (the user's SQL and input files: a missing table, a syntax error, a file
that is not Parquet) and bad argument values (``ValueError``) print ``error: <class>:
<message>`` on stderr and exit with 1 (2 for a bad value, as click does for usage
errors); anything else is a bug and keeps its traceback. ``--debug`` shows the traceback
for every error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from lakequery.cli.change_commands import (
    checkpoint_cmd,
    convert_cmd,
    delete_cmd,
    optimize_cmd,
    restore_cmd,
    update_cmd,
    vacuum_cmd,
    write_cmd,
)
from lakequery.cli.context import Options, key_values, storage_values
from lakequery.cli.read_commands import (
    changes_cmd,
    describe_cmd,
    files_cmd,
    head_cmd,
    history_cmd,
    schema_cmd,
    sql_cmd,
    stream_cmd,
)
from lakequery.errors import LakeQueryError

EXIT_ERROR = 1
EXIT_USAGE = 2


class _Group(click.Group):
    """Turns expected errors into one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            expected = isinstance(exc, LakeQueryError | ValueError) or _duckdb_error(exc)
            opts = ctx.find_object(Options)
            if not expected or (opts is not None and opts.debug):
                raise
            message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            click.echo(f"error: {type(exc).__name__}: {message}", err=True)  # one line
            code = (
                EXIT_USAGE
                if isinstance(exc, ValueError) and not isinstance(exc, LakeQueryError)
                else EXIT_ERROR
            )
            raise SystemExit(code) from None


def _duckdb_error(exc: Exception) -> bool:
    """Whether DuckDB raised ``exc``: in the CLI that is the user's SQL (``sql``) or input
    file (``write``): a missing table or file, a syntax error, a file that is not Parquet.
    (DuckDB is only looked up: a command that never imported it raised none of its errors.)"""
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(exc, duckdb.Error)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lakequery", prog_name="lakequery")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
@click.option(
    "-s",
    "--storage-option",
    "storage_option",
    multiple=True,
    metavar="KEY=VALUE",
    help=(
        "An object-store option (s3fs), e.g. endpoint_url=http://127.0.0.1:5000; true and "
        "false are booleans and a JSON object is a mapping (client_kwargs={...})."
    ),
)
@click.pass_context
def cli(ctx: click.Context, as_json: bool, debug: bool, storage_option: tuple[str, ...]) -> None:
    """Inspect, query and maintain Delta Lake tables."""
    ctx.obj = Options(
        json=as_json,
        debug=debug,
        storage_options=storage_values(key_values(storage_option, "--storage-option")),
    )


for _command in (
    describe_cmd,
    history_cmd,
    files_cmd,
    schema_cmd,
    head_cmd,
    sql_cmd,
    changes_cmd,
    stream_cmd,
    write_cmd,
    delete_cmd,
    update_cmd,
    optimize_cmd,
    vacuum_cmd,
    restore_cmd,
    checkpoint_cmd,
    convert_cmd,
):
    cli.add_command(_command)


def run(argv: Sequence[str] | None = None) -> None:
    """Runs the group with ``argv`` (default ``sys.argv[1:]``) and exits."""
    cli.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="lakequery")
