"""What every subcommand shares: the group's options and opening the table it names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from lakequery.snapshot import Snapshot
    from lakequery.table import DeltaTable

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Options:
    """What the group's options say, handed to every subcommand (``ctx.obj``)."""

    json: bool = False
    debug: bool = False
    storage_options: dict[str, str] = field(default_factory=dict)

    def table(self, path: str) -> DeltaTable:
        """The table at ``path`` with the ``--storage-option`` values."""
        from lakequery.table import DeltaTable

        return DeltaTable(path, storage_options=self.storage_options or None)


pass_options = click.make_pass_decorator(Options, ensure=True)


def snapshot_options(func: F) -> F:
    """``--version`` / ``--as-of`` for a subcommand that reads one snapshot."""
    func = click.option(
        "--as-of", "as_of", metavar="TIME", help="The version current at this ISO-8601 time."
    )(func)
    func = click.option("--version", "version", type=int, help="Read this table version.")(func)
    return func


def open_snapshot(opts: Options, path: str, version: int | None, as_of: str | None) -> Snapshot:
    """The snapshot a subcommand reads."""
    return opts.table(path).snapshot(version=version, as_of=as_of)


def key_values(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        out[key.strip()] = value
    return out
