"""Random concurrent histories and their serializability checker (issue 18, item 3).

Run as ``python histories.py <json>`` this module is a worker process: it executes its
share of a planned history against one table and prints one JSON record per operation.
Imported, it plans histories (:func:`plan_history`), starts the workers
(:func:`run_history`) and checks the result (:func:`check_history`).

The table: rows ``id`` (unique), ``v`` and partition column ``p = id % 4``, deletion
vectors on, ``delta.isolationLevel`` ``Serializable`` or ``WriteSerializable``.

Every operation's effect is a deterministic function of the table state it applies to:

* ``append``: fresh ids (``op * 1000 + i``), blind.
* ``overwrite``: ``mode="overwrite", predicate="p = <a>"`` with fresh ids in partition a.
* ``delete`` / ``update``: predicates on ``p`` and ``v``; ``update`` sets ``v = v + 7``;
  each with deletion vectors or ``copy_on_write=True``.
* ``merge``: upsert keyed by ``id`` (``v`` from the source; new ids inserted).
* ``optimize``, ``checkpoint``: no logical change.
* ``restore``: to ``version = latest - back``, the target recorded by the worker.

The serial order the checker replays is the commit order (digest §17.2). On a
``Serializable`` table every commit applies to the whole state before it. On a
``WriteSerializable`` table a blind append may be ordered *after* a later data-changing
commit that did not see it: a commit at version N that read version R (its
``commitInfo.readVersion``) applies to the state before N *without* the rows of the
blind appends (``commitInfo.isBlindAppend``) committed in (R, N), which it leaves as
they are. That is the only relaxation; everything else must match exactly.

Versions are mapped to operations by the version each operation reported (versions are
unique), and cross-checked with ``commitInfo.operation``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = (
    "append",
    "overwrite",
    "delete",
    "update",
    "merge",
    "optimize",
    "restore",
    "checkpoint",
)
WEIGHTS = (4, 1, 2, 2, 2, 1, 1, 1)
SEED_ROWS = 40
PARTS = 4
# commitInfo.operation of each committing kind
OPERATIONS = {
    "append": {"WRITE"},
    "overwrite": {"WRITE"},
    "delete": {"DELETE"},
    "update": {"UPDATE"},
    "merge": {"MERGE"},
    "optimize": {"OPTIMIZE"},
    "restore": {"RESTORE"},
}
Row = tuple[int, int]  # (v, p) of an id
State = dict[int, Row]


# -- planning ------------------------------------------------------------------------------


def fresh_rows(op: int, n: int, rng: random.Random, part: int | None = None) -> list[list[int]]:
    """``n`` rows ``[id, v]`` with ids owned by operation ``op`` (never reused)."""
    ids = [op * 1000 + i for i in range(n * PARTS)]
    if part is not None:
        ids = [i for i in ids if i % PARTS == part]
    return [[i, rng.randrange(100)] for i in ids[:n]]


def plan_history(seed: int, processes: int, ops_per_process: int) -> list[list[dict[str, Any]]]:
    """Per process, its operations (``op``, ``kind``, ``params``); deterministic in seed."""
    rng = random.Random(seed)
    plans: list[list[dict[str, Any]]] = []
    next_op = 1
    for _ in range(processes):
        ops = []
        for _ in range(ops_per_process):
            kind = rng.choices(KINDS, WEIGHTS)[0]
            op = next_op
            next_op += 1
            params: dict[str, Any] = {}
            if kind == "append":
                params["rows"] = fresh_rows(op, rng.randint(1, 6), rng)
            elif kind == "overwrite":
                part = rng.randrange(PARTS)
                params = {"part": part, "rows": fresh_rows(op, rng.randint(1, 4), rng, part)}
            elif kind in ("delete", "update"):
                params = {
                    "part": rng.randrange(PARTS),
                    "below": rng.randrange(20, 100),
                    "copy_on_write": rng.random() < 0.4,
                }
            elif kind == "merge":
                # keys: seed ids (likely present) and fresh ones
                known = rng.sample(range(SEED_ROWS), 3)
                rows = [[i, rng.randrange(100, 200)] for i in known]
                rows += fresh_rows(op, 2, rng)
                params = {"rows": rows, "copy_on_write": rng.random() < 0.4}
            elif kind == "restore":
                params = {"back": rng.randint(1, 3)}
            ops.append({"op": op, "kind": kind, "params": params})
        plans.append(ops)
    return plans


def seed_state() -> State:
    return {i: ((i * 37) % 100, i % PARTS) for i in range(SEED_ROWS)}


def arrow_rows(rows: list[list[int]]) -> Any:
    import pyarrow as pa

    ids = [r[0] for r in rows]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.int64()),
            "p": pa.array([i % PARTS for i in ids], pa.int64()),
        }
    )


def state_table(state: State) -> Any:
    return arrow_rows([[i, vp[0]] for i, vp in sorted(state.items())])


def create_table(uri: str, storage_options: Mapping[str, Any] | None, isolation: str) -> int:
    import lakequery as lq

    result = lq.write(
        uri,
        state_table(seed_state()),
        partition_by=["p"],
        configuration={"delta.isolationLevel": isolation},
        storage_options=storage_options,
    )
    return result.version


# -- the model -----------------------------------------------------------------------------


def dml_predicate(params: Mapping[str, Any], kind: str) -> str:
    cmp = "<" if kind == "delete" else ">="
    return f"p = {params['part']} AND v {cmp} {params['below']}"


def dml_matches(kind: str, params: Mapping[str, Any], vp: Row) -> bool:
    v, p = vp
    if p != params["part"]:
        return False
    below = int(params["below"])
    return v < below if kind == "delete" else v >= below


def apply_unseen(
    state: State, rec: Mapping[str, Any], states: list[State], unseen: set[int]
) -> State:
    """:func:`apply`, leaving the ids in ``unseen`` (concurrent blind appends that a
    WriteSerializable commit did not read) out of the operation and as they were."""
    if not unseen:
        return apply(state, rec, states)
    kept = {i: vp for i, vp in state.items() if i in unseen}
    out = apply({i: vp for i, vp in state.items() if i not in unseen}, rec, states)
    return {**out, **kept}


def apply(state: State, rec: Mapping[str, Any], states: list[State]) -> State:
    """The model: ``rec``'s operation applied to ``state`` (``states``: by version)."""
    kind, params = rec["kind"], rec["params"]
    if kind == "append":
        return {**state, **{r[0]: (r[1], r[0] % PARTS) for r in params["rows"]}}
    if kind == "overwrite":
        kept = {i: vp for i, vp in state.items() if vp[1] != params["part"]}
        return {**kept, **{r[0]: (r[1], r[0] % PARTS) for r in params["rows"]}}
    if kind == "delete":
        return {i: vp for i, vp in state.items() if not dml_matches(kind, params, vp)}
    if kind == "update":
        return {
            i: ((vp[0] + 7, vp[1]) if dml_matches(kind, params, vp) else vp)
            for i, vp in state.items()
        }
    if kind == "merge":
        return {**state, **{r[0]: (r[1], r[0] % PARTS) for r in params["rows"]}}
    if kind == "restore":
        return dict(states[rec["target"]])
    return state  # optimize, checkpoint


