"""Conflict detection between a transaction and the commits that beat it (digest §17).

Pure: a :class:`Footprint` says what the losing transaction read and writes, a
:class:`WinningCommit` holds the actions of one concurrent commit, and
:func:`check_winner` raises the specific :class:`~lakequery.errors.CommitConflictError`
subclass when the two cannot both stand, in the order of digest §17.4. Rebasing (row ids,
in-commit timestamps) is the transaction's business, not this module's.

Example:
    >>> fp = Footprint(read_version=0, blind_append=True)
    >>> winner = WinningCommit.from_bytes(1, b'{"add":{"path":"a.parquet","partitionValues":{},'
    ...     b'"size":1,"modificationTime":0,"dataChange":true}}')
    >>> check_winner(fp, winner, uri="memory://t")  # two appends never conflict
    >>> fp = Footprint(read_version=0, read_whole_table=True, removed_files=frozenset({"a.parquet"}))
    >>> check_winner(fp, winner, uri="memory://t")
    Traceback (most recent call last):
    ...
    lakequery.errors.ConcurrentAppendError: ConcurrentAppend: commit to 'memory://t' (read version 0) conflicts with version 1: it added 1 file(s) this transaction's read covers (e.g. 'a.parquet')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    CorruptLogError,
    DomainMetadataConflictError,
    IdentityConflictError,
    MetadataChangedError,
    ProtocolChangedError,
)
from lakequery.metadata import Metadata
from lakequery.protocol.partitions import partition_struct
from lakequery.protocol.predicates import (
    And,
    Expr,
    bind,
    parse_predicate,
    referenced_columns,
    to_pyarrow,
)
from lakequery.protocol.schema import DeltaType

ISOLATION_LEVELS = ("Serializable", "WriteSerializable", "SnapshotIsolation")
#: The system domain whose conflicts are resolved by re-deriving it (row tracking).
ROW_TRACKING_DOMAIN = "delta.rowTracking"
#: ``commitInfo.tags`` key marking a commit whose only metadata change is identity-column
#: high-water marks (the reference implementation's name).
IDENTITY_COMMIT_TAG = "delta.identity.schemaUpdate"


@dataclass(frozen=True)
class Footprint:
    """What a transaction read and what it writes (digest §17.1).

    Attributes:
        read_version: the snapshot version the transaction started from.
        isolation_level: ``Serializable``, ``WriteSerializable`` or ``SnapshotIsolation``.
        blind_append: it only adds files and read no table data.
        read_whole_table: its result depends on every file of the table.
        read_predicates: SQL predicates it selected files with; only their conjuncts on
            partition columns matter.
        read_files: decoded paths of the files it read.
        read_app_ids: application ids whose ``txn`` version it looked at.
        removed_files: decoded paths it removes.
        changes_metadata: it commits a ``metaData`` action.
        changes_protocol: it commits a ``protocol`` action.
        domains: the domain-metadata domains it writes.
        read_domains: the domains whose configuration it was decided on.
        identity_only_metadata: its ``metaData`` only moves identity high-water marks.
    """

    read_version: int
    isolation_level: str = "WriteSerializable"
    blind_append: bool = False
    read_whole_table: bool = False
    read_predicates: tuple[str, ...] = ()
    read_files: frozenset[str] = frozenset()
    read_app_ids: frozenset[str] = frozenset()
    removed_files: frozenset[str] = frozenset()
    changes_metadata: bool = False
    changes_protocol: bool = False
    domains: frozenset[str] = frozenset()
    read_domains: frozenset[str] = frozenset()
    identity_only_metadata: bool = False


@dataclass(frozen=True)
class WinningCommit:
    """The actions of one commit that won a version this transaction wanted."""

    version: int
    commit_info: Mapping[str, Any] | None = None
    protocol: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] | None = None
    added: Sequence[Mapping[str, Any]] = ()
    removed_paths: frozenset[str] = frozenset()
    txn_app_ids: frozenset[str] = frozenset()
    domains: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_bytes(cls, version: int, data: bytes, *, path: str = "") -> WinningCommit:
        """Parses a commit file (NDJSON)."""
        info = proto = meta = None
        added: list[Mapping[str, Any]] = []
        removed: set[str] = set()
        apps: set[str] = set()
        domains: dict[str, Mapping[str, Any]] = {}
        try:
            lines = [json.loads(line) for line in data.splitlines() if line.strip()]
        except ValueError as exc:
            raise CorruptLogError(path or f"version {version}", f"not JSON: {exc}") from exc
        for line in lines:
            if "add" in line:
                added.append(line["add"])
            elif "remove" in line:
                removed.add(unquote(line["remove"]["path"]))
            elif "commitInfo" in line:
                info = line["commitInfo"]
            elif "protocol" in line:
                proto = line["protocol"]
            elif "metaData" in line:
                meta = line["metaData"]
            elif "txn" in line:
                apps.add(str(line["txn"]["appId"]))
            elif "domainMetadata" in line:
                domains[str(line["domainMetadata"]["domain"])] = line["domainMetadata"]
        return cls(version, info, proto, meta, added, frozenset(removed), frozenset(apps), domains)

    @property
    def is_blind_append(self) -> bool:
        """The winner said it only appended (a missing commitInfo counts as not blind)."""
        return bool(self.commit_info and self.commit_info.get("isBlindAppend") is True)

    @property
    def identity_only_metadata(self) -> bool:
        """The winner's metadata change only moved identity high-water marks (tagged)."""
        tags = (self.commit_info or {}).get("tags") or {}
        return str(tags.get(IDENTITY_COMMIT_TAG, "")).lower() == "true"

    @property
    def in_commit_timestamp(self) -> int | None:
        value = (self.commit_info or {}).get("inCommitTimestamp")
        return int(value) if value is not None else None


