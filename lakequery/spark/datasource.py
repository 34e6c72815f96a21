"""The ``lakequery`` Spark data source: Delta tables through ``spark.read.format`` and
``df.write.format``, built on PySpark 4's Python data source API.

After :func:`register`:

.. code-block:: python

    df = spark.read.format("lakequery").load(uri)                     # latest version
    df = spark.read.format("lakequery").option("versionAsOf", 3).load(uri)
    df = spark.read.format("lakequery").option("timestampAsOf", "2026-11-01T00:00:00Z").load(uri)
    feed = (spark.read.format("lakequery").option("readChangeFeed", "true")
            .option("startingVersion", 1).load(uri))                  # + _change_type, ...
    df.write.format("lakequery").mode("append").option("partitionBy", "day").save(uri)
    df.write.format("lakequery").mode("overwrite").option("replaceWhere", "day = '2026-11-01'").save(uri)

Reading: the driver (in Spark's planner Python worker) resolves the snapshot when the
DataFrame is created and keeps that version for every action on it. When the query runs
it plans the files with lakequery's planner, skipping files by partition values and
statistics with the filters Spark pushes, and cuts them into read tasks of about equal
bytes (about three per core, at most ``maxPartitionBytes``, default 128 MiB, each). The
tasks read their files with lakequery's own Arrow engine on the executors (deletion
vectors, column mapping, type widening applied there) and hand Spark Arrow batches cast
to the exact Arrow types of the DataFrame's schema. The schema is the table's logical
schema; with ``readChangeFeed`` it is followed by ``_change_type``, ``_commit_version``
and ``_commit_timestamp`` as in delta-spark.

Writing: Spark calls the writer with ``overwrite`` true or false. The driver plans the
write (:func:`lakequery.writer.plan_write`: mode, schema checks or evolution), every task
writes its rows as Parquet files with statistics and returns their ``add`` actions, and
the driver commits the actions of all tasks as ONE transaction (conflicts are checked and
non-conflicting concurrent commits retried, as :func:`lakequery.write` does). Spark
passes to the commit only the messages of the task attempts its commit coordinator
accepted, so a retried task never adds its rows twice; a job that fails commits nothing.
``abort`` deletes nothing (Spark calls it also when the commit itself failed, maybe after
the commit file landed): it logs the files left behind, which VACUUM removes if no
version references them.

Options (names are case-insensitive):

- read: ``versionAsOf``, ``timestampAsOf`` (ISO-8601, naive = UTC), ``readChangeFeed``
  with ``startingVersion``/``startingTimestamp`` (required) and ``endingVersion``/
  ``endingTimestamp``, ``maxPartitionBytes``;
- write: ``partitionBy`` (``"a,b"``), ``replaceWhere`` (SQL, overwrite only: the
  matching rows are replaced and every written row must match), ``mergeSchema``,
  ``overwriteSchema`` (overwrite only), ``txnAppId`` + ``txnVersion`` (an idempotent
  write: skipped when that version of the app id is committed), ``targetFileSize``,
  ``configuration`` (table properties as a JSON object) and the common ``delta.*``
  properties (``delta.enableChangeDataFeed``, ...) as options;
- both: ``storage_options``, a JSON object of s3fs arguments for ``s3://`` tables (JSON,
  because Spark lower-cases option names and s3fs takes nested values). The executors
  open the table themselves with it. Spark shows option values in query plans and logs,
  so prefer credentials the executors find in their environment (``AWS_*`` variables).

What PySpark's Python data source API cannot do today (Spark 4.2), and so this source
cannot either:

- *No column pruning.* Spark always asks for every column of the schema, so a read
  decodes every column of every file (``select("id")`` does not help). The one way
  around it is to declare a smaller schema: ``spark.read.format("lakequery").schema("id
  long, day date").load(uri)`` reads only those columns (names and types must be the
  table's).
- *Rows cross from Python to the JVM.* Every batch is read by a Python worker and sent
  to the JVM over a socket in Arrow format; Spark's vectorised Parquet reader, its
  Parquet filter pushdown and whole-stage code generation into the scan are not used.
- *No filter pushdown.* Spark evaluates every filter itself and the source skips no file:
  PySpark 4.2 reuses the read plan of a DataFrame's filtered query for its later queries
  that push no filter, which would drop rows (see :mod:`lakequery.spark.datasource_read`).
  :func:`lakequery.spark.read` prunes files through Spark's own Parquet reader.
- *No partitioning information.* Spark's own ``df.write.partitionBy(...)`` is refused by
  Spark for a Python data source ("partitioning ... do not match the existing table's");
  use ``.option("partitionBy", "a,b")``. Spark also cannot use the table's partitioning
  or statistics for its own planning (no partition-aware joins, no size estimates).
- *Only* ``append`` *and* ``overwrite``: Spark refuses the ``error``/``errorifexists``
  (its default!) and ``ignore`` modes for Python data sources, so always call
  ``.mode(...)``. Neither mode fails when the table does not exist: it is created.
- *No write result*: ``save()`` returns nothing; the version it committed is in
  ``lakequery.DeltaTable(uri).history(limit=1)``.
- *Errors arrive wrapped*: a lakequery error raised on the driver's planner worker or on
  an executor reaches the caller as Spark's exception whose text holds the lakequery
  class and message. :func:`lakequery_errors` turns it back into that class.
- *No* ``CREATE TABLE ... USING lakequery`` in a catalog. Streaming
  (``readStream``/``writeStream``) works: see :mod:`lakequery.spark.datasource_stream`
  for its semantics and what PySpark's streaming API limits (before PySpark 4.2: rate
  limits from the second micro-batch on; ``Trigger.AvailableNow`` in one micro-batch).

Prefer :func:`lakequery.spark.read` (a native Spark DataFrame over Spark's own Parquet
reader) for anything large or column-selective: it prunes columns, keeps Spark's
vectorised reader and Parquet filter pushdown, and never moves rows through Python.
``format("lakequery")`` is the familiar reader/writer API (options, ``load``/``save``)
and works wherever PySpark 4 does; its writer has no such drawback (tasks write Parquet
straight from Arrow batches), so it suits pipelines that end in a Delta table.
"""

