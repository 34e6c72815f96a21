"""The ``lakequery`` Python data source class (registered by
:func:`lakequery.spark.datasource.register`, which documents it)."""

from __future__ import annotations

import os
from typing import ClassVar

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType as SparkStruct

from lakequery.spark.datasource_options import SOURCE_NAME, read_options, write_options
from lakequery.spark.datasource_read import DeltaReader, Pin, output_columns, resolve
from lakequery.spark.datasource_stream import (
    DeltaStreamReader,
    DeltaStreamWriter,
    stream_read_options,
    stream_schema,
    stream_writer,
)
from lakequery.spark.datasource_write import DeltaWriter, plan


class LakeQueryDataSource(DataSource):  # type: ignore[misc]  # pyspark is untyped here
    """Delta tables through ``spark.read.format("lakequery")`` and
    ``df.write.format("lakequery")``.

    Spark creates one instance per ``load()``/``save()`` from the options and pickles it
    between its planner workers. :meth:`schema` fixes the version the DataFrame reads
    (the latest one at ``load()`` time unless ``versionAsOf``/``timestampAsOf`` say
    otherwise), so every action on that DataFrame reads the same snapshot.
    """

    #: Cores of the cluster, to size read tasks; :func:`register` sets it on a subclass.
    parallelism: ClassVar[int] = os.cpu_count() or 2

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> SparkStruct:
        """The table's logical schema (or the change feed's), at the version read.

        Spark does not say whether a read is a stream: options only a stream takes
        (``maxFilesPerTrigger``, a change feed without a starting version, ...) make
        this the stream's schema (the latest version's)."""
        try:
            options = read_options(self.options)
        except ValueError as batch_error:
            try:
                return stream_schema(stream_read_options(self.options))
            except ValueError:
                raise batch_error from None
        pin, schema = resolve(options)
        self._pin = pin
        return schema

    def reader(self, schema: SparkStruct) -> DeltaReader:
        options = read_options(self.options)
        pin: Pin | None = getattr(self, "_pin", None)
        if pin is None:  # the user gave the schema, so schema() never ran
            pin, table_schema = resolve(options)
            output_columns(schema, table_schema)  # fail early on a wrong column or type
        return DeltaReader(options, pin, schema, type(self).parallelism)

    def writer(self, schema: SparkStruct, overwrite: bool) -> DeltaWriter:
        return DeltaWriter(plan(write_options(self.options, overwrite=overwrite), schema))

    def streamReader(self, schema: SparkStruct) -> DeltaStreamReader:
        return DeltaStreamReader(stream_read_options(self.options), schema, type(self).parallelism)

    def streamWriter(self, schema: SparkStruct, overwrite: bool) -> DeltaStreamWriter:
        return stream_writer(self.options, schema, overwrite)


__all__ = ["LakeQueryDataSource"]
