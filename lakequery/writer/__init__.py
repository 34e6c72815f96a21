"""Writing Delta tables: ``lq.write``, the data file writer and its pieces.

* :mod:`~lakequery.writer.api` - :func:`write`, :func:`plan_write`, :func:`commit_write`;
* :mod:`~lakequery.writer.data_files` - Arrow batches -> Parquet files + stats -> ``add``
  actions (:func:`write_data_files`, pure and picklable: it also runs on Spark executors);
* :mod:`~lakequery.writer.state` - :class:`WriteState`, everything a writer needs to know;
* :mod:`~lakequery.writer.add_actions` - add actions <-> Arrow, the ``mapInArrow`` function;
* :mod:`~lakequery.writer.identity` - identity columns: declaration, generated values,
  high-water marks, rebasing after a concurrent writer took the same values;
* :mod:`~lakequery.writer.stats`, :mod:`~lakequery.writer.partition_values`,
  :mod:`~lakequery.writer.constraints`, :mod:`~lakequery.writer.schema_evolution`.
"""

from lakequery.writer.add_actions import (
    ADD_ACTION_SCHEMA,
    add_actions_from_arrow,
    add_actions_to_arrow,
    write_batches_to_arrow,
)
from lakequery.writer.api import WritePlan, WriteResult, commit_write, plan_write, write
from lakequery.writer.data_files import write_data_files
from lakequery.writer.state import WriteState

__all__ = [
    "ADD_ACTION_SCHEMA",
    "WritePlan",
    "WriteResult",
    "WriteState",
    "add_actions_from_arrow",
    "add_actions_to_arrow",
    "commit_write",
    "plan_write",
    "write",
    "write_batches_to_arrow",
    "write_data_files",
]