from __future__ import annotations

from typing import Any

from lakequery.spark.datasource_options import SOURCE_NAME
from lakequery.spark.worker_errors import lakequery_errors
from lakequery.spark.workers import ensure_workers


def register(spark: Any) -> None:
    """Registers the ``lakequery`` data source on a Spark session.

    Checks that Spark's Python workers can import lakequery, registers the source under
    the name ``lakequery`` (never ``delta``, which names Spark's own Delta source when
    its jars are present). Calling it again is harmless.

    Spark looks a Python data source up in the *calling thread's* active session, which
    a thread other than the one that built the session does not have (the read or write
    then fails with ``DATA_SOURCE_NOT_FOUND``). ``register`` also makes ``spark`` the
    active session of the thread that calls it: call it in every thread that uses the
    source.

    Args:
        spark: A PySpark 4 ``SparkSession``.

    Example:
        >>> import lakequery.spark as lqs                    # doctest: +SKIP
        >>> lqs.register(spark)                              # doctest: +SKIP
        >>> spark.read.format("lakequery").load(uri).count() # doctest: +SKIP
    """
    from lakequery.spark.source import LakeQueryDataSource

    ensure_workers(spark)
    _activate(spark)
    try:
        cores = int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext: keep the local core count
        cores = LakeQueryDataSource.parallelism
    # A subclass made here is pickled by value, so the core count travels with it.
    source = type(
        "LakeQueryDataSource",
        (LakeQueryDataSource,),
        {"parallelism": max(1, cores), "__module__": __name__},
    )
    spark.dataSource.register(source)


def _activate(spark: Any) -> None:
    """Makes ``spark`` the active session of the calling thread in the JVM: Spark finds
    Python data sources through the thread's active session only, and a JVM thread that
    serves a new Python thread has none."""
    jvm = getattr(spark, "_jvm", None)
    jsession = getattr(spark, "_jsparkSession", None)
    if jvm is not None and jsession is not None:  # not on Spark Connect
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(jsession)


__all__ = ["SOURCE_NAME", "lakequery_errors", "register"]
