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
    """Root of every error lakequery raises on purpose."""


# --- table and log ---------------------------------------------------------------------


class TableNotFoundError(LakeQueryError, FileNotFoundError):
    """The location holds no Delta table (no ``_delta_log`` or no commit in it)."""

    def __init__(self, uri: str, detail: str = "") -> None:
        self.uri = uri
        self.detail = detail
        msg = f"no Delta table at {uri!r}"
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


# --- queries ---------------------------------------------------------------------------------


class PredicateError(LakeQueryError, ValueError):
    """A filter expression cannot be parsed or refers to something that does not exist."""

    def __init__(self, predicate: object, reason: str) -> None:
        self.predicate = predicate
        self.reason = reason
        super().__init__(f"invalid predicate {predicate!r}: {reason}")


class DeletionVectorError(LakeQueryError):
    """A deletion vector is missing, corrupt or cannot be applied."""

    def __init__(self, data_file: str, dv: str, reason: str) -> None:
        self.data_file = data_file
        self.dv = dv
        self.reason = reason
        super().__init__(f"deletion vector {dv} of {data_file}: {reason}")


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


class InvalidPathError(LakeQueryError, ValueError):
    """A path in the log escapes the table root or is otherwise unusable."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"refusing path {path!r}: {reason}")


__all__ = [
    "CorruptLogError",
    "DeletionVectorError",
    "InvalidPathError",
    "LakeQueryError",
    "ObjectNotFoundError",
    "PredicateError",
    "ProtocolError",
    "SchemaError",
    "StorageError",
    "TableNotFoundError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
]
