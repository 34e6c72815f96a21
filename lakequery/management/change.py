"""One ALTER = one planned change, committed as ONE transaction (digest §17).

Every ``DeltaTable.alter`` method is a *planner*: a pure function from a snapshot to an
:class:`AlterChange` (the new ``metaData``, the upgraded ``protocol`` when one is needed,
what the change read). :func:`commit_change` commits it through
:class:`~lakequery.txn.Transaction`, so the usual conflict checks and retries apply:

* a concurrent commit that only adds or removes data files: the transaction retries
  at the next version when the conflict rules allow it; when they report a
  :class:`~lakequery.errors.ConcurrentAppendError` or
  :class:`~lakequery.errors.ConcurrentDeleteReadError` (a metadata change on an
  unpartitioned table counts every concurrent append, digest §17.4 step 6), the ALTER
  is planned again on the new latest snapshot, which re-checks everything it depends
  on (the new rows for ``add_constraint``, the new files' row ids when enabling row
  tracking) — so an ALTER never fails because of a concurrent append or delete;
* a concurrent metadata or protocol change (another ALTER, a schema-evolving write):
  raises :class:`~lakequery.errors.MetadataChangedError` /
  :class:`~lakequery.errors.ProtocolChangedError`, as Delta does: the ALTER was decided
  on a schema or property set that no longer holds.

Example:
    >>> import dataclasses, pyarrow as pa, lakequery as lq
    >>> uri = "memory://change-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1]}))
    >>> dt = lq.DeltaTable(uri)
    >>> def owner(snapshot):
    ...     meta = snapshot.metadata
    ...     config = {**meta.configuration, "owner": "me"}
    ...     return AlterChange("SET TBLPROPERTIES", {"properties": {"owner": "me"}},
    ...                        dataclasses.replace(meta, configuration=config))
    >>> commit_change(dt, owner).version
    1
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakequery.clustering.domain import clustering_domain_name
from lakequery.errors import ConcurrentAppendError, ConcurrentDeleteReadError
from lakequery.metadata import Metadata
from lakequery.protocol.features import Protocol
from lakequery.snapshot import Snapshot
from lakequery.txn import Transaction

if TYPE_CHECKING:
    import pyarrow as pa

    from lakequery.table import DeltaTable

__all__ = ["AlterChange", "AlterResult", "Planner", "commit_change"]

#: How many times an ALTER is planned again after a concurrent data change.
MAX_REPLANS = 10


@dataclass(frozen=True)
class AlterChange:
    """What one ALTER commits.

    Attributes:
        operation: ``commitInfo.operation`` (Spark's names: ``ADD COLUMNS``...).
        parameters: ``commitInfo.operationParameters``.
        metadata: the new ``metaData`` (always committed: one commit per ALTER, even when
            the values did not change, as Spark does).
        protocol: the new ``protocol``, or None when the current one suffices.
        reads_whole_table: the change depends on every row (``add_constraint``) or file
            (row-tracking enablement), so concurrent appends conflict with it.
        rows_checked: live rows the planner checked (``add_constraint``).
        backfill: rows of ``Snapshot.files()`` to re-add unchanged (``dataChange=false``)
            so that the commit assigns them row ids (enabling row tracking).
    """

    operation: str
    parameters: Mapping[str, Any]
    metadata: Metadata
    protocol: Protocol | None = None
    reads_whole_table: bool = False
    rows_checked: int | None = None
    backfill: pa.Table | None = None


@dataclass(frozen=True)
class AlterResult:
    """A committed ALTER.

    Attributes:
        version: the committed table version.
        operation: ``commitInfo.operation`` of that commit.
        features_added: table features the commit added to the protocol.
        features_removed: table features it removed (``drop_feature``).
        attempts: versions the last plan tried, plus one per earlier plan given up after
            a concurrent data change (1 = no race lost).
        rows_checked: live rows checked against a new constraint (``add_constraint``).
    """

    version: int
    operation: str
    features_added: tuple[str, ...] = ()
    features_removed: tuple[str, ...] = ()
    attempts: int = 1
    rows_checked: int | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)


Planner = Callable[[Snapshot], AlterChange]


def commit_change(
    table: DeltaTable, planner: Planner, *, snapshot: Snapshot | None = None
) -> AlterResult:
    """Plans on ``snapshot`` (default: the latest) and commits in ONE transaction,
    planning again on the latest snapshot after a concurrent data change (module doc).

    Raises:
        MetadataChangedError, ProtocolChangedError: a concurrent ALTER or schema change.
        AlterTableError, UnsupportedFeatureError, ConstraintViolationError: from the
            planner; nothing is committed.
    """
    attempts = 0
    snap = snapshot if snapshot is not None else table.snapshot()
    for replan in range(MAX_REPLANS + 1):
        change = planner(snap)
        txn = Transaction(
            table.storage, snap, operation=change.operation, parameters=change.parameters
        )
        if change.reads_whole_table:
            txn.read_whole_table()
        clustering = clustering_domain_name(snap.protocol, snap.domains)
        if clustering is not None:  # planners check the clustering columns
            txn.read_domain(clustering)
        txn.set_metadata(change.metadata)
        if change.protocol is not None:
            txn.set_protocol(change.protocol)
        if change.backfill is not None and change.backfill.num_rows:
            from lakequery.commands.file_actions import add_actions

            readds = add_actions(snap, change.backfill, data_change=False)
            for add in readds:  # the commit numbers them above the high-water mark
                add.pop("baseRowId", None)
                add.pop("defaultRowCommitVersion", None)
            txn.add_files(readds)
        try:
            result = txn.commit()
        except (ConcurrentAppendError, ConcurrentDeleteReadError):
            if replan == MAX_REPLANS:
                raise
            attempts += 1
            snap = table.snapshot()
            continue
        before = snap.protocol.effective_features()
        after = change.protocol.effective_features() if change.protocol is not None else before
        return AlterResult(
            version=result.version,
            operation=change.operation,
            features_added=tuple(sorted(after - before)),
            features_removed=tuple(sorted(before - after)),
            attempts=attempts + result.attempts,
            rows_checked=change.rows_checked,
            parameters=dict(change.parameters),
        )
    raise AssertionError("unreachable")  # pragma: no cover
