"""One micro-batch of a stream: its versions, the offset after it, and its rows."""

from __future__ import annotations

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

    def __init__(self, scan: ChangeScan, offset: StreamOffset, num_bytes: int) -> None:
        self._scan = scan
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
        return self._scan.output_schema

    def to_arrow_reader(self) -> pa.RecordBatchReader:
        """The rows as a stream of Arrow record batches."""
        return self._scan.to_arrow_reader()

    def to_arrow(self) -> pa.Table:
        """The rows as one Arrow table."""
        return self.to_arrow_reader().read_all()

    def to_duckdb(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """The rows as a lazy DuckDB relation over DuckDB's own Parquet reader (the cheapest
        start for a short-lived consumer: no ``pyarrow.dataset``, no pandas).

        Args:
            con: the connection to build the relation on (a new one when None).
        """
        return self._scan.to_duckdb(con)

    def to_pandas(self, **kwargs: Any) -> pd.DataFrame:
        """The rows as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_polars(self) -> pl.DataFrame:
        """The rows as a Polars DataFrame, read by Polars' own Parquet reader (no
        ``pyarrow.dataset``, no pandas)."""
        return self._scan.to_polars().collect()


__all__ = ["StreamBatch"]
