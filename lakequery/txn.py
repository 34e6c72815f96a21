"""Optimistic transactions: stage actions, commit version r+1 atomically, retry on races.

A :class:`Transaction` starts from a snapshot (version ``r``; none when it creates the
table), records what it reads (files, partition predicates, application ids) and stages
what it writes. :meth:`Transaction.try_commit` is the low-level step: one atomic
put-if-absent of ``_delta_log/<version>.json`` that returns a :class:`CommitAttempt`
value. :meth:`Transaction.commit` loops: on a lost race it reads the winning commits,
runs the conflict checks of digest §17 (:mod:`lakequery.protocol.conflicts`), rebases
row ids and the in-commit timestamp, and tries the next version, until it commits or a
:class:`~lakequery.errors.CommitConflictError` subclass says why it cannot. After a
commit, a checkpoint is written every ``delta.checkpointInterval`` versions; a failed
checkpoint is logged and never fails the commit.

Example:
    >>> import dataclasses, pyarrow as pa, lakequery as lq
    >>> from lakequery.txn import Transaction
    >>> uri = "memory://txn-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1]}))
    >>> dt = lq.DeltaTable(uri)
    >>> txn = Transaction(dt.storage, dt.snapshot(), operation="SET TBLPROPERTIES")
    >>> meta = dt.snapshot().metadata
    >>> txn.set_metadata(dataclasses.replace(meta, configuration={"owner": "me"}))
    >>> txn.commit().version
    1
    >>> dt.snapshot().metadata.configuration["owner"]
    'me'
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

from lakequery.clustering.domain import CLUSTERING_DOMAINS
from lakequery.errors import (
    AppendOnlyError,
    CommitConflictError,
    CommitError,
    CommitRetriesExhaustedError,
    ObjectNotFoundError,
    SchemaError,
    TableAlreadyExistsError,
)
from lakequery.log_segment import list_log, partition_specs
from lakequery.metadata import Metadata
from lakequery.protocol.change_feed import change_feed_column_clashes
from lakequery.protocol.conflicts import (
    IDENTITY_COMMIT_TAG,
    ISOLATION_LEVELS,
    ROW_TRACKING_DOMAIN,
    Footprint,
    WinningCommit,
    check_winner,
)
from lakequery.protocol.features import Protocol, check_table_writable
from lakequery.protocol.log_files import LogFile
from lakequery.protocol.properties import TableProperties, parse_bool
from lakequery.row_tracking.columns import commit_tags
from lakequery.snapshot import Snapshot
from lakequery.storage import Storage

log = logging.getLogger("lakequery.txn")
#: System domains lakequery implements and may write (row tracking, clustering).
_OWN_SYSTEM_DOMAINS = frozenset({ROW_TRACKING_DOMAIN, *CLUSTERING_DOMAINS})

#: Attempts before :meth:`Transaction.commit` gives up on a table that never stops moving.
DEFAULT_MAX_ATTEMPTS = 100


def engine_info() -> str:
    """``lakequery/<version>`` for ``commitInfo.engineInfo``."""
    from lakequery import __version__

    return f"lakequery/{__version__}"


@dataclass(frozen=True)
class CommitAttempt:
    """The outcome of one put-if-absent of a commit file.

    Attributes:
        version: the version tried.
        committed: True if this attempt created the commit file.
    """

    version: int
    committed: bool


@dataclass(frozen=True)
class CommitResult:
    """A committed transaction.

    Attributes:
        version: the committed version.
        attempts: how many versions were tried (1 = no race lost).
        winners_checked: concurrent commits checked for conflicts on the way.
        checkpoint_written: whether a checkpoint of this version was written afterwards.
    """

    version: int
    attempts: int
    winners_checked: int = 0
    checkpoint_written: bool = False


def commit_path(storage: Storage, version: int) -> str:
    return storage.join("_delta_log", f"{version:020d}.json")


def _dv_id(dv: Mapping[str, Any] | None) -> str | None:
    if not dv:
        return None
    return f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}@{dv.get('offset')}"


def _num_records(add: Mapping[str, Any]) -> int:
    stats = add.get("stats")
    value = json.loads(stats).get("numRecords") if stats else None
    if value is None:
        raise CommitError(f"row tracking needs stats.numRecords on {add.get('path')!r}")
    return int(value)


@dataclass
class _RowTracking:
    high_water_mark: int


@dataclass
class _Staged:
    adds: list[dict[str, Any]] = field(default_factory=list)
    removes: list[dict[str, Any]] = field(default_factory=list)
    cdc: list[dict[str, Any]] = field(default_factory=list)
    txns: dict[str, int] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)


class Transaction:
    """One optimistic transaction against a table.

    Args:
        storage: the table's storage.
        snapshot: the version the transaction reads (None: it creates the table).
        operation: ``commitInfo.operation`` (``WRITE``, ``CREATE TABLE``, ``DELETE``...).
        parameters: ``commitInfo.operationParameters`` (values are JSON-encoded).
        isolation_level: ``WriteSerializable`` (default, or the table's
            ``delta.isolationLevel``) or ``Serializable``. Transactions whose file actions
            all have ``dataChange=false`` run under ``SnapshotIsolation``.
    """

    def __init__(
        self,
        storage: Storage,
        snapshot: Snapshot | None,
        *,
        operation: str,
        parameters: Mapping[str, Any] | None = None,
        isolation_level: str | None = None,
    ) -> None:
        self.storage = storage
        self.snapshot = snapshot
        self.read_version = snapshot.version if snapshot is not None else -1
        self.operation = operation
        self.parameters = dict(parameters or {})
        self.txn_id = str(uuid.uuid4())
        self.metrics: dict[str, Any] = {}
        self.user_metadata: str | None = None
        #: ``commitInfo.tags`` (e.g. the identity high-water-mark-only tag).
        self.tags: dict[str, str] = {}
        self._protocol: Protocol | None = snapshot.protocol if snapshot else None
        self._metadata: Metadata | None = snapshot.metadata if snapshot else None
        self._new_protocol: Protocol | None = None
        self._new_metadata: Metadata | None = None
        self._staged = _Staged()
        self._read_whole = False
        self._read_predicates: list[str] = []
        self._read_files: set[str] = set()
        self._read_apps: set[str] = set()
        self._read_domains: set[str] = set()
        self._isolation = isolation_level
        self._domains = dict(snapshot.domains) if snapshot else {}
        self._prev_ict: int | None = None
        self._prev_commit_ms: int | None = None

    # -- what the transaction read -------------------------------------------------------------
    def read_whole_table(self) -> None:
        """Records that the result depends on every file of the table."""
        self._read_whole = True

    def read_predicate(self, predicate: str | None) -> None:
        """Records a predicate used to select files (None: the whole table)."""
        if predicate is None:
            self._read_whole = True
        else:
            self._read_predicates.append(predicate)

    def read_files(self, paths: Iterable[str]) -> None:
        """Records files read (decoded paths relative to the root, as ``Snapshot.files()``)."""
        self._read_files.update(paths)

    def read_app_id(self, app_id: str) -> None:
        """Records that the transaction looked at the ``txn`` version of ``app_id``."""
        self._read_apps.add(app_id)

    def read_domain(self, domain: str) -> None:
        """Records that the transaction was decided on the configuration of ``domain``
        (an ALTER checks the clustering columns): a winner that changes it conflicts."""
        self._read_domains.add(domain)

    # -- what it writes ---------------------------------------------------------------------------
    def add_files(self, adds: Iterable[Mapping[str, Any]]) -> None:
        """Stages ``add`` actions (JSON form)."""
        self._staged.adds.extend(dict(a) for a in adds)

    def remove_files(self, removes: Iterable[Mapping[str, Any]]) -> None:
        """Stages ``remove`` actions (JSON form)."""
        self._staged.removes.extend(dict(r) for r in removes)

    def add_cdc_files(self, cdc: Iterable[Mapping[str, Any]]) -> None:
        """Stages ``cdc`` actions (JSON form)."""
        self._staged.cdc.extend(dict(c) for c in cdc)

    def add_actions(self, actions: Iterable[Mapping[str, Any]]) -> None:
        """Stages file actions given in the one-key form ``{"add": {...}}``/``{"remove": ...}``."""
        for action in actions:
            (kind, body), *_ = action.items()
            {"add": self._staged.adds, "remove": self._staged.removes, "cdc": self._staged.cdc}[
                kind
            ].append(dict(body))

    def set_metadata(self, metadata: Metadata) -> None:
        """Commits a new ``metaData`` action."""
        self._new_metadata = metadata

    def set_protocol(self, protocol: Protocol) -> None:
        """Commits a new ``protocol`` action."""
        self._new_protocol = protocol

    def set_app_transaction(self, app_id: str, version: int) -> None:
        """Commits a ``txn`` action (idempotent writes)."""
        self._staged.txns[app_id] = int(version)

    def set_domain(self, domain: str, configuration: str, *, removed: bool = False) -> None:
        """Commits a ``domainMetadata`` action."""
        if domain.startswith("delta.") and domain not in _OWN_SYSTEM_DOMAINS:
            raise CommitError(f"system domain {domain!r} is not lakequery's to change")
        self._staged.domains[domain] = {
            "domain": domain,
            "configuration": configuration,
            "removed": removed,
        }

    # -- derived state ----------------------------------------------------------------------------
    @property
    def protocol(self) -> Protocol:
        proto = self._new_protocol or self._protocol
        if proto is None:
            raise CommitError("a new table needs a protocol action")
        return proto

    @property
    def metadata(self) -> Metadata:
        meta = self._new_metadata or self._metadata
        if meta is None:
            raise CommitError("a new table needs a metaData action")
        return meta

    @property
    def data_change(self) -> bool:
        files = self._staged.adds + self._staged.removes
        return any(f.get("dataChange", True) for f in files) or not files

    @property
    def changes_metadata(self) -> bool:
        """Whether a new ``metaData`` action is staged."""
        return self._new_metadata is not None

    @property
    def identity_only_metadata(self) -> bool:
        """The new metadata only moves identity high-water marks (tagged so by the writer)."""
        return self._new_metadata is not None and self.tags.get(IDENTITY_COMMIT_TAG) == "true"

    @property
    def is_blind_append(self) -> bool:
        return (
            not self._staged.removes
            and not self._read_whole
            and not self._read_predicates
            and not self._read_files
            and (self._new_metadata is None or self.identity_only_metadata)
            and self._new_protocol is None
        )

    @property
    def isolation_level(self) -> str:
        files = self._staged.adds + self._staged.removes
        rearranges = bool(files) and not any(f.get("dataChange", True) for f in files)
        # only a pure rearrangement (digest §17.2): a commit that also sets metadata or
        # protocol (row-tracking enablement re-adding files) must see concurrent appends
        if rearranges and self._new_metadata is None and self._new_protocol is None:
            return "SnapshotIsolation"
        level = self._isolation or TableProperties(self.metadata.configuration).isolation_level
        if level not in ISOLATION_LEVELS[:2]:
            raise CommitError(f"unknown isolation level {level!r}")
        return level

    def footprint(self) -> Footprint:
        """What this transaction read and writes, for conflict checks."""
        return Footprint(
            read_version=self.read_version,
            isolation_level=self.isolation_level,
            blind_append=self.is_blind_append,
            read_whole_table=self._read_whole,
            read_predicates=tuple(self._read_predicates),
            read_files=frozenset(self._read_files),
            read_app_ids=frozenset(self._read_apps),
            read_domains=frozenset(self._read_domains),
            removed_files=frozenset(unquote(str(r["path"])) for r in self._staged.removes),
            changes_metadata=self._new_metadata is not None,
            changes_protocol=self._new_protocol is not None,
            domains=frozenset(self._staged.domains),
            identity_only_metadata=self.identity_only_metadata,
        )

    # -- validation -------------------------------------------------------------------------------
    def _validate(self) -> None:
        proto, meta = self.protocol, self.metadata
        check_table_writable(proto, meta.schema, meta.configuration)
        if self._new_metadata is not None or self._new_protocol is not None:
            clashes = change_feed_column_clashes(meta, proto)
            if clashes:
                raise SchemaError(
                    f"columns {clashes} are named like the change data feed's own "
                    "(delta.enableChangeDataFeed=true): rename them or leave the feed off"
                )
        # appendOnly: the table as read decides (Delta's rule): a commit that also replaces
        # the metadata (RESTORE to an older version, an overwrite that unsets the property)
        # cannot lift the restriction on its own removes
        read = self.snapshot.metadata if self.snapshot is not None else meta
        removes_data = any(r.get("dataChange", True) for r in self._staged.removes)
        if removes_data and TableProperties(read.configuration).append_only:
            raise AppendOnlyError(self.storage.root, self.operation)
        adds: set[str] = set()
        keys = {key for _, key, _ in partition_specs(meta, proto)}
        for a in self._staged.adds:
            if a["path"] in adds:
                raise CommitError(f"file {a['path']!r} is added twice in one commit")
            adds.add(a["path"])
            missing = keys - set(a.get("partitionValues") or {})
            if missing:
                raise CommitError(f"add {a['path']!r} lacks partition values for {missing}")
        removed: set[str] = set()
        add_keys = {(a["path"], _dv_id(a.get("deletionVector"))) for a in self._staged.adds}
        for r in self._staged.removes:
            if r["path"] in removed:
                raise CommitError(f"file {r['path']!r} is removed twice in one commit")
            removed.add(r["path"])
            if (r["path"], _dv_id(r.get("deletionVector"))) in add_keys:
                raise CommitError(f"file {r['path']!r} is added and removed with the same DV")

    # -- building the commit ----------------------------------------------------------------------
    def _row_tracking_on(self) -> bool:
        props = self.metadata.configuration
        return self.protocol.supports("rowTracking") and not parse_bool(
            props.get("delta.rowTrackingSuspended")
        )

    def _high_water_mark(self) -> int:
        config = self._domains.get(ROW_TRACKING_DOMAIN)
        if not config:
            return -1
        return int(json.loads(config).get("rowIdHighWaterMark", -1))

    def _ict_on(self) -> bool:
        return TableProperties(self.metadata.configuration).in_commit_timestamps

    def _previous_ict(self) -> int | None:
        if self._prev_ict is not None or self.snapshot is None:
            return self._prev_ict
        old = TableProperties(self.snapshot.metadata.configuration)
        if old.in_commit_timestamps:
            info = self.snapshot.commit_info or {}
            if info.get("inCommitTimestamp") is not None:
                self._prev_ict = int(info["inCommitTimestamp"])
        return self._prev_ict

    def build_actions(self, version: int, *, now_ms: int | None = None) -> list[dict[str, Any]]:
        """The actions of the commit at ``version``, ``commitInfo`` first."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        meta = self._new_metadata
        info: dict[str, Any] = {"timestamp": now}
        if self._ict_on():
            floor = max(self._previous_ict() or 0, self._prev_commit_ms or 0)
            was_on = (
                self.snapshot is not None
                and TableProperties(self.snapshot.metadata.configuration).in_commit_timestamps
            )
            enabling = meta is not None and version > 0 and not was_on
            if enabling and self.snapshot is not None and self.snapshot.timestamp is not None:
                # above the previous commit's time as time travel reads it (its file's
                # time: the store's clock, which may run ahead of this one; digest §14)
                floor = max(floor, int(self.snapshot.timestamp.timestamp() * 1000))
            ict = max(now, floor + 1)
            info = {"inCommitTimestamp": ict, "timestamp": now}
            if enabling:
                assert meta is not None
                config = dict(meta.configuration)
                config["delta.inCommitTimestampEnablementVersion"] = str(version)
                config["delta.inCommitTimestampEnablementTimestamp"] = str(ict)
                meta = replace(meta, configuration=config)
        info.update(
            {
                "operation": self.operation,
                "operationParameters": {
                    k: v if isinstance(v, str) else json.dumps(v)
                    for k, v in self.parameters.items()
                },
                "isolationLevel": self.isolation_level,
                "isBlindAppend": self.is_blind_append,
                "operationMetrics": {k: str(v) for k, v in self.metrics.items()},
                "engineInfo": engine_info(),
                "txnId": self.txn_id,
            }
        )
        tags = commit_tags(self.metadata.configuration) if self._row_tracking_on() else {}
        if tags:
            info["tags"] = tags
        if self.read_version >= 0:
            info["readVersion"] = self.read_version
        if self.user_metadata is not None:
            info["userMetadata"] = self.user_metadata
        if self.tags:  # beside the row-tracking tags, not instead of them
            info["tags"] = {**info.get("tags", {}), **self.tags}
        actions: list[dict[str, Any]] = [{"commitInfo": info}]
        if self._new_protocol is not None:
            actions.append({"protocol": self._new_protocol.to_action()})
        if meta is not None:
            actions.append({"metaData": meta.to_action()})
        adds = [dict(a) for a in self._staged.adds]
        domains = dict(self._staged.domains)
        if self._row_tracking_on():
            mark = self._high_water_mark()
            start = mark
            for a in adds:
                if a.get("baseRowId") is None:
                    a["baseRowId"] = mark + 1
                    mark += _num_records(a)
                if a.get("defaultRowCommitVersion") is None:
                    a["defaultRowCommitVersion"] = version
            if mark != start:
                domains[ROW_TRACKING_DOMAIN] = {
                    "domain": ROW_TRACKING_DOMAIN,
                    "configuration": json.dumps({"rowIdHighWaterMark": mark}),
                    "removed": False,
                }
        actions.extend({"domainMetadata": d} for d in domains.values())
        for app, v in self._staged.txns.items():
            actions.append({"txn": {"appId": app, "version": v, "lastUpdated": now}})
        actions.extend({"remove": r} for r in self._staged.removes)
        actions.extend({"add": a} for a in adds)
        actions.extend({"cdc": c} for c in self._staged.cdc)
        return actions

    # -- committing -------------------------------------------------------------------------------
    def try_commit(self, version: int) -> CommitAttempt:
        """One atomic attempt to create the commit file of ``version``; never retries."""
        if version != 0 and self._protocol is None:
            raise CommitError("only version 0 can create a table")
        self._validate()
        lines = [json.dumps(a, separators=(",", ":")) for a in self.build_actions(version)]
        data = ("\n".join(lines) + "\n").encode()
        created = self.storage.put_if_absent(commit_path(self.storage, version), data)
        return CommitAttempt(version, created)

    def commit(self, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> CommitResult:
        """Commits, retrying at later versions while concurrent commits do not conflict.

        Raises:
            CommitConflictError: a subclass naming the kind of conflict; nothing committed.
            CommitRetriesExhaustedError: ``max_attempts`` races lost.
            AppendOnlyError, UnsupportedFeatureError, CommitError: invalid transaction.
        """
        version = self.read_version + 1
        checked = 0
        own = self.footprint()
        specs = (
            partition_specs(self._metadata, self._protocol)
            if self._metadata is not None and self._protocol is not None
            else []
        )
        if version > 0 and not self.storage.exists(commit_path(self.storage, version - 1)):
            self._refuse_removed_winner(version, list_log(self.storage, version).commits)
        for attempt in range(1, max_attempts + 1):
            outcome = self.try_commit(version)
            if outcome.committed:
                written = self._post_commit(version)
                return CommitResult(version, attempt, checked, written)
            if version == 0:
                if self._is_own_commit(0):  # our create landed; its response was lost
                    return CommitResult(0, attempt, checked, False)
                raise TableAlreadyExistsError(self.storage.root)
            winners = list_log(self.storage, version).commits
            if not any(info.version == version for info in winners):
                self._refuse_removed_winner(version, winners)
            for info in winners:
                if info.version < version:
                    continue
                if info.version != version:
                    break  # not contiguous yet (a commit still being written): retry
                try:
                    data = self.storage.read(info.path)
                except ObjectNotFoundError:
                    break
                winner = WinningCommit.from_bytes(info.version, data, path=info.path)
                if (winner.commit_info or {}).get("txnId") == self.txn_id:
                    # Our own earlier attempt landed although its response was lost.
                    return CommitResult(info.version, attempt, checked, False)
                check_winner(
                    own,
                    winner,
                    uri=self.storage.root,
                    partition_specs=specs,
                    check_protocol=self._check_winner_protocol,
                    read_metadata=self._metadata,
                )
                self._absorb(winner, info.modified_ms)
                checked += 1
                version += 1
            time.sleep(min(1.0, 0.005 * 2 ** min(attempt, 8)) * random.random())
        raise CommitRetriesExhaustedError(self.storage.root, max_attempts, version)

    def _refuse_removed_winner(self, version: int, listed: Sequence[LogFile]) -> None:
        """Raises when commits from ``version`` on (``listed``) were written and then
        removed by log cleanup while this transaction was open (past the log retention,
        or a cleanup with a short one): the commit file of ``version`` (or of the read
        version, before the first attempt) is gone while later ones exist. A put of
        ``version`` would then succeed below the newer commits and checkpoint, and no
        reader would ever see it. Otherwise (nothing later, or a winner not yet listed but
        readable: a listing that lags) it returns and the caller goes on.

        Raises:
            CommitConflictError: the concurrent commits cannot be checked for conflicts.
        """
        later = [info.version for info in listed if info.version >= version]
        if not later or self.storage.exists(commit_path(self.storage, version)):
            return
        raise CommitConflictError(
            self.storage.root,
            self.read_version,
            min(later),
            f"the commit of version {version} and possibly later ones were removed by log "
            "cleanup while this transaction was open: they cannot be checked for "
            "conflicts; read the table again",
        )

    def _is_own_commit(self, version: int) -> bool:
        """Whether the commit file of ``version`` is this transaction's (by txnId)."""
        try:
            data = self.storage.read(commit_path(self.storage, version))
        except ObjectNotFoundError:
            return False
        first = data.split(b"\n", 1)[0]
        try:
            info = json.loads(first).get("commitInfo") or {}
        except (ValueError, AttributeError):
            return False
        return bool(info.get("txnId") == self.txn_id)

    def _check_winner_protocol(self, action: Mapping[str, Any]) -> None:
        proto = Protocol.from_action(action)
        meta = self.metadata
        check_table_writable(proto, meta.schema, meta.configuration)
        if self._new_protocol is None:
            self._protocol = proto

    def _absorb(self, winner: WinningCommit, modified_ms: int) -> None:
        """Rebases on a winner that does not conflict: row ids, timestamps, domains."""
        for name, d in winner.domains.items():
            if d.get("removed"):
                self._domains.pop(name, None)
            else:
                self._domains[name] = str(d.get("configuration") or "")
        if winner.metadata is not None and self._new_metadata is None:
            # only reached for identity high-water-mark updates and for features turned
            # on (check_winner): adopt them
            self._metadata = Metadata.from_action(winner.metadata)
        ict = winner.in_commit_timestamp
        self._prev_ict = ict if ict is not None else self._prev_ict
        self._prev_commit_ms = modified_ms

    def _post_commit(self, version: int) -> bool:
        try:
            interval = TableProperties(self.metadata.configuration).checkpoint_interval
        except ValueError as exc:  # a value another writer stored: the commit stands
            log.warning("no checkpoint of version %d: %s", version, exc)
            return False
        if version == 0 or interval <= 0 or version % interval:
            return False
        try:
            from lakequery.checkpoint_writer import write_checkpoint

            write_checkpoint(self.storage, version)
        except Exception as exc:  # a failed checkpoint never fails the commit
            log.warning("checkpoint of version %d failed: %s", version, exc)
            return False
        self._cleanup_expired_logs()
        return True

    def _cleanup_expired_logs(self) -> None:
        """Digest §7.8 after an automatic checkpoint, unless disabled by the table."""
        from lakequery.commands.log_cleanup import cleanup_enabled, cleanup_expired_logs

        if not cleanup_enabled(dict(self.metadata.configuration)):
            return
        try:
            # the committed version's metadata and protocol: no replay to learn them
            cleanup_expired_logs(self.storage, table=(self.metadata, self.protocol))
        except Exception as exc:  # cleanup is housekeeping: it never fails the commit
            log.warning("expired log cleanup failed: %s", exc)
