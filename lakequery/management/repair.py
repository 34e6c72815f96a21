"""``DeltaTable.repair()``: FSCK REPAIR TABLE, retire log entries whose data files are gone.

A live file whose Parquet file no longer exists (deleted by hand, lost by a bucket
lifecycle rule) makes every full scan of the table fail. :func:`repair` finds them with
ONE recursive listing of the table directory (:func:`~lakequery.commands.listing.list_tree`)
and a vectorised anti-join of the live paths against it; only files the log names by an
absolute URI (shallow clones) are outside the listing and are checked one by one.

Unless ``dry_run``, one ``FSCK`` commit removes them. Decision (recorded in
ARCHITECTURE.md, "Table management"): the ``remove`` actions carry ``dataChange=true``,
as delta-rs's filesystem check writes them: rows do leave the table, and readers of the
change feed or of a stream must not take the commit for a rearrangement. Each remove keeps
the file's partition values, size, deletion vector and row-id fields (extended
``remove``). Deletion-vector files are not checked (a missing DV file makes the file's
rows unreadable in a different way that removing the file would only hide).

Example:
    >>> import os, tempfile, pyarrow as pa, lakequery as lq
    >>> root = tempfile.mkdtemp()
    >>> for part in ("a", "b"):
    ...     _ = lq.write(root, pa.table({"x": [1], "p": [part]}), mode="append",
    ...                  partition_by=["p"])
    >>> dt = lq.DeltaTable(root)
    >>> lost = dt.snapshot().files().column("path")[0].as_py()
    >>> os.remove(os.path.join(root, lost))
    >>> dt.repair().files_removed == (lost,)       # dry run: nothing committed
    True
    >>> r = dt.repair(dry_run=False)
    >>> r.version, dt.snapshot().scan().to_arrow().num_rows
    (2, 1)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakequery.commands.file_actions import remove_actions
from lakequery.commands.listing import list_tree
from lakequery.snapshot import Snapshot
from lakequery.storage import Storage
from lakequery.txn import Transaction

#: A path with a URI scheme (``s3://...``, ``file:/...``) or an absolute OS path.
_ABSOLUTE_RE = r"^([A-Za-z][A-Za-z0-9+.-]*:|/)"


@dataclass(frozen=True)
class RepairResult:
    """What FSCK found and did.

    Attributes:
        dry_run: True when nothing was committed on purpose.
        files_removed: live files whose data file is missing (decoded paths as
            ``Snapshot.files()`` shows them), sorted; on a dry run, those that would be
            removed.
        version: the FSCK commit's version, or None (dry run, or nothing missing).
        read_version: the version that was checked.
    """

    dry_run: bool
    files_removed: tuple[str, ...]
    version: int | None
    read_version: int


def missing_files(storage: Storage, snapshot: Snapshot) -> pa.Table:
    """The rows of ``snapshot.files()`` whose data file does not exist."""
    files = snapshot.files()
    if not files.num_rows:
        return files
    paths = files.column("path")
    absolute = pc.match_substring_regex(paths, _ABSOLUTE_RE)
    listed = list_tree(storage).column("path")
    missing = pc.invert(pc.is_in(paths, value_set=listed))
    if pc.any(absolute).as_py():
        # outside the table directory: no single listing covers them (documented)
        outside = [str(p) for p in pc.filter(paths, absolute).to_pylist()]
        elsewhere = [p for p in outside if not storage.exists(p)]
        gone = pc.is_in(paths, value_set=pa.array(elsewhere, pa.string()))
        missing = pc.if_else(absolute, gone, missing)
    return files.filter(missing)


def repair(storage: Storage, snapshot: Snapshot, *, dry_run: bool = True) -> RepairResult:
    """FSCK REPAIR TABLE (see the module docstring)."""
    gone = missing_files(storage, snapshot)
    paths = tuple(sorted(str(p) for p in gone.column("path").to_pylist()))
    if dry_run or not paths:
        return RepairResult(dry_run, paths, None, snapshot.version)
    txn = Transaction(storage, snapshot, operation="FSCK", parameters={})
    txn.read_files(paths)
    txn.remove_files(remove_actions(snapshot, gone, int(time.time() * 1000)))
    txn.metrics = {"numMissingFiles": len(paths)}
    result = txn.commit()
    return RepairResult(False, paths, result.version, snapshot.version)


__all__ = ["RepairResult", "missing_files", "repair"]
