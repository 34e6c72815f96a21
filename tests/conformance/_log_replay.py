"""A deliberately small, independent replay of a Delta log, for the test harness only.

It answers one question the harness needs without going through lakequery: which ``add``
actions are live at a version, and do any of them carry a deletion vector? (Deletion-vector
cases are marked xfail until DV decoding lands.) It reads JSON commits and, when the
commits before a version were cleaned up, the newest usable checkpoint (classic single- or
multi-part, or V2 parquet/JSON with sidecars).

It is not a reader: no protocol checks, no schema handling, no data files. Its answers are
validated against the manifest's ``active_files`` / ``log_stats_row_count`` in
``test_harness.py``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(parquet|json)$")


@dataclass(frozen=True)
class LiveFile:
    path: str
    num_records: int | None
    dv_cardinality: int | None  # None: no deletion vector


@dataclass(frozen=True)
class ReplayResult:
    version: int
    files: tuple[LiveFile, ...]

    @property
    def has_deletion_vectors(self) -> bool:
        return any(f.dv_cardinality is not None for f in self.files)

    @property
    def stats_row_count(self) -> int | None:
        if any(f.num_records is None for f in self.files):
            return None
        return sum(f.num_records or 0 for f in self.files) - sum(
            f.dv_cardinality or 0 for f in self.files
        )


def _dv_id(dv: dict[str, Any] | None) -> str | None:
    if not dv:
        return None
    offset = dv.get("offset")
    return f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}" + (
        f"@{offset}" if offset is not None else ""
    )


def _num_records(add: dict[str, Any]) -> int | None:
    stats = add.get("stats")
    if stats:
        value = json.loads(stats).get("numRecords")
        if value is not None:
            return int(value)
    parsed = add.get("stats_parsed")
    if parsed and parsed.get("numRecords") is not None:
        return int(parsed["numRecords"])
    return None


def _live_file(add: dict[str, Any]) -> LiveFile:
    dv = add.get("deletionVector")
    card = dv.get("cardinality") if dv else None
    return LiveFile(
        path=add["path"],
        num_records=_num_records(add),
        dv_cardinality=int(card) if dv else None,
    )


def _checkpoint_adds(log: Path, names: list[str]) -> list[dict[str, Any]]:
    adds: list[dict[str, Any]] = []
    for name in names:
        file = log / name
        if name.endswith(".json"):
            actions = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        else:
            table = pq.read_table(file)
            wanted = [c for c in ("add", "sidecar") if c in table.column_names]
            rows = table.select(wanted).to_pylist()
            actions = [{k: v for k, v in row.items() if v is not None} for row in rows]
        for action in actions:
            if action.get("add"):
                adds.append(action["add"])
            elif action.get("sidecar"):
                adds.extend(_checkpoint_adds(log / "_sidecars", [action["sidecar"]["path"]]))
    return adds


def _checkpoints(log: Path, names: list[str]) -> dict[int, list[list[str]]]:
    """version -> candidate checkpoints (each a complete list of file names)."""
    found: dict[int, list[list[str]]] = {}
    parts: dict[tuple[int, int], list[str]] = {}
    for name in names:
        if (m := _CLASSIC_CHECKPOINT.match(name)) or (m := _V2_CHECKPOINT.match(name)):
            found.setdefault(int(m.group(1)), []).append([name])
        elif m := _MULTIPART_CHECKPOINT.match(name):
            parts.setdefault((int(m.group(1)), int(m.group(3))), []).append(name)
    for (version, total), files in parts.items():
        if len(files) == total:
            found.setdefault(version, []).append(sorted(files))
    return found


@functools.cache
def replay(table_dir: str, version: int, *, from_checkpoint: bool = False) -> ReplayResult:
    """Live files of the table at ``version`` (cached for the session).

    Replays JSON commits from version 0 when they are all present; otherwise (or with
    ``from_checkpoint=True``, used to test this replay) starts from the newest complete
    checkpoint at or before ``version``.
    """
    log = Path(table_dir) / "_delta_log"
    names = sorted(p.name for p in log.iterdir() if p.is_file())
    commits = {int(m.group(1)): n for n in names if (m := _COMMIT.match(n))}
    checkpoints = _checkpoints(log, names)
    usable = sorted(v for v in checkpoints if v <= version)

    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    start = 0
    if (from_checkpoint and usable) or any(v not in commits for v in range(version + 1)):
        if not usable:
            raise FileNotFoundError(f"{log}: no commits or checkpoint to reconstruct v{version}")
        cp_version = usable[-1]
        for add in _checkpoint_adds(log, checkpoints[cp_version][0]):
            live[(add["path"], _dv_id(add.get("deletionVector")))] = add
        start = cp_version + 1
    for v in range(start, version + 1):
        if v not in commits:
            raise FileNotFoundError(f"{log}: commit {v} is missing")
        for line in (log / commits[v]).read_text().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                add = action["add"]
                live[(add["path"], _dv_id(add.get("deletionVector")))] = add
            elif "remove" in action:
                rm = action["remove"]
                live.pop((rm["path"], _dv_id(rm.get("deletionVector"))), None)
    return ReplayResult(version, tuple(_live_file(a) for a in live.values()))


def checkpoint_versions(table_dir: str) -> list[int]:
    """Versions that have a complete checkpoint in the table's log."""
    log = Path(table_dir) / "_delta_log"
    return sorted(_checkpoints(log, [p.name for p in log.iterdir() if p.is_file()]))
