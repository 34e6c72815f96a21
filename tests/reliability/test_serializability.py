"""Serializability of random concurrent histories (issue 18, item 3).

Several OS processes run seeded random mixes of appends, predicate overwrites, DELETE,
UPDATE, MERGE (deletion vectors and copy-on-write), OPTIMIZE, RESTORE and checkpoints
against one table, local and on the moto S3 server. :func:`histories.check_history`
then replays the committed operations serially in commit order on a pure-Python model
and compares every version (lakequery) and the final one (``deltalake``), checks every
reported commit is in the log exactly once at its version, and that the log holds no
commit nobody reported (so failed operations left nothing). See ``histories.py``.

The default run is bounded (3 processes x 8 operations; local: one Serializable and one
WriteSerializable seed; S3: one WriteSerializable seed); ``LAKEQUERY_SOAK=1`` runs more
seeds and longer histories. Figures are printed (``-s``).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import histories
import pytest

SOAK = os.environ.get("LAKEQUERY_SOAK") == "1"
PROCESSES = 4 if SOAK else 3
OPS = 20 if SOAK else 8
LEVELS = ("Serializable", "WriteSerializable")
LOCAL_RUNS = (
    [(seed, level) for seed in range(100, 110) for level in LEVELS]
    if SOAK
    else [(1, "Serializable"), (2, "WriteSerializable")]
)
S3_RUNS = (
    [(seed, level) for seed in range(200, 203) for level in LEVELS]
    if SOAK
    else [(3, "WriteSerializable")]
)

S3_FAULT_RUNS = (
    [(seed, level) for seed in range(300, 303) for level in LEVELS]
    if SOAK
    else [(4, "WriteSerializable")]
)

TOTALS: Counter[str] = Counter()


def run_and_check(
    uri: str,
    storage_options: dict[str, Any] | None,
    seed: int,
    level: str,
    workdir: Path,
    proxy: Any = None,
) -> Counter[str]:
    plans = histories.plan_history(seed, PROCESSES, OPS)
    run = histories.run_history(uri, storage_options, plans, workdir, level)
    if proxy is not None:  # check through the same endpoint, without faults
        run.stats.update(f"fault:{kind}:{fault}" for (kind, fault) in proxy.injected.elements())
        proxy.quiet()
    histories.check_history(uri, storage_options, run, faults=proxy is not None)
    TOTALS.update(run.stats)
    print(f"\nseed {seed} {level}: {histories.format_stats(run.stats)}")
    print(f"totals: {histories.format_stats(TOTALS)}")
    return run.stats


def test_plans_are_deterministic_and_cover_every_kind() -> None:
    assert histories.plan_history(7, 3, 8) == histories.plan_history(7, 3, 8)
    kinds = {op["kind"] for ops in histories.plan_history(7, 6, 20) for op in ops}
    assert kinds == set(histories.KINDS)


def test_model_replays_each_kind() -> None:
    state = histories.seed_state()
    rows = [[5000, 1], [5001, 2]]
    appended = histories.apply(state, {"kind": "append", "params": {"rows": rows}}, [state])
    assert appended[5000] == (1, 0) and len(appended) == len(state) + 2
    deleted = histories.apply(
        state, {"kind": "delete", "params": {"part": 1, "below": 50}}, [state]
    )
    assert all(not (p == 1 and v < 50) for v, p in deleted.values())
    assert len(deleted) < len(state)
    restored = histories.apply(appended, {"kind": "restore", "target": 0, "params": {}}, [state])
    assert restored == state


def test_write_serializable_replay_leaves_unseen_blind_appends_alone() -> None:
    state = {**histories.seed_state(), 5001: (1, 1)}  # 5001: a concurrent blind append
    delete = {"kind": "delete", "params": {"part": 1, "below": 50}}
    strict = histories.apply_unseen(state, delete, [state], set())
    relaxed = histories.apply_unseen(state, delete, [state], {5001})
    assert 5001 not in strict and relaxed[5001] == (1, 1)
    assert {i: vp for i, vp in relaxed.items() if i != 5001} == strict


def serial_run(uri: str, ops: list[dict[str, Any]]) -> histories.HistoryRun:
    """Runs ``ops`` one after the other in this process; records as the workers do."""
    created = histories.create_table(uri, None, "Serializable")
    records = [{**op, **histories.run_op(uri, None, op), "outcome": "ok"} for op in ops]
    return histories.HistoryRun(records=records, create_version=created)


SERIAL_OPS: list[dict[str, Any]] = [
    {"op": 1, "kind": "append", "params": {"rows": [[1000, 10], [1001, 90]]}},
    {"op": 2, "kind": "delete", "params": {"part": 0, "below": 50, "copy_on_write": False}},
    {"op": 3, "kind": "update", "params": {"part": 1, "below": 30, "copy_on_write": True}},
    {"op": 4, "kind": "restore", "params": {"back": 2}},
]


def test_checker_accepts_a_serial_history(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    run = histories.check_history(uri, None, serial_run(uri, SERIAL_OPS))
    assert run.stats["commits"] == 4 and run.stats["versions checked"] == 5


def test_checker_finds_a_commit_nobody_reported(tmp_path: Path) -> None:
    import lakequery as lq

    uri = str(tmp_path / "t")
    run = serial_run(uri, SERIAL_OPS)
    lq.write(uri, histories.arrow_rows([[9000, 1]]), mode="append")
    with pytest.raises(AssertionError, match=r"unreported commits: \[5\]"):
        histories.check_history(uri, None, run)


def test_checker_finds_a_wrong_effect(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    run = serial_run(uri, SERIAL_OPS)
    run.records[1]["params"] = {**run.records[1]["params"], "below": 100}  # not what ran
    with pytest.raises(AssertionError, match=r"version 2 .* differs from the serial replay"):
        histories.check_history(uri, None, run)


def test_checker_finds_a_version_reported_twice(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    run = serial_run(uri, SERIAL_OPS)
    run.records[2]["version"] = run.records[1]["version"]
    with pytest.raises(AssertionError, match="two operations report version 2"):
        histories.check_history(uri, None, run)


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "level"), LOCAL_RUNS)
def test_local_histories_are_serializable(tmp_path: Path, seed: int, level: str) -> None:
    stats = run_and_check(str(tmp_path / "t"), None, seed, level, tmp_path)
    assert stats["commits"] > 0


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "level"), S3_RUNS)
def test_s3_histories_are_serializable(
    tmp_path: Path,
    s3_table_uri: str,
    s3_storage_options: dict[str, Any],
    seed: int,
    level: str,
) -> None:
    stats = run_and_check(s3_table_uri, s3_storage_options, seed, level, tmp_path)
    assert stats["commits"] > 0


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "level"), S3_FAULT_RUNS)
def test_s3_histories_under_injected_faults_are_serializable(
    tmp_path: Path,
    moto_server: str,
    s3_table_uri: str,
    s3_storage_options: dict[str, Any],
    seed: int,
    level: str,
) -> None:
    """The same check with the store failing 3% of requests of every kind (errors before
    and after the store acted, dropped connections, delays, truncated bodies): retries and
    read-backs must keep every committed operation reported once and every failed one
    without a commit."""
    from fault_proxy import FAULTS, KINDS, FaultPlan, running_proxy

    with running_proxy(moto_server) as proxy:
        proxy.configure(FaultPlan(seed=seed, rates=dict.fromkeys(KINDS, 0.03), faults=FAULTS))
        options = {**s3_storage_options, "endpoint_url": proxy.url}
        stats = run_and_check(s3_table_uri, options, seed, level, tmp_path, proxy)
    assert stats["commits"] > 0
    assert sum(n for key, n in stats.items() if key.startswith("fault:")) > 0