def changes_nothing(state: State, rec: Mapping[str, Any], states: list[State]) -> bool:
    return apply(state, rec, states) == state


# -- the worker ----------------------------------------------------------------------------


def emit(**record: Any) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def run_op(uri: str, opts: Mapping[str, Any] | None, job: Mapping[str, Any]) -> dict[str, Any]:
    """Executes one operation; returns its outcome (``version``/``committed``/``target``)."""
    import lakequery as lq

    kind, params = job["kind"], job["params"]
    dt = lq.DeltaTable(uri, storage_options=opts)
    if kind == "append":
        w = lq.write(dt, arrow_rows(params["rows"]), mode="append")
        return {"version": w.version, "committed": not w.skipped}
    if kind == "overwrite":
        w = lq.write(
            dt, arrow_rows(params["rows"]), mode="overwrite", predicate=f"p = {params['part']}"
        )
        return {"version": w.version, "committed": not w.skipped}
    if kind == "delete":
        m = dt.delete(dml_predicate(params, kind), copy_on_write=params["copy_on_write"])
        return {"version": m.version, "committed": m.committed}
    if kind == "update":
        m = dt.update(
            dml_predicate(params, kind),
            set={"v": "v + 7"},
            copy_on_write=params["copy_on_write"],
        )
        return {"version": m.version, "committed": m.committed}
    if kind == "merge":
        mm = (
            dt.merge(
                arrow_rows(params["rows"]),
                on="target.id = source.id",
                copy_on_write=params["copy_on_write"],
            )
            .when_matched_update(set={"v": "source.v"})
            .when_not_matched_insert_all()
            .execute()
        )
        return {"version": mm.version, "committed": mm.committed}
    if kind == "optimize":
        o = dt.optimize()
        return {"version": o.version, "committed": o.version is not None}
    if kind == "restore":
        target = max(0, dt.snapshot().version - params["back"])
        r = dt.restore(version=target)
        return {"version": r.version, "committed": r.version is not None, "target": target}
    if kind == "checkpoint":
        c = dt.checkpoint()
        return {"version": c.version, "committed": False, "checkpoint": True}
    raise ValueError(f"unknown operation kind {kind!r}")


