"""The ``lakequery`` command line: inspect, query and maintain Delta tables from a shell.

Every subcommand mirrors a public API call (``describe`` is :meth:`DeltaTable.snapshot`
and its files, ``optimize`` is :meth:`DeltaTable.optimize`, ...). Output is a table for
people, or JSON with ``--json`` for programs. Exit codes: 0 success, 1 a lakequery error
(one line on stderr; ``--debug`` shows the traceback), 2 a usage error.

Needs the ``cli`` extra (``pip install "lakequery[cli]"``: click).

Example (a shell)::

    lakequery describe ./events
    lakequery sql "SELECT kind, count(*) FROM e GROUP BY kind" --table e=./events
    lakequery --json history ./events --limit 5
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Runs the command line (the ``lakequery`` console script)."""
    try:
        from lakequery.cli.app import run
    except ModuleNotFoundError as exc:  # click is an optional extra
        if exc.name != "click":
            raise
        import sys

        sys.stderr.write('error: the command line needs click: pip install "lakequery[cli]"\n')
        raise SystemExit(1) from None
    run(argv)


__all__ = ["main"]
