"""RESTORE: one commit that returns the table to an older version's state.

The live files of the target version and of the latest version are compared by their
replay key (path + deletion-vector id): files only in the target are re-added with their
old statistics, DV, tags and row ids; files only in the latest version are removed (a
file whose DV differs is both: the latest (path, DV) removed, the old one added). The
table metadata (schema, properties) goes back to the target's; the protocol never goes
down, and gains the features of the target's protocol and those its restored metadata
uses (a feature dropped since comes back with its property, as in Delta's RESTORE, which
merges the two protocols). Before committing, one listing of the table checks that every
file to re-add (and its DV file) still exists (files outside the root, a shallow clone's,
are checked one by one where they live): a restore past a VACUUM raises
:class:`~lakequery.errors.RestoreError` and commits nothing.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://restore-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1, 2]}))
    >>> _ = lq.write(uri, pa.table({"x": [3]}), mode="overwrite")
    >>> m = lq.DeltaTable(uri).restore(version=0)
    >>> m.version, m.files_added, m.files_removed
    (2, 1, 1)
    >>> sorted(lq.DeltaTable(uri).snapshot().scan().to_arrow().column("x").to_pylist())
    [1, 2]
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakequery.commands.file_actions import add_actions, remove_actions
from lakequery.commands.listing import list_tree
from lakequery.commands.metrics import RestoreMetrics
from lakequery.commands.progress import ProgressCallback, ProgressReporter
from lakequery.commands.vacuum import _dv_paths
from lakequery.errors import RestoreError
from lakequery.log_segment import load_state
from lakequery.metadata import Metadata
from lakequery.protocol.features import Protocol, table_features_in_use, upgraded_protocol
from lakequery.protocol.file_locations import external_mask, file_locations
from lakequery.snapshot import Snapshot
from lakequery.storage import Storage
from lakequery.txn import Transaction
from lakequery.writer.identity import merged_high_water_marks


def file_keys(files: pa.Table) -> pa.Array[Any]:
    """The replay key of each row of :meth:`Snapshot.files`: path and DV id."""
    dv: Any = files.column("deletion_vector").combine_chunks()
    pieces = [
        files.column("path").combine_chunks(),
        pc.fill_null(pc.struct_field(dv, "storageType"), ""),
        pc.fill_null(pc.struct_field(dv, "pathOrInlineDv"), ""),
        pc.fill_null(pc.cast(pc.struct_field(dv, "offset"), pa.string()), ""),
    ]
    out: pa.Array[Any] = pc.binary_join_element_wise(*pieces, "\x00")
    return out


def _missing_external(storage: Storage, files: pa.Table) -> list[str]:
    """The locations outside the table root (data files and their DV files) among
    ``files`` that no longer exist (the source of a shallow clone vacuumed them)."""
    from lakequery.dv.descriptor import Descriptor

    if not files.num_rows:
        return []
    locations = [str(x) for x in file_locations(storage.root, files.column("path")).to_pylist()]
    root = storage.root.rstrip("/") + "/"
    for dv in files.column("deletion_vector").to_pylist():
        if dv and dv.get("storageType") in ("u", "p"):
            location = Descriptor.from_dict(dv).absolute_path(storage.root)
            if not location.startswith(root):
                locations.append(location)
    found = storage.map_io(storage.exists, locations)
    return [loc for loc, ok in zip(locations, found, strict=True) if not ok]


def _size(files: pa.Table) -> int:
    return int(pc.sum(files.column("size")).as_py() or 0)


def restore(
    storage: Storage,
    version: int,
    *,
    parameters: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> RestoreMetrics:
    """Commits the state of ``version`` as a new version.

    Args:
        storage: the table's storage.
        version: the version to bring back.
        parameters: ``commitInfo.operationParameters`` (``version`` or ``timestamp``).
        progress: receives :class:`~lakequery.commands.progress.Progress` after each of
            its four steps (read both versions, compare, check the files, commit).

    Returns:
        :class:`~lakequery.commands.metrics.RestoreMetrics`; ``version`` is None when the
        latest version already has that state (nothing is committed).

    Raises:
        VersionNotFoundError: the version cannot be reconstructed.
        RestoreError: files the version needs were deleted (VACUUM).
    """
    with ProgressReporter("RESTORE", 4, 0, callback=progress, unit="steps") as reporter:
        return _restore(storage, version, parameters, reporter)


def _restore(
    storage: Storage,
    version: int,
    parameters: dict[str, Any] | None,
    reporter: ProgressReporter,
) -> RestoreMetrics:
    started = time.monotonic()
    latest = Snapshot(storage, load_state(storage, None))
    target = Snapshot(storage, load_state(storage, version))
    now_files, old_files = latest.files(), target.files()
    now_keys, old_keys = file_keys(now_files), file_keys(old_files)
    to_add = old_files.filter(pc.invert(pc.is_in(old_keys, value_set=now_keys)))
    to_remove = now_files.filter(pc.invert(pc.is_in(now_keys, value_set=old_keys)))
    reporter.advance(1, 0)
    # identity high-water marks never go back: values handed out since stay taken
    restored = merged_high_water_marks(target.metadata, latest.metadata)
    same_metadata = latest.metadata == restored
    clustering = _restored_clustering(latest, target)

    def metrics(committed: int | None) -> RestoreMetrics:
        return RestoreMetrics(
            version=committed,
            restored_version=version,
            files_added=to_add.num_rows,
            files_removed=to_remove.num_rows,
            bytes_added=_size(to_add),
            bytes_removed=_size(to_remove),
            num_files_after=old_files.num_rows,
            table_size_after=_size(old_files),
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    reporter.advance(1, 0)
    if not to_add.num_rows and not to_remove.num_rows and same_metadata and clustering is None:
        return metrics(None)
    if to_add.num_rows:
        paths = to_add.column("path").combine_chunks()
        external = external_mask(paths)
        needed = [str(p) for p in paths.filter(pc.invert(external)).to_pylist()]
        needed += _dv_paths(storage, to_add.column("deletion_vector").to_pylist())
        needed = list(dict.fromkeys(needed))  # one DV file holds the DVs of many files
        present = list_tree(storage).column("path")
        wanted = pa.array(needed, pa.string())
        missing = [str(p) for p in wanted.filter(pc.invert(pc.is_in(wanted, value_set=present)))]
        # files outside the root (a shallow clone's) are not in the listing: ask for each
        missing += _missing_external(storage, to_add.filter(external))
        if missing:
            raise RestoreError(storage.root, version, missing)
    reporter.advance(1, 0)
    txn = Transaction(
        storage,
        latest,
        operation="RESTORE",
        parameters=parameters if parameters is not None else {"version": version},
    )
    txn.read_whole_table()
    if not same_metadata:
        txn.set_metadata(restored)
    protocol = _restored_protocol(latest, target, restored)
    if protocol is not None:
        txn.set_protocol(protocol)
    if clustering is not None:
        txn.set_domain(*clustering)
    now = int(time.time() * 1000)
    txn.remove_files(remove_actions(latest, to_remove, now_ms=now, data_change=True))
    txn.add_files(add_actions(target, to_add, data_change=True))
    txn.metrics = dict(metrics(None).operation_metrics())
    result = txn.commit()
    reporter.advance(1, 0)
    return metrics(result.version)


def _restored_protocol(latest: Snapshot, target: Snapshot, restored: Metadata) -> Protocol | None:
    """The latest protocol merged with the target's, plus what the restored metadata uses
    (None when the latest already has it all): a property such as ``delta.appendOnly`` or
    a constraint is only in force where the protocol lists its feature (digest §5.2)."""
    old = target.protocol
    needed = set(old.effective_reader_features()) | set(old.effective_writer_features())
    needed |= table_features_in_use(restored.schema, restored.configuration)
    return upgraded_protocol(latest.protocol, needed)


def _restored_clustering(latest: Snapshot, target: Snapshot) -> tuple[str, str] | None:
    """(domain, configuration) that gives a clustered table the clustering columns of the
    restored version (none when it was not clustered then), as Delta's RESTORE; None when
    nothing changes."""
    from lakequery.clustering.domain import clustering_configuration, clustering_domain_name

    name = clustering_domain_name(latest.protocol, latest.domains)
    if name is None:
        return None
    wanted = target.domains.get(name, clustering_configuration([]))
    return None if latest.domains.get(name) == wanted else (name, wanted)


__all__ = ["file_keys", "restore"]
