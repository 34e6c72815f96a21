"""Spark Structured Streaming through the ``lakequery`` data source.

Reading (``spark.readStream.format("lakequery")``): offsets are
:class:`~lakequery.streaming.StreamOffset` values as dicts, so the semantics are those
of :meth:`lakequery.DeltaTable.stream`: the table's snapshot first (unless
``startingVersion``/``startingTimestamp``), then each commit's appended files in version
order, OPTIMIZE passed over, a commit that removes data refused (naming its version)
unless ``ignoreDeletes`` / ``skipChangeCommits``, or the change rows with
``readChangeFeed`` (which here needs ``startingVersion`` or ``startingTimestamp``).
Each micro-batch's files between two offsets are planned on the
driver with :func:`lakequery.streaming.source.stream` and cut into read tasks exactly as a
batch read's (:func:`~lakequery.spark.datasource_read.plan_partitions`); executors read
them with lakequery's Arrow engine, deletion vectors applied. The DataFrame's schema is
the table's latest when the query starts; a micro-batch of commits older than a column
added since is read with that newer schema, the column null
(:mod:`lakequery.streaming.evolution`).

Rate limits (``maxFilesPerTrigger`` / ``maxBytesPerTrigger``) cut micro-batches exactly
as ``DeltaTable.stream(max_files_per_batch=..., max_bytes_per_batch=...)`` cuts batches
(a micro-batch may end inside a commit; at least one file each). PySpark 4.2 gives Python
stream readers admission control (SPARK-55304): Spark passes ``latestOffset`` the
micro-batch's start and a read limit, so the limits hold from the first micro-batch of a
query, new or restarted from its checkpoint. The reader's default read limit is
``ReadMaxFiles`` (with ``maxFilesPerTrigger``) or ``ReadMaxBytes`` (with only
``maxBytesPerTrigger``): PySpark's read limits hold one bound each, so with both options
the byte bound comes from the options, and a micro-batch ends at whichever bound it
reaches first (delta-spark's composite limit). When Spark passes ``ReadAllAvailable``
the options are ignored, as the API requires. ``Trigger.AvailableNow`` reads everything
committed when the query starts and nothing committed later, in rate-limited
micro-batches (the reader is a ``SupportsTriggerAvailableNow``, as delta-spark's source
is; without limits, one micro-batch).

PySpark 4.0 and 4.1 ask a Python stream reader for the latest offset without the
micro-batch's start (and before they ask a new query for its initial offset), so there the
limits count from the end of the micro-batch this reader planned last: the first
micro-batch of a query (new or restarted) takes everything committed, later ones respect
the limits, and ``Trigger.AvailableNow`` reads in ONE micro-batch.

Writing (``df.writeStream.format("lakequery")``, output mode ``append``): tasks write
Parquet files as a batch write's do; Spark's commit of micro-batch ``n`` commits them as
ONE table version carrying ``txn(appId, version=n)``. ``appId`` is the streaming query's
id, read from the ``metadata`` file in ``checkpointLocation`` (the id survives restarts
with the same checkpoint), or the ``txnAppId`` option. A micro-batch that Spark replays
after a crash between the table commit and its own checkpoint commit finds its
``txn`` version in the table and commits nothing: no row is written twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType as SparkStruct

try:  # PySpark 4.2+: admission control for Python stream readers (SPARK-55304)
    from pyspark.sql.streaming import datasource as _limits
except ImportError:  # PySpark 4.0/4.1: latestOffset() is asked without start or limit
    _limits = None

from lakequery.spark.conform import conform_batch, spark_arrow_schema
from lakequery.spark.datasource_options import (
    DEFAULT_MAX_PARTITION_BYTES,
    _bool,
    _check_known,
    _int,
    _json_object,
    _lowered,
    _path,
    write_options,
)
from lakequery.spark.datasource_read import (
    FilesPartition,
    output_columns,
    plan_partitions,
    read_partition,
)
from lakequery.spark.datasource_write import AddedFiles, DeltaWriter, PlannedWrite
from lakequery.spark.schema import logical_schema

if TYPE_CHECKING:
    from lakequery.scan import Scan
    from lakequery.streaming import StreamOffset
    from lakequery.table import DeltaTable

log = logging.getLogger("lakequery.spark")

_STREAM_READ = {
    name.lower(): name
    for name in (
        "path",
        "storage_options",
        "startingVersion",
        "startingTimestamp",
        "maxFilesPerTrigger",
        "maxBytesPerTrigger",
        "ignoreDeletes",
        "skipChangeCommits",
        "readChangeFeed",
        "maxPartitionBytes",
    )
}


@dataclass(frozen=True)
class StreamReadOptions:
    """A streaming read's options (names as in delta-spark, case-insensitive)."""

    uri: str
    storage_options: dict[str, Any] | None = None
    starting_version: int | None = None
    starting_timestamp: str | None = None
    max_files: int | None = None
    max_bytes: int | None = None
    ignore_deletes: bool = False
    skip_change_commits: bool = False
    change_feed: bool = False
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES

    def table(self) -> DeltaTable:
        from lakequery.table import DeltaTable

        return DeltaTable(self.uri, storage_options=self.storage_options)