def partition_part(predicate: str, partition_columns: Sequence[str]) -> Expr | None:
    """The conjuncts of ``predicate`` that only use partition columns (None: no such part,
    so the predicate may match any file)."""
    expr = parse_predicate(predicate)
    conjuncts = list(expr.items) if isinstance(expr, And) else [expr]
    lowered = {c.lower() for c in partition_columns}
    kept = [
        c for c in conjuncts if all(path[0].lower() in lowered for path in referenced_columns(c))
    ]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else And(tuple(kept))


def _matching_adds(
    adds: Sequence[Mapping[str, Any]],
    predicates: Sequence[str],
    partition_specs: Sequence[tuple[str, str, DeltaType]],
) -> list[str]:
    """Paths of ``adds`` whose partition values satisfy any of ``predicates``."""
    if not adds or not predicates:
        return []
    names = [logical for logical, _, _ in partition_specs]
    parts = [partition_part(p, names) for p in predicates]
    paths = [str(a["path"]) for a in adds]
    if any(p is None for p in parts):
        return paths
    pv = pa.array(
        [list((a.get("partitionValues") or {}).items()) for a in adds],
        pa.map_(pa.string(), pa.string()),
    )
    values = partition_struct(pv, partition_specs)
    table = pa.Table.from_struct_array(values)
    hit: Any = pa.array([False] * len(adds))
    for part in parts:
        assert part is not None
        matched: Any = _evaluate(table, to_pyarrow(bind(part, table.schema)))
        hit = pc.or_(hit, pc.fill_null(matched, pa.scalar(False)))
    return [p for p, h in zip(paths, hit.to_pylist(), strict=True) if h]


def _evaluate(table: pa.Table, expr: Any) -> pa.Array[Any]:
    """The boolean value of ``expr`` on every row of ``table``."""
    import pyarrow.dataset as ds

    projected = ds.dataset(table).to_table(columns={"m": expr})
    out: pa.Array[Any] = projected.column("m").combine_chunks()
    return out


#: Table properties a concurrent commit may turn on without failing a transaction that
#: changes no metadata (digest 17.4 2(c)), with the values that turn them on. Row tracking
#: is left out: its enablement changes what this transaction's own rows must carry.
ENABLING_PROPERTIES: Mapping[str, str] = {
    "delta.enableDeletionVectors": "true",
    "delta.checkpointPolicy": "v2",
    "delta.enableInCommitTimestamps": "true",
    "delta.columnMapping.mode": "name",
}

#: Properties that may be added (never changed) beside the enabling one they come with.
COMPANION_PROPERTIES: Mapping[str, str] = {
    "delta.inCommitTimestampEnablementVersion": "delta.enableInCommitTimestamps",
    "delta.inCommitTimestampEnablementTimestamp": "delta.enableInCommitTimestamps",
    "delta.columnMapping.maxColumnId": "delta.columnMapping.mode",
}


def only_enables_features(old: Metadata, new: Metadata) -> bool:
    """Whether ``new`` differs from ``old`` only by properties of
    :data:`ENABLING_PROPERTIES` added or set to their enabling values (with the
    :data:`COMPANION_PROPERTIES` of those added), and, when column
    mapping goes from ``none`` to ``name``, by the column-mapping metadata of the schema's
    fields. Any other difference (a removed property, id, partitioning, format, columns)
    is a metadata change."""
    from lakequery.protocol.column_mapping import without_column_mapping

    same = (old.id, old.partition_columns, old.format_provider, dict(old.format_options))
    if same != (new.id, new.partition_columns, new.format_provider, dict(new.format_options)):
        return False
    before, after = dict(old.configuration), dict(new.configuration)
    if not before.keys() <= after.keys():
        return False
    changed = {k for k in after if before.get(k) != after[k]}
    for key in changed:
        companion = COMPANION_PROPERTIES.get(key)
        if companion is not None:
            if key in before or companion not in changed:
                return False  # only added, beside its feature turned on
        elif after[key].strip().lower() != ENABLING_PROPERTIES.get(key):
            return False
    if old.schema_string == new.schema_string:
        return True
    mapping = "delta.columnMapping.mode"
    if mapping not in changed or (before.get(mapping) or "none").strip().lower() != "none":
        return False
    return without_column_mapping(old.schema) == without_column_mapping(new.schema)


