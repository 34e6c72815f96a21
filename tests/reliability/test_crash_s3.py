"""Crash points on S3: the writer dies right before or right after each request that
changes the store (PUT, POST, DELETE), through the fault proxy's crash mode.

At request ``k`` the proxy drops the connection, before forwarding the request or after
the server acted on it, and drops every later request too: to the store the writer is
dead. Retries are off (``lakequery.retries=0``). Afterwards, without faults, the table
reads as before or as after the command, the next writer succeeds and VACUUM leaves no
unreferenced file. A subset of the commands of ``test_crash_points`` (which covers every
command and every call on ``memory://``); ``LAKEQUERY_SOAK=1`` crashes at every request.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter

import pytest
import reliability_figures
from commands import (
    APPEND,
    CHECKPOINT,
    CREATE,
    DELETE,
    Command,
    Rows,
    check_after_crash,
    read_rows,
)
from conftest import ProxiedTable
from fault_proxy import FaultPlan

SOAK = os.environ.get("LAKEQUERY_SOAK") == "1"
MUTATING = ("PUT", "POST", "DELETE")


def _start(p: ProxiedTable, opts: dict) -> Rows:
    CREATE.run(p.uri, opts)
    APPEND.run(p.uri, opts)
    return APPEND.expect(CREATE.expect([]))


def _fresh(p: ProxiedTable, n: int) -> ProxiedTable:
    """Another table location in the same bucket (one bucket per test is enough)."""
    return ProxiedTable(f"{p.uri}-{n}", p.options, p.proxy)


@pytest.mark.parametrize("cmd", [APPEND, DELETE, CHECKPOINT], ids=lambda c: c.name)
def test_crash_at_each_s3_write(proxied: ProxiedTable, cmd: Command) -> None:
    opts = proxied.with_retries(0)
    counting = _fresh(proxied, 0)
    before = _start(counting, opts)
    after = cmd.expect(before)
    counting.proxy.configure(FaultPlan())
    cmd.run(counting.uri, opts)
    log = list(counting.proxy.log)
    counting.proxy.quiet()
    assert read_rows(counting.uri, opts) == after
    points = [i + 1 for i, (kind, _, _) in enumerate(log) if SOAK or kind in MUTATING]
    outcomes: Counter[str] = Counter()
    n = 0
    for k in points:
        for when in ("before", "after"):
            n += 1
            table = _fresh(proxied, n)
            _start(table, opts)
            table.proxy.configure(FaultPlan(crash_at=k, crash_when=when))
            # the store is gone: how the command fails does not matter
            with contextlib.suppress(Exception):
                cmd.run(table.uri, opts)
            dead = table.proxy.dead
            table.proxy.quiet()
            outcomes["crashed" if dead else "finished_first"] += 1
            label = f"{cmd.name} on S3 crashed {when} request {k} ({log[k - 1][0]})"
            check_after_crash(table.uri, before, after, label, opts)
    kinds = Counter(kind for kind, _, _ in log)
    reliability_figures.add(
        "s3_crash_points",
        {
            f"{cmd.name}:requests": len(log),
            **{f"{cmd.name}:{k}": kinds[k] for k in MUTATING if kinds[k]},
            f"{cmd.name}:crash_points": outcomes["crashed"] + outcomes["finished_first"],
        },
    )
