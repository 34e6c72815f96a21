"""Every command on an S3 table through the fault proxy: right result or StorageError.

The proxy injects every fault kind (5xx answers, SlowDown, dropped connections before
and after the server acted, delays, truncated bodies) into every request kind at a
seeded rate. After each command the table is read without faults: when the command
succeeded it must hold exactly the expected rows; when it raised ``StorageError`` it
must hold the rows from before or the expected rows after (a commit whose outcome could
not be learnt), and nothing else. Any other exception is a failure. At the end a quiet
VACUUM (retention 0) leaves no orphaned data file.

``LAKEQUERY_SOAK=1`` runs more seeds.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
import reliability_figures
from commands import (
    APPEND,
    CHECKPOINT,
    CLEANUP,
    CREATE,
    DELETE,
    MERGE,
    OPTIMIZE,
    OVERWRITE,
    UPDATE,
    VACUUM,
    Command,
    Rows,
    read_rows,
    restore_to,
    unreferenced,
    version_of,
)
from conftest import ProxiedTable
from fault_proxy import KINDS, FaultPlan

from lakequery.errors import StorageError

SOAK = os.environ.get("LAKEQUERY_SOAK") == "1"
#: (seed, lakequery.retries, fault rate per request): retried faults, then faults that
#: exhaust the retries often enough to exercise the StorageError path.
RUNS = [(11, 4, 0.12), (12, 1, 0.25)]
if SOAK:
    RUNS += [(100 + s, s % 3, 0.1 + 0.05 * (s % 4)) for s in range(12)]


def _run(p: ProxiedTable, seed: int, step: int, rate: float, cmd: Command, opts: dict) -> bool:
    """Run ``cmd`` under faults; True if it succeeded, False if it raised StorageError."""
    p.proxy.configure(FaultPlan(seed=seed * 1000 + step, rates=dict.fromkeys(KINDS, rate)))
    try:
        cmd.run(p.uri, opts)
    except StorageError as exc:
        assert exc.uri and exc.operation, exc  # names what failed
        return False
    finally:
        reliability_figures.add(
            "faults_injected", {f"{k}:{f}": n for (k, f), n in p.proxy.injected.items()}
        )
        reliability_figures.add("requests_under_faults", {"requests": p.proxy.seen})
        p.proxy.quiet()
    return True


@pytest.mark.parametrize(("seed", "retries", "rate"), RUNS)
def test_every_command_under_faults(
    proxied: ProxiedTable, seed: int, retries: int, rate: float
) -> None:
    opts = proxied.with_retries(retries)
    outcomes: Counter[str] = Counter()
    # The table is created without faults so every later step has a table to act on.
    CREATE.run(proxied.uri, opts)
    rows: Rows = CREATE.expect([])
    versions: dict[int, Rows] = {0: rows}
    plan = [APPEND, DELETE, UPDATE, MERGE, OVERWRITE, CHECKPOINT, OPTIMIZE, "restore", APPEND]
    plan += [VACUUM, CLEANUP, "read"]
    for step, item in enumerate(plan):
        if item == "read":  # a snapshot read under faults: right rows or StorageError
            proxied.proxy.configure(
                FaultPlan(seed=seed * 1000 + step, rates=dict.fromkeys(KINDS, rate))
            )
            try:
                got = read_rows(proxied.uri, opts)
            except StorageError:
                outcomes["read:StorageError"] += 1
            else:
                assert got == rows
                outcomes["read:ok"] += 1
            proxied.proxy.quiet()
            continue
        if item == "restore":  # to version 2, or the newest older one if steps failed
            older = [v for v in versions if v <= 2 and v < max(versions)]
            if not older:
                continue
            cmd = restore_to(max(older), versions[max(older)])
        else:
            cmd = item
        assert isinstance(cmd, Command)
        after = cmd.expect(rows)
        ok = _run(proxied, seed, step, rate, cmd, opts)
        actual = read_rows(proxied.uri, opts)
        if ok:
            assert actual == after, cmd.name
        else:
            assert actual in (rows, after), cmd.name
        if ok:
            outcomes[f"{cmd.name}:ok"] += 1
        else:  # did the failed command's commit land (its answer lost) or not?
            landed = actual != rows and actual == after
            outcomes[f"{cmd.name}:StorageError:{'landed' if landed else 'nothing'}"] += 1
        rows = actual
        versions[version_of(proxied.uri, opts)] = rows
    reliability_figures.add("command_outcomes_under_faults", outcomes)
    # Whatever failed half-way left only orphans, which a quiet VACUUM removes.
    VACUUM.run(proxied.uri, opts)
    assert unreferenced(proxied.uri, opts) == set()
    assert read_rows(proxied.uri, opts) == rows
