"""The lakequery error tree.

Every error lakequery raises on purpose derives from :class:`LakeQueryError`. Where a
builtin exception fits, the lakequery error inherits it too, so that code written for
the builtin keeps working (``except FileNotFoundError`` catches a missing table).

Messages are built from structured fields, which stay available as attributes.

Example:
    >>> import lakequery as lq
    >>> try:
    ...     lq.DeltaTable("/nonexistent/table").snapshot()
    ... except lq.TableNotFoundError as exc:
    ...     print(exc.uri)
    /nonexistent/table
"""

from __future__ import annotations


class LakeQueryError(Exception):
    """Root of every error lakequery raises on purpose.

    Errors pickle with their structured fields (for multiprocessing and Spark workers).
    """

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(
    cls: type[LakeQueryError], args: tuple[object, ...], state: dict[str, object]
) -> LakeQueryError:
    """Recreates an unpickled error without calling its ``__init__``."""
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


# --- table and log ---------------------------------------------------------------------


class TableNotFoundError(LakeQueryError, FileNotFoundError):
    """The location holds no Delta table (no ``_delta_log`` or no commit in it)."""

    def __init__(self, uri: str, detail: str = "") -> None:
        self.uri = uri
        self.detail = detail
        msg = f"no Delta table at {uri!r}"
        super().__init__(msg + (f": {detail}" if detail else ""))


class TableAlreadyExistsError(LakeQueryError, FileExistsError):
    """A table already exists where one was to be created (``mode="error"``, or a race)."""

    def __init__(self, uri: str, detail: str = "") -> None:
        self.uri = uri
        self.detail = detail
        msg = f"a Delta table already exists at {uri!r}"
        super().__init__(msg + (f": {detail}" if detail else ""))


class VersionNotFoundError(LakeQueryError, LookupError):
    """The requested version or timestamp cannot be reconstructed from the log."""

    def __init__(
        self,
        uri: str,
        *,
        version: int | None = None,
        timestamp: object = None,
        earliest: int | None = None,
        latest: int | None = None,
        detail: str = "",
    ) -> None:
        self.uri = uri
        self.version = version
        self.timestamp = timestamp
        self.earliest = earliest
        self.latest = latest
        what = f"version {version}" if version is not None else f"timestamp {timestamp}"
        rng = ""
        if earliest is not None and latest is not None:
            rng = f" (reconstructable versions: {earliest}..{latest})"
        msg = f"{what} of table {uri!r} is not available{rng}"
        super().__init__(msg + (f": {detail}" if detail else ""))


class ChangeDataFeedError(LakeQueryError, ValueError):
    """The change data feed of a version range cannot be read: the feed was not enabled
    for some version, the schema changed in a non-additive way, or the range itself is
    invalid (start after end, no start given)."""

    def __init__(
        self, uri: str, detail: str, *, start: int | None = None, end: int | None = None
    ) -> None:
        self.uri = uri
        self.detail = detail
        self.start = start
        self.end = end
        rng = f" (versions {start}..{end})" if start is not None and end is not None else ""
        super().__init__(f"cannot read the change data feed of {uri!r}{rng}: {detail}")


class StreamError(LakeQueryError, ValueError):
    """A stream over a table cannot go on: a commit changes or removes data the stream
    already delivered (and no option says to skip or ignore it), the schema changed in a
    non-additive way, the table was replaced, or the arguments are invalid. ``version``
    names the commit when one is at fault."""

    def __init__(self, uri: str, detail: str, *, version: int | None = None) -> None:
        self.uri = uri
        self.detail = detail
        self.version = version
        at = f" at version {version}" if version is not None else ""
        super().__init__(f"cannot stream {uri!r}{at}: {detail}")


class CorruptLogError(LakeQueryError):
    """A log file is missing, truncated, garbled or inconsistent; names the file."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"corrupt Delta log at {path}: {reason}")


# --- protocol, features and schema -------------------------------------------------------


class ProtocolError(LakeQueryError):
    """The table's protocol cannot be honoured by lakequery."""


class UnsupportedFeatureError(ProtocolError, NotImplementedError):
    """A table feature (or legacy protocol version) lakequery does not implement."""

    def __init__(self, feature: str, *, operation: str = "read", detail: str = "") -> None:
        self.feature = feature
        self.operation = operation
        msg = f"table feature {feature!r} is not supported for {operation} by lakequery"
        super().__init__(msg + (f": {detail}" if detail else ""))


class SchemaError(LakeQueryError, ValueError):
    """A schema cannot be parsed, converted or reconciled."""


class SchemaMismatchError(SchemaError):
    """Data written to a table does not fit its schema; names the column and both types."""

    def __init__(self, column: str, expected: str, found: str, detail: str = "") -> None:
        self.column = column
        self.expected = expected
        self.found = found
        self.detail = detail
        msg = f"column {column!r}: table has {expected}, data has {found}"
        super().__init__(msg + (f" ({detail})" if detail else ""))