def check_winner(
    own: Footprint,
    winner: WinningCommit,
    *,
    uri: str,
    partition_specs: Sequence[tuple[str, str, DeltaType]] = (),
    check_protocol: Callable[[Mapping[str, Any]], None] | None = None,
    read_metadata: Metadata | None = None,
) -> None:
    """Raises the conflict between ``own`` and one winning commit, or returns None.

    Args:
        own: the losing transaction's footprint.
        winner: the commit that took a version first.
        uri: the table (for messages).
        partition_specs: (logical name, partitionValues key, type) per partition column of
            the read snapshot.
        check_protocol: raises when lakequery cannot write under the winner's protocol.
        read_metadata: the metadata the transaction read; a winner whose metadata only
            turns features on (:func:`only_enables_features`) then does not conflict
            with a transaction that changes no metadata, which adopts it.
    """

    def fail(cls: type[Exception], reason: str) -> None:
        raise cls(uri, own.read_version, winner.version, reason)

    # 1. protocol
    if winner.protocol is not None:
        if check_protocol is not None:
            check_protocol(winner.protocol)
        if own.changes_protocol:
            fail(ProtocolChangedError, "both transactions change the protocol")
    # 2. metadata
    if winner.metadata is not None:
        if winner.identity_only_metadata and own.identity_only_metadata:
            fail(
                IdentityConflictError,
                "both generated identity values above the same high-water mark "
                "(regenerate them above the winner's mark and retry)",
            )
        if winner.identity_only_metadata and own.changes_metadata:
            # an append that generated identity values: this transaction's metadata would
            # take back the winner's high-water mark, so it plans again (ALTER does) on
            # the latest version, as after any concurrent append
            fail(
                ConcurrentAppendError,
                "it appended rows with generated identity values (a new high-water mark) "
                "that this transaction's metadata change would take back",
            )
        adoptable = (
            read_metadata is not None
            and not own.changes_metadata
            and only_enables_features(read_metadata, Metadata.from_action(winner.metadata))
        )
        if not (winner.identity_only_metadata or adoptable):
            fail(MetadataChangedError, "it changed the table metadata")
    # 3. domains
    clash = sorted((own.domains & set(winner.domains)) - {ROW_TRACKING_DOMAIN})
    if clash:
        fail(DomainMetadataConflictError, f"both write domain metadata {clash[0]!r}")
    read = sorted(own.read_domains & set(winner.domains))
    if read:
        fail(DomainMetadataConflictError, f"it changed domain metadata {read[0]!r} this one read")
    # 4. application transactions
    apps = sorted(own.read_app_ids & winner.txn_app_ids)
    if apps:
        fail(ConcurrentTransactionError, f"it committed a txn for appId {apps[0]!r}")
    # 6. concurrent appends
    level = own.isolation_level
    if level == "SnapshotIsolation" or own.blind_append:
        candidates: Sequence[Mapping[str, Any]] = ()
    elif level == "Serializable" or own.changes_metadata or not winner.is_blind_append:
        candidates = [a for a in winner.added if a.get("dataChange", True)]
    else:
        candidates = ()
    if candidates:
        if own.read_whole_table or (not partition_specs and own.read_predicates):
            hits = [str(a["path"]) for a in candidates]
        else:  # a transaction that read nothing (a schema-merging append) covers nothing
            hits = _matching_adds(candidates, own.read_predicates, partition_specs)
        if hits:
            fail(
                ConcurrentAppendError,
                f"it added {len(hits)} file(s) this transaction's read covers "
                f"(e.g. {unquote(hits[0])!r})",
            )
    # 7. delete vs read
    if winner.removed_paths:
        read = sorted(winner.removed_paths & own.read_files)
        if read or own.read_whole_table:
            what = (
                f"file {read[0]!r} this transaction read" if read else "files of a table read whole"
            )
            fail(ConcurrentDeleteReadError, f"it removed {what}")
    # 8. delete vs delete
    both = sorted(winner.removed_paths & own.removed_files)
    if both:
        fail(ConcurrentDeleteDeleteError, f"both remove {both[0]!r}")
