"""The commands the reliability suite runs, each with the rows it must produce.

Tables hold ``id`` (int64) and ``v`` (int64). A :class:`Command` runs against a table URI
and knows the rows it leaves from the rows it started with (:meth:`Command.expect`), so
a run under faults or a crash can be compared with the truth without a second table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import lakequery as lq
from lakequery.commands.listing import list_tree
from lakequery.dv.descriptor import Descriptor

Rows = list[tuple[int, int]]


def rows_table(rows: Rows) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.int64()),
        }
    )


def read_rows(uri: str, options: dict[str, Any] | None = None, version: int | None = None) -> Rows:
    snap = lq.DeltaTable(uri, storage_options=options).snapshot(version=version)
    t = snap.scan().to_arrow()
    return sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


def version_of(uri: str, options: dict[str, Any] | None = None) -> int:
    return lq.DeltaTable(uri, storage_options=options).snapshot().version


def unreferenced(uri: str, options: dict[str, Any] | None = None) -> set[str]:
    """Files outside ``_delta_log`` that the latest version references neither as data
    nor as deletion vector (hidden ``_``/``.`` names are not table files)."""
    dt = lq.DeltaTable(uri, storage_options=options)
    files = dt.snapshot().files()
    live = set(files.column("path").to_pylist())
    root = dt.storage.root + "/"
    if "deletion_vector" in files.column_names:
        for dv in files.column("deletion_vector").to_pylist():
            if dv and dv.get("storageType") in ("u", "p"):
                live.add(Descriptor.from_dict(dv).absolute_path(dt.storage.root)[len(root) :])
    present = {
        p
        for p in list_tree(dt.storage).column("path").to_pylist()
        if not p.split("/")[-1].startswith(("_", ".")) and not p.startswith("_")
    }
    return present - live


#: What the next writer after a crash appends.
NEXT_ROWS: Rows = [(5000, 1), (5001, 2)]


def check_after_crash(
    uri: str, before: Rows, after: Rows, label: str, options: dict[str, Any] | None = None
) -> None:
    """The checks after a writer died: the table reads exactly as ``before`` or ``after``
    the command, the next writer succeeds with every row there, and VACUUM (retention 0,
    not enforced) leaves no unreferenced file and the rows as they were."""
    rows = read_rows(uri, options)
    assert rows in (before, after), f"{label}: the table reads neither as before nor after"
    lq.write(uri, rows_table(NEXT_ROWS), mode="append", storage_options=options)
    expected = sorted(rows + NEXT_ROWS)
    assert read_rows(uri, options) == expected, label
    dt = lq.DeltaTable(uri, storage_options=options)
    dt.vacuum(retention_hours=0, dry_run=False, enforce_retention=False)
    assert unreferenced(uri, options) == set(), label
    assert read_rows(uri, options) == expected, label


@dataclass(frozen=True)
class Command:
    """One command: ``run(uri, options)`` does it, ``expect(rows)`` is its effect."""

    name: str
    run: Callable[[str, dict[str, Any] | None], object]
    expect: Callable[[Rows], Rows]


INITIAL: Rows = [(i, i) for i in range(20)]
CREATE_CONFIG = {"delta.checkpointInterval": "3"}


def _create(uri: str, options: dict[str, Any] | None) -> object:
    return lq.write(uri, rows_table(INITIAL), storage_options=options, configuration=CREATE_CONFIG)


def _append(uri: str, options: dict[str, Any] | None) -> object:
    return lq.write(
        uri, rows_table([(i, i) for i in range(20, 26)]), mode="append", storage_options=options
    )


def _overwrite_some(uri: str, options: dict[str, Any] | None) -> object:
    return lq.write(
        uri,
        rows_table([(1000, 1)]),
        mode="overwrite",
        predicate="id >= 24",
        storage_options=options,
    )


def _delete(uri: str, options: dict[str, Any] | None) -> object:
    return lq.DeltaTable(uri, storage_options=options).delete("id % 3 = 0")


def _update(uri: str, options: dict[str, Any] | None) -> object:
    return lq.DeltaTable(uri, storage_options=options).update("id % 2 = 0", set={"v": "v + 100"})


MERGE_SOURCE: Rows = [(5, -5), (7, -7), (40, -40), (41, -41)]


def _merge(uri: str, options: dict[str, Any] | None) -> object:
    return (
        lq.DeltaTable(uri, storage_options=options)
        .merge(rows_table(MERGE_SOURCE), on="target.id = source.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def _optimize(uri: str, options: dict[str, Any] | None) -> object:
    return lq.DeltaTable(uri, storage_options=options).optimize()


def _vacuum(uri: str, options: dict[str, Any] | None) -> object:
    dt = lq.DeltaTable(uri, storage_options=options)
    return dt.vacuum(retention_hours=0, dry_run=False, enforce_retention=False)


def _checkpoint(uri: str, options: dict[str, Any] | None) -> object:
    return lq.DeltaTable(uri, storage_options=options).checkpoint()


def _cleanup(uri: str, options: dict[str, Any] | None) -> object:
    return lq.DeltaTable(uri, storage_options=options).cleanup_log(retention_hours=0)


def _merge_rows(rows: Rows) -> Rows:
    source = dict(MERGE_SOURCE)
    out = [(i, source.get(i, v)) for i, v in rows]
    have = {i for i, _ in rows}
    out += [(i, v) for i, v in MERGE_SOURCE if i not in have]
    return sorted(out)


def _same(rows: Rows) -> Rows:
    return rows


CREATE = Command("create", _create, lambda rows: sorted(INITIAL))
APPEND = Command("append", _append, lambda rows: sorted(rows + [(i, i) for i in range(20, 26)]))
OVERWRITE = Command(
    "overwrite_where",
    _overwrite_some,
    lambda rows: sorted([r for r in rows if r[0] < 24] + [(1000, 1)]),
)
DELETE = Command("delete", _delete, lambda rows: [r for r in rows if r[0] % 3])
UPDATE = Command(
    "update", _update, lambda rows: sorted((i, v + 100 if i % 2 == 0 else v) for i, v in rows)
)
MERGE = Command("merge", _merge, _merge_rows)
OPTIMIZE = Command("optimize", _optimize, _same)
VACUUM = Command("vacuum", _vacuum, _same)
CHECKPOINT = Command("checkpoint", _checkpoint, _same)
CLEANUP = Command("log_cleanup", _cleanup, _same)


def _start_delete(uri: str, options: dict[str, Any] | None) -> object:
    return lq.DeltaTable(uri, storage_options=options).delete("id % 5 = 4")


def _start_update(uri: str, options: dict[str, Any] | None) -> object:
    return lq.DeltaTable(uri, storage_options=options).update("id % 7 = 1", set={"v": "v - 1"})


#: Commands that bring a table to the starting state of the crash tests: compacted files
#: for VACUUM to delete, deletion vectors and new small files for OPTIMIZE and DML.
START_DELETE = Command(
    "start_delete", _start_delete, lambda rows: [r for r in rows if r[0] % 5 != 4]
)
START_UPDATE = Command(
    "start_update",
    _start_update,
    lambda rows: sorted((i, v - 1 if i % 7 == 1 else v) for i, v in rows),
)


def restore_to(version: int, rows_then: Rows) -> Command:
    """RESTORE to ``version``, whose rows were ``rows_then``."""

    def run(uri: str, options: dict[str, Any] | None) -> object:
        return lq.DeltaTable(uri, storage_options=options).restore(version=version)

    return Command("restore", run, lambda rows: list(rows_then))
