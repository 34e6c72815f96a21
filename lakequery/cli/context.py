"""What every subcommand shares: the group's options and opening the table it names."""

from __future__ import annotations

import json
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
    storage_options: dict[str, Any] = field(default_factory=dict)

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


def storage_values(options: dict[str, str]) -> dict[str, Any]:
    """``--storage-option`` values as s3fs takes them: ``true`` / ``false`` (any case) as
    booleans, a JSON object or array (``client_kwargs={"region_name": "eu-west-1"}``) as
    its value; anything else (keys, secrets, numbers, URLs) stays text.

    Raises:
        click.BadParameter: a value that starts like JSON but does not parse.
    """
    out: dict[str, Any] = {}
    for key, value in options.items():
        text = value.strip()
        if text.lower() in ("true", "false"):
            out[key] = text.lower() == "true"
        elif text[:1] in ("{", "["):
            try:
                out[key] = json.loads(text)
            except ValueError as exc:
                raise click.BadParameter(
                    f"{key}={value!r} is not valid JSON: {exc}", param_hint="--storage-option"
                ) from None
        else:
            out[key] = value
    return out


def key_values(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        out[key.strip()] = value
    return out