def stream_read_options(options: Mapping[str, str]) -> StreamReadOptions:
    """Parses a streaming read's options.

    Raises:
        ValueError: an unknown option, a malformed value or a contradiction.
    """
    opts = _lowered(options)
    _check_known(opts, _STREAM_READ, "streaming read")
    out = StreamReadOptions(
        uri=_path(opts),
        storage_options=_json_object(opts, "storage_options", "storage_options"),
        starting_version=_int(opts, "startingversion", "startingVersion"),
        starting_timestamp=(opts.get("startingtimestamp") or "").strip() or None,
        max_files=_int(opts, "maxfilespertrigger", "maxFilesPerTrigger"),
        max_bytes=_int(opts, "maxbytespertrigger", "maxBytesPerTrigger"),
        ignore_deletes=_bool(opts, "ignoredeletes", "ignoreDeletes"),
        skip_change_commits=_bool(opts, "skipchangecommits", "skipChangeCommits"),
        change_feed=_bool(opts, "readchangefeed", "readChangeFeed"),
        max_partition_bytes=_int(opts, "maxpartitionbytes", "maxPartitionBytes")
        or DEFAULT_MAX_PARTITION_BYTES,
    )
    if out.starting_version is not None and out.starting_timestamp is not None:
        raise ValueError("pass startingVersion or startingTimestamp, not both")
    if out.change_feed and out.starting_version is None and out.starting_timestamp is None:
        # the starting snapshot as inserts would need the change columns added on the
        # executors; DeltaTable.stream(read_change_feed=True) has it
        raise ValueError(
            "a streaming readChangeFeed from this source needs startingVersion or startingTimestamp"
        )
    for name, value in (
        ("maxFilesPerTrigger", out.max_files),
        ("maxBytesPerTrigger", out.max_bytes),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be positive, not {value}")
    return out


def stream_schema(options: StreamReadOptions) -> SparkStruct:
    """The DataFrame schema of a stream: the table's latest logical schema, plus the
    change columns with ``readChangeFeed``."""
    from lakequery.cdf import CHANGE_COLUMNS, _change_metadata

    snap = options.table().snapshot()
    meta = snap.metadata
    names = [f.name for f in meta.schema]
    if not options.change_feed:
        return logical_schema(meta.schema, names)
    feed = _change_metadata(meta, snap.column_mapping_mode, False)
    return logical_schema(feed.schema, [*names, *CHANGE_COLUMNS])


#: Whether this PySpark passes a stream reader the micro-batch's start and a read limit.
ADMISSION_CONTROL = _limits is not None


class DeltaStreamReader(DataSourceStreamReader):  # type: ignore[misc]  # pyspark is untyped here
    """Micro-batches of a table for Structured Streaming (see the module's docs)."""

    def __init__(self, options: StreamReadOptions, schema: SparkStruct, parallelism: int) -> None:
        self.options = options
        self.schema_json = schema.json()
        self.parallelism = parallelism
        #: the end offset handed out last (None until this reader handed one out); only
        #: PySpark without admission control needs it
        self._last: dict[str, Any] | None = None
        #: with Trigger.AvailableNow: the position after the last commit when the query
        #: started (no micro-batch goes past it)
        self._target: StreamOffset | None = None
        #: the micro-batch _next_end planned to find its end, kept for partitions() to
        #: take instead of parsing the same commits again: (start, end, its scans)
        self._planned: tuple[StreamOffset, StreamOffset, list[Scan]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # the planned micro-batch holds snapshots, and only the driver's copy uses it
        return {**self.__dict__, "_planned": None}

    def _schema(self) -> SparkStruct:
        return SparkStruct.fromJson(json.loads(self.schema_json))

    def _stream_args(self) -> dict[str, Any]:
        o = self.options
        return {
            "ignore_deletes": o.ignore_deletes,
            "skip_change_commits": o.skip_change_commits,
            "read_change_feed": o.change_feed,
        }

    def initialOffset(self) -> dict[str, Any]:
        from lakequery.cdf import _resolve_range
        from lakequery.streaming import StreamOffset
        from lakequery.streaming.source import start_offset

        o, dt = self.options, self.options.table()
        version = o.starting_version
        if o.starting_timestamp is not None:
            version = _resolve_range(dt, None, None, o.starting_timestamp, None).start
        target = self._target
        if version is None and target is not None:
            # Trigger.AvailableNow fixed its end first: the starting snapshot is the one
            # at that end, not a newer one committed since
            return _as_dict(StreamOffset(target.version - 1, -1, True, target.table_id))
        return _as_dict(start_offset(dt, version))

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        """The end of the next micro-batch.

        PySpark 4.2+ passes the micro-batch's ``start`` and a read limit (Spark then sees
        the two parameters and enables admission control); PySpark 4.0/4.1 pass neither.
        """
        from lakequery.streaming import StreamOffset

        o = self.options
        if start is not None:
            max_files, max_bytes = self._bounds(limit)
            begin = StreamOffset.parse(start)
            end = self._next_end(begin, max_files, max_bytes)
            return start if end == begin else _as_dict(end)
        if self._last is None:  # the first micro-batch: Spark knows its start, not us
            snap = o.table().snapshot()
            end = StreamOffset(snap.version + 1, -1, False, snap.metadata.id)
        else:
            end = self._next_end(StreamOffset.parse(self._last), o.max_files, o.max_bytes)
        self._last = _as_dict(end)
        return self._last

    def _bounds(self, limit: Any) -> tuple[int | None, int | None]:
        """The (files, bytes) bounds of a micro-batch under Spark's read limit."""
        o = self.options
        if _limits is None or isinstance(limit, _limits.ReadAllAvailable):
            return None, None
        if isinstance(limit, _limits.ReadMaxFiles):
            return int(limit.max_files), o.max_bytes
        if isinstance(limit, _limits.ReadMaxBytes):
            return o.max_files, int(limit.max_bytes)
        return o.max_files, o.max_bytes  # a limit this source does not count by: its options

    def getDefaultReadLimit(self) -> Any:
        """``ReadMaxFiles`` / ``ReadMaxBytes`` from the options, else ``ReadAllAvailable``
        (PySpark 4.2+ only)."""
        assert _limits is not None  # Spark asks only when it passes limits
        o = self.options
        if o.max_files is not None:
            return _limits.ReadMaxFiles(o.max_files)
        if o.max_bytes is not None:
            return _limits.ReadMaxBytes(o.max_bytes)
        return _limits.ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fixes the end of a ``Trigger.AvailableNow`` query: after the last commit now
        (PySpark 4.2+ only; called before any offset is asked)."""
        from lakequery.streaming import StreamOffset

        snap = self.options.table().snapshot()
        self._target = StreamOffset(snap.version + 1, -1, False, snap.metadata.id)

    def _next_end(
        self, begin: StreamOffset, max_files: int | None, max_bytes: int | None
    ) -> StreamOffset:
        """Where a micro-batch from ``begin`` ends: after the last commit in the log now
        (and before an AvailableNow query's end), cut by the bounds as
        :meth:`lakequery.DeltaTable.stream` cuts batches; ``begin`` when nothing is new.

        The commits are listed once and the batch planned up to that listing's end, so a
        commit landing meanwhile is left for the next micro-batch, never passed over."""
        from lakequery.streaming import StreamOffset
        from lakequery.streaming.source import latest_offset, stream

        dt = self.options.table()
        bound = latest_offset(dt, begin)
        if begin.snapshot:  # the starting snapshot's files are still to read
            bound = max(bound, StreamOffset(begin.version + 1, -1, False, begin.table_id))
        if self._target is not None:
            bound = min(bound, self._target)
        if bound <= begin:
            return begin
        if max_files is None and max_bytes is None:
            return bound
        # The first micro-batch of a backlog ends where the bounds cut it, which the
        # commits after that cut cannot change: the commits are parsed in growing windows
        # until a window holds more than that micro-batch (or reaches the bound), so a
        # micro-batch costs what its window does, not the whole backlog (catching up on
        # a long backlog would otherwise be quadratic).
        window = FIRST_WINDOW
        while True:
            end = min(bound, StreamOffset(begin.version + window, -1, False, begin.table_id))
            batches = iter(
                stream(
                    dt,
                    starting_offset=begin,
                    ending_offset=end,
                    max_files_per_batch=max_files,
                    max_bytes_per_batch=max_bytes,
                    **self._stream_args(),
                )
            )
            first = next(batches, None)
            if end == bound:
                break
            if first is not None and _has_more(batches):
                break  # the bounds cut the first micro-batch inside the window
            window *= 4
        # no batch: the range holds no files to deliver (OPTIMIZE, skipped commits)
        if first is None:
            return bound
        self._planned = (begin, first.offset, _with_files(first._scan.scans))
        return first.offset

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[FilesPartition]:  # type: ignore[override]
        from lakequery.streaming import StreamOffset
        from lakequery.streaming.source import stream

        self._last = end  # where the next micro-batch starts
        if start == end:
            return []
        requested = self._schema()
        planned, self._planned = self._planned, None
        begin, until = StreamOffset.parse(start), StreamOffset.parse(end)
        if planned is not None and planned[:2] == (begin, until):
            scans = planned[2]  # the range latestOffset just planned
        else:  # e.g. a micro-batch replayed from Spark's offset log after a restart
            batches = stream(
                self.options.table(),
                starting_offset=begin,
                ending_offset=until,
                **self._stream_args(),
            )
            scans = _with_files([s for b in batches for s in b._scan.scans])
        if not scans:
            return []
        meta = scans[0].snapshot.metadata
        table = logical_schema(meta.schema, scans[0].columns)
        if not {f.name.lower() for f in requested.fields} <= {n.lower() for n in table.names}:
            # commits older than a column the query's schema has (it is the table's schema
            # when the query started): read them with the newest schema, as Spark's
            # schema says (the column is null in them)
            from lakequery.streaming.evolution import with_schema_of

            dt = self.options.table()
            scans = with_schema_of(dt, scans, dt.snapshot())
            meta = scans[0].snapshot.metadata
            table = logical_schema(meta.schema, scans[0].columns)
        columns = output_columns(requested, table)
        return plan_partitions(
            scans,
            columns,
            None,
            parallelism=self.parallelism,
            max_partition_bytes=self.options.max_partition_bytes,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FilesPartition):
            return
        target = spark_arrow_schema(self._schema())
        for batch in read_partition(partition, self.options.uri, self.options.storage_options):
            if batch.num_rows:
                yield conform_batch(batch, target)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the table is read, never consumed."""


def _with_files(scans: list[Scan]) -> list[Scan]:
    return [s for s in scans if s.plan().num_files]


#: Commits of the first window a rate-limited micro-batch is planned in (growing 4x).
FIRST_WINDOW = 32


def _has_more(batches: Iterator[Any]) -> bool:
    """Whether a stream yields another batch; a stream that stops at a commit it cannot go
    past counts as having more (the batch before that commit is whole)."""
    from lakequery.errors import StreamError

    try:
        return next(batches, None) is not None
    except StreamError:
        return True


def _as_dict(offset: StreamOffset) -> dict[str, Any]:
    return json.loads(offset.to_json())  # type: ignore[no-any-return]


if _limits is not None:
    # Spark runs a Trigger.AvailableNow query in rate-limited micro-batches up to the end
    # fixed by prepareForTriggerAvailableNow only for readers of this (abstract) class
    _limits.SupportsTriggerAvailableNow.register(DeltaStreamReader)


# -- the sink --------------------------------------------------------------------------------


def query_app_id(options: Mapping[str, str]) -> str:
    """The ``txn`` app id of a streaming write: ``txnAppId``, else the query id stored in
    ``<checkpointLocation>/metadata``."""
    opts = _lowered(options)
    given = (opts.get("txnappid") or "").strip()
    if given:
        return given
    location = (opts.get("checkpointlocation") or "").strip()
    if not location:
        raise ValueError(
            "a lakequery streaming write needs .option('checkpointLocation', ...) (its "
            "query id makes each micro-batch's commit idempotent) or .option('txnAppId', ...)"
        )
    from lakequery.storage import open_storage

    storage = open_storage(location, _json_object(opts, "storage_options", "storage_options"))
    try:
        doc = json.loads(storage.read(storage.join("metadata")).decode().splitlines()[0])
    except Exception as exc:
        raise ValueError(
            f"cannot read the streaming query's id from {location!r}/metadata: {exc}"
        ) from exc
    return str(doc["id"])


class DeltaStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]  # pyspark is untyped here
    """Appends each micro-batch as one table version with ``txn(appId, batchId)``.

    The write is planned when the query starts; tasks write files with that plan. A
    commit plans again when the table did not exist then (the first micro-batch created
    it), so later micro-batches append instead of creating it again.
    """

    def __init__(
        self, planned: PlannedWrite, app_id: str, options: dict[str, str], schema_json: str
    ) -> None:
        self.planned = planned
        self.app_id = app_id
        self.options = options
        self.schema_json = schema_json

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AddedFiles:
        """Writes the task's rows (executor); nothing is committed here."""
        return DeltaWriter(self.planned).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        """Commits micro-batch ``batchId`` unless the table already has it (driver)."""
        from lakequery.errors import TableNotFoundError
        from lakequery.spark.datasource_write import plan
        from lakequery.table import DeltaTable

        dt = DeltaTable(self.planned.uri, storage_options=self.planned.storage_options)
        try:
            done = dt.snapshot().txns.get(self.app_id, -1)
        except TableNotFoundError:
            done = None
        if done is not None and done >= batchId:
            log.info(
                "micro-batch %d of %s is already in %s (txn version %d): not committed again",
                batchId,
                self.app_id,
                self.planned.uri,
                done,
            )
            return
        planned = self.planned
        if done is not None and planned.read_version is None:  # created meanwhile
            schema = SparkStruct.fromJson(json.loads(self.schema_json))
            planned = replace(
                plan(write_options(self.options, overwrite=False), schema), state=planned.state
            )
        DeltaWriter(replace(planned, app_id=self.app_id, app_version=int(batchId))).commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        DeltaWriter(self.planned).abort(messages)


def stream_writer(
    options: Mapping[str, str], schema: SparkStruct, overwrite: bool
) -> DeltaStreamWriter:
    """Plans a streaming write (driver, once per query start)."""
    from lakequery.spark.datasource_write import plan

    if overwrite:
        raise ValueError(
            "a lakequery streaming write supports outputMode('append') only (each "
            "micro-batch is appended as one version)"
        )
    app_id = query_app_id(options)
    rest = {k: v for k, v in options.items() if k.lower() not in ("checkpointlocation", "txnappid")}
    planned = plan(write_options(rest, overwrite=False), schema)
    return DeltaStreamWriter(planned, app_id, rest, schema.json())


__all__ = [
    "ADMISSION_CONTROL",
    "DeltaStreamReader",
    "DeltaStreamWriter",
    "StreamReadOptions",
    "query_app_id",
    "stream_read_options",
    "stream_schema",
    "stream_writer",
]
