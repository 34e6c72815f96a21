"""SHALLOW CLONE: a new table whose log references the source table's data files.

One commit (version 0 of the target, ``commitInfo.operation = "CLONE"``) holds the
source version's protocol, its metadata under a new table id, its domain metadata and
one ``add`` per live file of that version with the file's *absolute* URI (digest §4.3):
``file:/...`` for a local source (Spark's spelling), ``s3://...`` or ``memory://...``
otherwise. Files the source itself references outside its root (a clone of a clone)
keep their location.
On-disk deletion vectors become ``p`` (absolute path) descriptors of the same file; inline
ones are copied. No data file is copied or written.

The clone is then a table of its own: appends, DML, OPTIMIZE and RESTORE on it write
new files under the clone's root and retire the source's files with ``remove`` actions
only; VACUUM on it lists and deletes under its root only, so it never deletes (nor
counts) a file of the source. The source never learns about the clone: VACUUM on the
*source* may delete files the clone still references (as with Spark); reading them then
fails with :class:`~lakequery.errors.ObjectNotFoundError`.

Decisions the issue left open:

* the target must be a new table (an existing one is refused with
  :class:`~lakequery.errors.TableAlreadyExistsError`; Spark's ``CREATE OR REPLACE ...
  CLONE`` is not offered), on the same kind of storage as the source, opened with
  ``storage_options`` (default: the source's); the source's files are read with the
  clone's storage options;
* a target inside the source's root, or a source inside the target's root, is refused
  (:class:`~lakequery.errors.InvalidPathError`): VACUUM of the outer table would delete
  the inner one's files;
* ``commitInfo.operationParameters`` are Spark's (``source`` as ``delta.`<uri>```,
  ``sourceVersion``; plus ``isShallow = true``, which Databricks writes and Delta 4.4
  does not) and ``operationMetrics`` Spark's (``sourceTableSize``, ``sourceNumOfFiles``,
  ``numCopiedFiles = 0``, ``copiedFilesSize = 0``, ``numRemovedFiles = 0``,
  ``removedFilesSize = 0``); the metadata keeps the source's ``createdTime``, as Spark's
  clone does;
* on a row-tracking table the files keep their ``baseRowId`` (row ids are the source's,
  and the high-water mark domain is copied) and get ``defaultRowCommitVersion = 0``, the
  clone's first version.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> _ = lq.write("memory://clone-doc/src", pa.table({"x": [1, 2, 3]}))
    >>> src = lq.DeltaTable("memory://clone-doc/src")
    >>> clone = src.clone("memory://clone-doc/copy")
    >>> [f.startswith("memory://clone-doc/src/") for f in clone.snapshot().files()["path"].to_pylist()]
    [True]
    >>> clone.delete("x = 2").num_deleted_rows
    1
    >>> clone.snapshot().scan().to_arrow().num_rows, src.snapshot().scan().to_arrow().num_rows
    (2, 3)
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from lakequery.commands.file_actions import add_actions
from lakequery.errors import InvalidPathError, TableAlreadyExistsError
from lakequery.log_segment import list_log
from lakequery.protocol.file_locations import absolute_uri, file_locations, storage_kind
from lakequery.storage import Storage, TableLocation, open_storage

if TYPE_CHECKING:
    from lakequery.snapshot import Snapshot
    from lakequery.table import DeltaTable


_ICT_ENABLEMENT = (
    "delta.inCommitTimestampEnablementVersion",
    "delta.inCommitTimestampEnablementTimestamp",
)


def _inside(inner: str, outer: str) -> bool:
    return (inner.rstrip("/") + "/").startswith(outer.rstrip("/") + "/")


def _check_target(source: Storage, target: Storage) -> None:
    if storage_kind(target.root) != storage_kind(source.root):
        raise InvalidPathError(
            target.root,
            f"a shallow clone must be on the same kind of storage as its source {source.root}",
        )
    if _inside(target.root, source.root) or _inside(source.root, target.root):
        raise InvalidPathError(
            target.root,
            f"a shallow clone must not be inside its source {source.root} or contain it "
            "(VACUUM of the outer table would delete the inner one's files)",
        )
    if list_log(target, 0).commits:
        raise TableAlreadyExistsError(target.root, "a shallow clone needs a new location")


def _absolute_dvs(root: str, dvs: list[Any]) -> list[dict[str, Any] | None]:
    """``deletionVector`` structs with on-disk DVs as ``p`` descriptors (absolute URI)."""
    from lakequery.dv.descriptor import Descriptor

    out: list[dict[str, Any] | None] = []
    for dv in dvs:
        if not dv or dv.get("storageType") not in ("u", "p"):
            out.append(dv)
            continue
        location = Descriptor.from_dict(dv).absolute_path(root)
        out.append({**dv, "storageType": "p", "pathOrInlineDv": absolute_uri(location)})
    return out


def clone_adds(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The ``add`` actions of a shallow clone of ``snapshot``: every live file with its
    absolute URI and its DV as an absolute ``p`` descriptor (stats, tags, partition
    values and row ids as they are; ``defaultRowCommitVersion`` left to the commit)."""
    files = snapshot.files()
    root = snapshot.storage.root
    locations = file_locations(root, files.column("path")).to_pylist()
    adds = add_actions(snapshot, files)
    dvs = _absolute_dvs(root, files.column("deletion_vector").to_pylist())
    for add, location, dv in zip(adds, locations, dvs, strict=True):
        add["path"] = absolute_uri(str(location))
        add.pop("defaultRowCommitVersion", None)
        if dv is not None:
            add["deletionVector"] = {k: v for k, v in dv.items() if v is not None}
    return adds