def worker_main(job: Mapping[str, Any]) -> None:
    import lakequery as lq
    from lakequery.errors import CommitConflictError, LakeQueryError

    uri, opts = job["uri"], job.get("storage_options")
    lq.DeltaTable(uri, storage_options=opts).snapshot()  # warm imports and clients
    emit(ready=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(job["go"]):
        if time.monotonic() > deadline:
            raise TimeoutError("start signal never came")
        time.sleep(0.002)
    for op in job["ops"]:
        rec = dict(op)
        try:
            rec.update(run_op(uri, opts, op))
            rec["outcome"] = "ok"
        except LakeQueryError as exc:
            rec.update(outcome="failed", error=type(exc).__name__, message=str(exc)[:300])
            rec["conflict"] = isinstance(exc, CommitConflictError)
        except Exception as exc:  # an unexpected class is itself a finding
            rec.update(outcome="crashed", error=type(exc).__name__, message=str(exc)[:300])
        emit(**rec)


# -- running and checking ------------------------------------------------------------------


@dataclass
class HistoryRun:
    """What the workers reported, and the figures of the check."""

    records: list[dict[str, Any]]
    create_version: int
    isolation: str = "Serializable"
    stats: Counter[str] = field(default_factory=Counter)


def run_history(
    uri: str,
    storage_options: Mapping[str, Any] | None,
    plans: list[list[dict[str, Any]]],
    workdir: Path,
    isolation: str = "Serializable",
) -> HistoryRun:
    """Creates the table, runs one worker process per plan at once, collects records."""
    create_version = create_table(uri, storage_options, isolation)
    go = workdir / f"go-{os.getpid()}-{time.monotonic_ns()}"
    procs = []
    for ops in plans:
        job = {"uri": uri, "storage_options": storage_options, "ops": ops, "go": str(go)}
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, json.dumps(job)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            _, err = proc.communicate(timeout=60)
            raise AssertionError(f"history worker died before it was ready:\n{err}")
    go.touch()
    records: list[dict[str, Any]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"history worker failed:\n{err}"
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        records += lines
    return HistoryRun(records=records, create_version=create_version, isolation=isolation)


def table_state(table: Any) -> State:
    cols = table.select(["id", "v", "p"]).to_pydict()
    ids = cols["id"]
    assert len(ids) == len(set(ids)), "duplicated ids in the table"
    return {i: (v, p) for i, v, p in zip(ids, cols["v"], cols["p"], strict=True)}


def deltalake_state(uri: str, storage_options: Mapping[str, Any] | None) -> State:
    import deltalake
    import pyarrow as pa

    from lakequery.storage.s3 import polars_options

    opts = polars_options(storage_options) if storage_options else None
    dt = deltalake.DeltaTable(uri, storage_options=opts)
    query = deltalake.QueryBuilder().register("t", dt)
    return table_state(pa.table(query.execute("SELECT id, v, p FROM t")))


def check_history(
    uri: str, storage_options: Mapping[str, Any] | None, run: HistoryRun, *, faults: bool = False
) -> HistoryRun:
    """Asserts the history is serializable in commit order; fills ``run.stats``.

    With ``faults`` (the store failed requests on purpose) an operation may also fail with
    a ``StorageError``; it must then have left no commit, like a lost race.
    """
    import lakequery as lq

    records = run.records
    stats = run.stats
    stats["histories"] += 1
    stats.update(f"op:{r['kind']}" for r in records)
    crashed = [r for r in records if r["outcome"] == "crashed"]
    assert not crashed, f"operations raised non-LakeQueryError exceptions: {crashed}"
    failed = [r for r in records if r["outcome"] == "failed"]
    # without faults the only acceptable failure is a lost, conflicting race; with them a
    # StorageError naming what failed too (never "outcome unknown" at these rates)
    storage = ("StorageError", "ObjectNotFoundError")
    others = [r for r in failed if not r["conflict"] and not (faults and r["error"] in storage)]
    assert not others, f"operations failed with errors other than commit conflicts: {others}"
    stats.update(f"failed:{r['error']}" for r in failed)
    committed = [r for r in records if r["outcome"] == "ok" and r["committed"]]
    by_version: dict[int, dict[str, Any]] = {}
    for r in committed:
        assert r["version"] not in by_version, (
            f"two operations report version {r['version']}: {by_version[r['version']]} and {r}"
        )
        by_version[r["version"]] = r
    stats["commits"] += len(committed)

    dt = lq.DeltaTable(uri, storage_options=storage_options)
    latest = dt.snapshot().version
    history = {e.version: e for e in dt.history()}
    infos = {v: e.info for v, e in history.items()}
    expected_versions = set(range(run.create_version + 1, latest + 1))
    assert set(by_version) == expected_versions, (
        f"log versions {sorted(expected_versions)} but operations report "
        f"{sorted(by_version)} (unreported commits: {sorted(expected_versions - set(by_version))})"
    )
    states: list[State] = [seed_state()]
    for version in range(run.create_version + 1, latest + 1):
        rec = by_version[version]
        info = infos[version]
        op = history[version].operation
        assert op in OPERATIONS[rec["kind"]], f"v{version} is {op} but op {rec} reported it"
        assert info.get("isolationLevel") in (run.isolation, "SnapshotIsolation"), info
        unseen: set[int] = set()
        if run.isolation == "WriteSerializable" and not info.get("isBlindAppend"):
            read = int(info.get("readVersion", version - 1))
            for w in range(read + 1, version):
                if infos[w].get("isBlindAppend"):
                    unseen.update(r[0] for r in by_version[w]["params"]["rows"])
            stats["blind appends unseen by a later commit"] += len(
                [w for w in range(read + 1, version) if infos[w].get("isBlindAppend")]
            )
        after = apply_unseen(states[-1], rec, states, unseen)
        if unseen and after != apply(states[-1], rec, states):
            stats["commits that did not see a blind append"] += 1  # the relaxation mattered
        states.append(after)
    for version, expected in enumerate(states):
        got = table_state(dt.snapshot(version=version).scan().to_arrow())
        assert got == expected, (
            f"version {version} ({by_version.get(version, 'create')}) differs from the serial "
            f"replay: missing {sorted(set(expected) - set(got))[:10]}, extra "
            f"{sorted(set(got) - set(expected))[:10]}, changed "
            f"{sorted(i for i in set(got) & set(expected) if got[i] != expected[i])[:10]}"
        )
        stats["versions checked"] += 1
    assert deltalake_state(uri, storage_options) == states[-1], "deltalake reads otherwise"
    # operations that made no commit: the state they read must leave them nothing to do
    for r in records:
        if r["outcome"] == "ok" and not r["committed"] and r["version"] is not None:
            if r["kind"] != "checkpoint":
                assert changes_nothing(states[r["version"]], r, states), (
                    f"{r} reported no change at v{r['version']}, but the replay changes rows"
                )
            stats[f"noop:{r['kind']}"] += 1
    return run


def format_stats(stats: Counter[str]) -> str:
    return ", ".join(f"{k}={stats[k]}" for k in sorted(stats))


if __name__ == "__main__":
    worker_main(json.loads(sys.argv[1]))
