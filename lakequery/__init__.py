"""lakequery: Delta Lake tables for DuckDB, Polars, PyArrow and PySpark.

Example:
    >>> import lakequery as lq
    >>> dt = lq.DeltaTable(lq.demo.example_table())
    >>> dt.snapshot().scan(filter="id < 3").to_arrow().num_rows
    3
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

from lakequery.errors import (
    AlterTableError,
    AppendOnlyError,
    ChangeDataFeedError,
    ClusteringError,
    CommitConflictError,
    CommitError,
    CommitRetriesExhaustedError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    ConstraintViolationError,
    CorruptLogError,
    DeletionVectorError,
    DomainMetadataConflictError,
    IdentityColumnError,
    IdentityConflictError,
    InvalidPathError,
    LakeQueryError,
    MergeConflictError,
    MetadataChangedError,
    ObjectNotFoundError,
    PredicateError,
    ProtocolChangedError,
    ProtocolError,
    RestoreError,
    RetentionError,
    RowTrackingError,
    SchemaError,
    SchemaMismatchError,
    SparkWorkerError,
    StorageError,
    StreamError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)

if TYPE_CHECKING:
    from lakequery import demo
    from lakequery.cdf import ChangeScan
    from lakequery.history import CommitEntry, History
    from lakequery.management.convert import convert_to_delta
    from lakequery.management.detail import TableDetail
    from lakequery.management.repair import RepairResult
    from lakequery.scan import FileTask, Scan, ScanPlan
    from lakequery.snapshot import Snapshot
    from lakequery.sql import sql
    from lakequery.streaming import StreamBatch, StreamOffset
    from lakequery.table import DeltaTable
    from lakequery.txn import CommitResult, Transaction
    from lakequery.writer import WritePlan, WriteResult, WriteState, commit_write, plan_write, write
    from lakequery.writer.identity import Identity

__version__ = "0.1.0"

__all__ = [
    "AlterTableError",
    "AppendOnlyError",
    "ChangeDataFeedError",
    "ChangeScan",
    "ClusteringError",
    "CommitConflictError",
    "CommitEntry",
    "CommitError",
    "CommitResult",
    "CommitRetriesExhaustedError",
    "ConcurrentAppendError",
    "ConcurrentDeleteDeleteError",
    "ConcurrentDeleteReadError",
    "ConcurrentTransactionError",
    "ConstraintViolationError",
    "CorruptLogError",
    "DeletionVectorError",
    "DeltaTable",
    "DomainMetadataConflictError",
    "FileTask",
    "History",
    "Identity",
    "IdentityColumnError",
    "IdentityConflictError",
    "InvalidPathError",
    "LakeQueryError",
    "MergeConflictError",
    "MetadataChangedError",
    "ObjectNotFoundError",
    "PredicateError",
    "ProtocolChangedError",
    "ProtocolError",
    "RepairResult",
    "RestoreError",
    "RetentionError",
    "RowTrackingError",
    "Scan",
    "ScanPlan",
    "SchemaError",
    "SchemaMismatchError",
    "Snapshot",
    "SparkWorkerError",
    "StorageError",
    "StreamBatch",
    "StreamError",
    "StreamOffset",
    "TableAlreadyExistsError",
    "TableDetail",
    "TableNotFoundError",
    "Transaction",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "WritePlan",
    "WriteResult",
    "WriteState",
    "__version__",
    "commit_write",
    "convert_to_delta",
    "demo",
    "plan_write",
    "sql",
    "write",
]

# Everything but the errors is imported on first use (PEP 562), so that `import lakequery`
# loads neither DuckDB nor Polars nor numba nor the demo: name -> module that defines it.
_LAZY: dict[str, str] = {
    "demo": "lakequery.demo",
    "ChangeScan": "lakequery.cdf",
    "CommitEntry": "lakequery.history",
    "CommitResult": "lakequery.txn",
    "DeltaTable": "lakequery.table",
    "FileTask": "lakequery.scan",
    "History": "lakequery.history",
    "Identity": "lakequery.writer.identity",
    "Scan": "lakequery.scan",
    "ScanPlan": "lakequery.scan",
    "Snapshot": "lakequery.snapshot",
    "StreamBatch": "lakequery.streaming",
    "StreamOffset": "lakequery.streaming",
    "RepairResult": "lakequery.management.repair",
    "TableDetail": "lakequery.management.detail",
    "Transaction": "lakequery.txn",
    "WritePlan": "lakequery.writer",
    "WriteResult": "lakequery.writer",
    "WriteState": "lakequery.writer",
    "commit_write": "lakequery.writer",
    "convert_to_delta": "lakequery.management.convert",
    "plan_write": "lakequery.writer",
    "sql": "lakequery.sql",
    "write": "lakequery.writer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        mod = importlib.import_module(module)
        value = mod if name == "demo" else getattr(mod, name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # a submodule the eager imports used to bind as a side effect (lakequery.table, ...)
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Keeps ``lakequery.sql`` the function: importing the submodule ``lakequery.sql``
    (first use, or a user's ``from lakequery.sql import ...``) makes the import system bind
    the module as the package attribute, which the eager imports used to overwrite."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "sql" and isinstance(value, types.ModuleType):
            value = value.sql
        super().__setattr__(name, value)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # pickled by name like any module: Spark's cloudpickle ships closures that refer
        # to ``lq`` (UDFs, mapInArrow functions), and a ModuleType subclass is not found
        # in its table of module reducers
        return importlib.import_module, (self.__name__,)


sys.modules[__name__].__class__ = _Package