class IdentityColumnError(LakeQueryError, ValueError):
    """An identity column is declared or written in a way Delta forbids (explicit values
    for a ``GENERATED ALWAYS`` column, a non-``long`` type, step 0, overflow, UPDATE)."""

    def __init__(self, column: str, reason: str) -> None:
        self.column = column
        self.reason = reason
        super().__init__(f"identity column {column!r}: {reason}")


class ClusteringError(SchemaError):
    """A liquid clustering request the table cannot honour: clustering columns that do not
    exist, cannot be keys or get no statistics, ``partition_by`` together with
    ``cluster_by``, or ``z_order_by`` on a clustered table."""


class ConstraintViolationError(LakeQueryError, ValueError):
    """Rows break a CHECK constraint, a column invariant or a generated column's expression."""

    def __init__(self, constraint: str, expression: str, detail: str = "") -> None:
        self.constraint = constraint
        self.expression = expression
        self.detail = detail
        msg = f"constraint {constraint!r} ({expression}) violated"
        super().__init__(msg + (f": {detail}" if detail else ""))


class AlterTableError(LakeQueryError, ValueError):
    """``DeltaTable.alter`` refuses a change: it names a column, property, constraint or
    feature that does not fit the table, or the protocol does not allow it. Nothing is
    committed."""

    def __init__(self, uri: str, operation: str, reason: str) -> None:
        self.uri = uri
        self.operation = operation
        self.reason = reason
        super().__init__(f"{operation} on {uri!r} refused: {reason}")


# --- queries ---------------------------------------------------------------------------------


class PredicateError(LakeQueryError, ValueError):
    """A filter expression cannot be parsed or refers to something that does not exist
    (also a column list's unknown or repeated name: ``kind="column"``)."""

    def __init__(self, predicate: object, reason: str, *, kind: str = "predicate") -> None:
        self.predicate = predicate
        self.reason = reason
        super().__init__(f"invalid {kind} {predicate!r}: {reason}")


class DeletionVectorError(LakeQueryError):
    """A deletion vector is missing, corrupt or cannot be applied."""

    def __init__(self, data_file: str, dv: str, reason: str) -> None:
        self.data_file = data_file
        self.dv = dv
        self.reason = reason
        super().__init__(f"deletion vector {dv} of {data_file}: {reason}")


class MergeConflictError(LakeQueryError, ValueError):
    """MERGE: one target row is matched by several source rows in an update or delete clause
    (SQL semantics forbid it; nothing is committed)."""

    def __init__(self, file: str, row: int, matches: int) -> None:
        self.file = file
        self.row = row
        self.matches = matches
        super().__init__(
            f"MERGE: target row {row} of {file} is matched by {matches} source rows in an "
            "update or delete clause; make the source unique on the join keys"
        )


# --- commits ---------------------------------------------------------------------------------


class CommitError(LakeQueryError):
    """A transaction could not be committed."""


class AppendOnlyError(CommitError):
    """The table has ``delta.appendOnly=true`` and the commit would remove data."""

    def __init__(self, uri: str, operation: str) -> None:
        self.uri = uri
        self.operation = operation
        super().__init__(
            f"table {uri!r} is append-only (delta.appendOnly=true): {operation} would remove data"
        )


class CommitRetriesExhaustedError(CommitError):
    """Every attempt lost the race for the next version (no logical conflict found)."""

    def __init__(self, uri: str, attempts: int, last_version: int) -> None:
        self.uri = uri
        self.attempts = attempts
        self.last_version = last_version
        super().__init__(
            f"gave up committing to {uri!r} after {attempts} attempts "
            f"(last tried version {last_version})"
        )


class CommitConflictError(CommitError):
    """A concurrent commit makes this transaction's result invalid; nothing was committed.

    Attributes:
        uri: the table.
        read_version: the version the transaction started from.
        winning_version: the concurrent commit it conflicts with.
        reason: what clashed.
    """

    #: The reference implementation's name for the conflict kind.
    kind = "CommitConflict"

    def __init__(self, uri: str, read_version: int, winning_version: int, reason: str) -> None:
        self.uri = uri
        self.read_version = read_version
        self.winning_version = winning_version
        self.reason = reason
        super().__init__(
            f"{self.kind}: commit to {uri!r} (read version {read_version}) conflicts with "
            f"version {winning_version}: {reason}"
        )


class ProtocolChangedError(CommitConflictError):
    """A concurrent commit changed the protocol, or both transactions change it."""

    kind = "ProtocolChanged"


class MetadataChangedError(CommitConflictError):
    """A concurrent commit changed the table metadata (schema, partitioning, properties)."""

    kind = "MetadataChanged"


class IdentityConflictError(MetadataChangedError):
    """A concurrent commit generated identity values from the same high-water mark.

    ``lq.write`` handles it by regenerating its values above the winner's mark and
    retrying; other callers may do the same with
    :func:`lakequery.writer.identity.rebase_identity`.
    """

    kind = "IdentityHighWaterMarkChanged"


class ConcurrentAppendError(CommitConflictError):
    """A concurrent commit added files this transaction should have read."""

    kind = "ConcurrentAppend"


