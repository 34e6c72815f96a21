"""One micro-batch of a stream: its versions, the offset after it, and its rows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakequery.streaming.offsets import StreamOffset

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import polars as pl

    from lakequery.cdf import ChangeScan


class StreamBatch:
    """Rows of one micro-batch, read lazily (nothing is read until asked).

    Attributes:
        start_version: the first version whose files the batch holds.
        end_version: the last one.
        offset: where the stream stands after this batch; store ``offset.to_json()`` and
            pass it back as ``starting_offset=`` to resume right after the batch.
        num_files: data files in the batch (with ``read_change_feed``: files the change
            feed reads).
        num_bytes: their size.
    """

    def __init__(
        self,
        scan: ChangeScan,
        offset: StreamOffset,
        num_bytes: int,
        constants: dict[str, pa.Scalar[Any]] | None = None,
    ) -> None:
        self._scan = scan
        self._constants = constants or {}
        self.start_version: int = scan.starting_version
        self.end_version: int = scan.ending_version
        self.offset = offset
        self.num_files: int = scan.num_files
        self.num_bytes = num_bytes

    def __repr__(self) -> str:
        return (
            f"StreamBatch(versions={self.start_version}..{self.end_version}, "
            f"files={self.num_files}, offset={self.offset.to_json()})"
        )

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the batch's rows."""
        schema = self._scan.output_schema
        for name, value in self._constants.items():
            schema = schema.append(pa.field(name, value.type))
        return schema

    def to_arrow_reader(self) -> pa.RecordBatchReader:
        """The rows as a stream of Arrow record batches."""
        if not self._constants:
            return self._scan.to_arrow_reader()
        schema = self.schema

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in self._scan.to_arrow_reader():
                cols = list(batch.columns)
                cols += [
                    pa.array([v.as_py()] * batch.num_rows, v.type) for v in self._constants.values()
                ]
                yield pa.RecordBatch.from_arrays(cols, schema=schema)

        return pa.RecordBatchReader.from_batches(schema, batches())

    def to_arrow(self) -> pa.Table:
        """The rows as one Arrow table."""
        return self.to_arrow_reader().read_all()

    def to_duckdb(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """The rows as a lazy DuckDB relation over DuckDB's own Parquet reader (the cheapest
        start for a short-lived consumer: no ``pyarrow.dataset``, no pandas).

        Args:
            con: the connection to build the relation on (a new one when None).
        """
        rel = self._scan.to_duckdb(con)
        if not self._constants:
            return rel
        from lakequery.engines.sql_types import literal, quote_ident

        extra = ", ".join(
            f"{literal(v.as_py(), v.type)} AS {quote_ident(n)}" for n, v in self._constants.items()
        )
        return rel.project(f"*, {extra}")

    def to_pandas(self, **kwargs: Any) -> pd.DataFrame:
        """The rows as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_polars(self) -> pl.DataFrame:
        """The rows as a Polars DataFrame, read by Polars' own Parquet reader (no
        ``pyarrow.dataset``, no pandas)."""
        import polars as pl

        lf = self._scan.to_polars()
        repeat: Any = pa.repeat  # (its stubs list one overload per scalar type)
        for name, value in self._constants.items():
            typed = pl.from_arrow(repeat(value, 1))  # the Arrow type's Polars dtype
            assert isinstance(typed, pl.Series)
            lf = lf.with_columns(pl.lit(typed[0], dtype=typed.dtype).alias(name))
        return lf.collect()


def insert_constants(version: int, when: datetime | None) -> dict[str, pa.Scalar[Any]]:
    """The change columns of a starting snapshot read as a change feed: every row an
    insert at the snapshot's version and time."""
    from lakequery.cdf import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION

    return {
        CHANGE_TYPE: pa.scalar("insert", pa.string()),
        COMMIT_VERSION: pa.scalar(version, pa.int64()),
        COMMIT_TIMESTAMP: pa.scalar(when, pa.timestamp("us", tz="UTC")),
    }


__all__ = ["StreamBatch"]