def shallow_clone(
    snapshot: Snapshot,
    target_uri: TableLocation,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> int:
    """Commits version 0 of a shallow clone of ``snapshot`` at ``target_uri``.

    Returns:
        The committed version (0).

    Raises:
        TableAlreadyExistsError: a table exists at the target (also when one is created
            concurrently).
        InvalidPathError: the target is on another kind of storage, or nested with the
            source.
    """
    from lakequery.txn import Transaction

    source = snapshot.storage
    options = storage_options if storage_options is not None else source.options
    target = open_storage(target_uri, options)
    _check_target(source, target)
    adds = clone_adds(snapshot)
    files = snapshot.files()
    size = int(pc.sum(files.column("size")).as_py() or 0) if files.num_rows else 0
    txn = Transaction(
        target,
        None,
        operation="CLONE",
        parameters={
            "source": f"delta.`{absolute_uri(source.root)}`",
            "sourceVersion": snapshot.version,
            "isShallow": True,
        },
    )
    meta = snapshot.metadata
    # in-commit timestamps (if on) are on from the clone's version 0: no enablement keys
    config = {k: v for k, v in meta.configuration.items() if k not in _ICT_ENABLEMENT}
    txn.set_protocol(snapshot.protocol)
    # a new id; createdTime stays the source's, as Spark's clone keeps it
    txn.set_metadata(replace(meta, id=str(uuid.uuid4()), configuration=config))
    for domain, configuration in sorted(snapshot.domains.items()):
        # system domains (clustering, row tracking) are the source's state: carried as is
        txn._staged.domains[domain] = {
            "domain": domain,
            "configuration": configuration,
            "removed": False,
        }
    txn.add_files(adds)
    txn.metrics.update(
        {
            "sourceTableSize": size,
            "sourceNumOfFiles": files.num_rows,
            "numRemovedFiles": 0,
            "numCopiedFiles": 0,
            "removedFilesSize": 0,
            "copiedFilesSize": 0,
        }
    )
    return txn.commit().version


def clone(
    table: DeltaTable,
    target_uri: TableLocation,
    *,
    version: int | None = None,
    as_of: Any = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DeltaTable:
    """:meth:`lakequery.DeltaTable.clone`: the clone as a :class:`DeltaTable`."""
    from lakequery.table import DeltaTable

    snapshot = table.snapshot(version=version, as_of=as_of)
    shallow_clone(snapshot, target_uri, storage_options=storage_options)
    options = storage_options if storage_options is not None else table.storage_options
    return DeltaTable(target_uri, storage_options=options)


__all__ = ["clone", "clone_adds", "shallow_clone"]