class ConcurrentDeleteReadError(CommitConflictError):
    """A concurrent commit removed a file this transaction read."""

    kind = "ConcurrentDeleteRead"


class ConcurrentDeleteDeleteError(CommitConflictError):
    """A concurrent commit removed a file this transaction also removes."""

    kind = "ConcurrentDeleteDelete"


class ConcurrentTransactionError(CommitConflictError):
    """A concurrent commit wrote a ``txn`` for an application id this transaction read."""

    kind = "ConcurrentTransaction"


class DomainMetadataConflictError(CommitConflictError):
    """Both transactions write the same domain metadata."""

    kind = "DomainMetadataConflict"


# --- storage -----------------------------------------------------------------------------------


class StorageError(LakeQueryError, OSError):
    """An object store or file system operation failed."""

    def __init__(self, uri: str, operation: str, reason: str) -> None:
        self.uri = uri
        self.operation = operation
        self.reason = reason
        super().__init__(f"{operation} {uri}: {reason}")


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object or file does not exist in storage."""

    def __init__(self, uri: str, operation: str = "read") -> None:
        super().__init__(uri, operation, "no such object")


class ShortReadError(StorageError):
    """A range read returned fewer bytes than asked: the range ends past the object's end
    (a reference to the object claims more than it holds)."""


class InvalidPathError(LakeQueryError, ValueError):
    """A path in the log escapes the table root or is otherwise unusable."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"refusing path {path!r}: {reason}")


# --- maintenance -----------------------------------------------------------------------------


class RetentionError(LakeQueryError, ValueError):
    """A VACUUM retention shorter than the table's, without ``enforce_retention=False``.

    Attributes:
        uri: the table.
        retention_hours: the retention asked for.
        table_retention_hours: ``delta.deletedFileRetentionDuration`` in hours.
    """

    def __init__(self, uri: str, retention_hours: float, table_retention_hours: float) -> None:
        self.uri = uri
        self.retention_hours = retention_hours
        self.table_retention_hours = table_retention_hours
        super().__init__(
            f"refusing to VACUUM {uri!r} with a retention of {retention_hours:g} hours: the "
            f"table keeps removed files {table_retention_hours:g} hours "
            "(delta.deletedFileRetentionDuration); readers of older versions could fail. "
            "Pass enforce_retention=False to do it anyway"
        )


class RestoreError(LakeQueryError):
    """A RESTORE cannot bring back a version (e.g. its files were vacuumed).

    Attributes:
        uri: the table.
        version: the version to restore.
        missing: files the restore needs that no longer exist (first few).
    """

    def __init__(self, uri: str, version: int, missing: list[str], reason: str = "") -> None:
        self.uri = uri
        self.version = version
        self.missing = missing
        detail = reason or (
            f"{len(missing)} file(s) it needs no longer exist (vacuumed?), e.g. {missing[:3]}"
        )
        super().__init__(f"cannot restore {uri!r} to version {version}: {detail}")


class RowTrackingError(LakeQueryError, ValueError):
    """Row ids or row commit versions were asked of a table that cannot give them (no
    ``rowTracking`` feature, files without ``baseRowId``, a column clashing with
    ``_row_id``); see :mod:`lakequery.row_tracking`."""


class SparkWorkerError(LakeQueryError, RuntimeError):
    """Spark's Python workers cannot run lakequery (raised before any job starts).

    Attributes:
        python: the Python executable the workers run.
        missing: the modules it cannot import (empty when it could not be asked).
    """

    def __init__(self, python: str, missing: list[str], reason: str = "") -> None:
        self.python = python
        self.missing = missing
        problem = reason or f"cannot import {', '.join(missing)}"
        super().__init__(
            f"Spark's Python workers run {python!r}, which {problem}. Point them at a Python "
            "that has lakequery and pyarrow installed: set the PYSPARK_PYTHON environment "
            "variable before the SparkSession starts (with spark-submit or on a cluster: "
            "spark.pyspark.python, or spark.executorEnv.PYSPARK_PYTHON), or install "
            "lakequery into that Python"
        )


__all__ = [
    "AppendOnlyError",
    "ClusteringError",
    "CommitConflictError",
    "CommitError",
    "CommitRetriesExhaustedError",
    "ConcurrentAppendError",
    "ConcurrentDeleteDeleteError",
    "ConcurrentDeleteReadError",
    "ConcurrentTransactionError",
    "ConstraintViolationError",
    "CorruptLogError",
    "DeletionVectorError",
    "DomainMetadataConflictError",
    "InvalidPathError",
    "LakeQueryError",
    "MergeConflictError",
    "MetadataChangedError",
    "ObjectNotFoundError",
    "PredicateError",
    "ProtocolChangedError",
    "ProtocolError",
    "RestoreError",
    "RetentionError",
    "RowTrackingError",
    "SchemaError",
    "SchemaMismatchError",
    "SparkWorkerError",
    "StorageError",
    "StreamError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
]
