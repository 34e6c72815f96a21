"""Everything a data file writer needs to know about the table, as a picklable value.

:class:`WriteState` holds only plain values (strings, numbers, tuples) so that it can be
sent to Spark executors with the standard :mod:`pickle` module; parsed forms (the Delta
schema, the Arrow schema, typed properties) are derived on demand and cached per process.

Example:
    >>> import pickle
    >>> schema = '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}'
    >>> state = WriteState("memory://state-example", schema)
    >>> state.arrow_schema.names
    ['a']
    >>> pickle.loads(pickle.dumps(state)) == state
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakequery.cached import cached_property
from lakequery.errors import SchemaError
from lakequery.protocol.column_mapping import column_mapping_mode
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.schema import (
    StructType,
    iter_fields,
    parse_schema,
    to_arrow_schema,
    void_layout_problem,
)

if TYPE_CHECKING:
    from lakequery.metadata import Metadata
    from lakequery.protocol.features import Protocol

#: Default target size of a data file (bytes).
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024

#: ``delta.parquet.compression.codec`` value -> (pyarrow codec, file-name infix).
CODECS: Mapping[str, tuple[str, str]] = {
    "zstd": ("zstd", "zstd"),
    "snappy": ("snappy", "snappy"),
    "gzip": ("gzip", "gz"),
    "lz4": ("lz4", "lz4"),
    "lz4_raw": ("lz4", "lz4raw"),
    "brotli": ("brotli", "br"),
    "uncompressed": ("none", ""),
    "none": ("none", ""),
}


#: Column names lakequery's commands give their own columns (row positions, MERGE's
#: source mark, clustering keys) begin with it.
RESERVED_PREFIX = "__lq_"


def refuse_reserved_names(names: Iterable[str], where: str) -> None:
    """Refuses columns named with :data:`RESERVED_PREFIX` (any case): DML, MERGE and
    OPTIMIZE would confuse them with their own (a MERGE lost a source column's values).

    Raises:
        SchemaError: naming the first such column.
    """
    clash = next((n for n in names if n.lower().startswith(RESERVED_PREFIX)), None)
    if clash is not None:
        raise SchemaError(
            f"{where} has a column {clash!r}: names beginning with {RESERVED_PREFIX!r} are "
            "lakequery's own (its commands add such columns); rename it"
        )


@dataclasses.dataclass(frozen=True)
class WriteState:
    """The table facts a writer needs; plain values only, so it pickles cheaply.

    Attributes:
        table_uri: Table root in :attr:`lakequery.storage.Storage.root` form.
        schema_string: The table's Delta schema JSON (logical names, column metadata).
        partition_columns: Logical partition column names, in table order.
        configuration: Table properties as sorted ``(key, value)`` pairs.
        column_mapping_mode: ``none``, ``name`` or ``id``.
        storage_options: Options for :func:`lakequery.storage.open_storage`, as pairs.
        target_file_size: Roll over to a new file once this many bytes are written.
        compression: Parquet codec name (a key of :data:`CODECS`).
        data_change: ``dataChange`` of the produced ``add`` actions.
        max_rows_per_row_group: Upper bound on the rows of one Parquet row group.
        extra_constraints: Further ``(name, expression, DuckDB SQL)`` rules every written
            row must satisfy, beyond the table's own (the predicate of an overwrite: its
            text as given, and its rendering by lakequery's predicate language, which
            is what runs).
        change_data: Write change data files (digest §13): the rows carry a
            ``_change_type`` column, files go under ``_change_data/`` and the result is
            ``cdc`` actions instead of ``add`` actions.
        adaptive_dictionary: Skip Parquet dictionary encoding for columns whose first
            rows are mostly distinct (the encoder would try a dictionary, fill its page
            limit and fall back to plain anyway, at about twice the encoding cost).
        identity: Identity values to generate, as ``(column, first value, step)`` per
            identity column missing from the input (:mod:`lakequery.writer.identity`);
            row ``k`` of the write gets ``first + k * step``. Empty for rewrites (DML,
            OPTIMIZE), which keep the values they copy.
        materialized_columns: Physical ``int64`` columns outside the table schema that
            the rows carry into the data files as they are (NULL when a batch lacks one):
            row tracking's materialized row id and commit version
            (:mod:`lakequery.row_tracking`). No statistics.

    Example:
        >>> s = '{"type":"struct","fields":[]}'
        >>> WriteState("memory://x", s, configuration=(("k", "v"),)).properties()
        {'k': 'v'}
    """

    table_uri: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: tuple[tuple[str, str], ...] = ()
    column_mapping_mode: str = "none"
    storage_options: tuple[tuple[str, Any], ...] | None = None
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    compression: str = "zstd"
    data_change: bool = True
    max_rows_per_row_group: int = 1 << 20
    extra_constraints: tuple[tuple[str, str, str], ...] = ()
    change_data: bool = False
    adaptive_dictionary: bool = False
    identity: tuple[tuple[str, int, int], ...] = ()
    materialized_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.compression not in CODECS:
            raise ValueError(f"unknown Parquet compression codec {self.compression!r}")
        if self.target_file_size <= 0:
            raise ValueError("target_file_size must be positive")

    def __getstate__(self) -> dict[str, Any]:
        # Only the declared fields travel; cached derived values are rebuilt on arrival.
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    @classmethod
    def for_table(
        cls,
        table_uri: str,
        metadata: Metadata,
        protocol: Protocol,
        *,
        storage_options: Mapping[str, Any] | None = None,
        target_file_size: int | None = None,
        data_change: bool = True,
    ) -> WriteState:
        """The state for writing data files of a table with this metadata and protocol.

        Args:
            table_uri: Table root (:attr:`lakequery.storage.Storage.root` form).
            metadata: The table's ``metaData``.
            protocol: The table's ``protocol`` (decides whether column mapping is honoured).
            storage_options: Options for :func:`lakequery.storage.open_storage`.
            target_file_size: Target file size in bytes; default ``delta.targetFileSize``,
                else 128 MiB.
            data_change: ``dataChange`` of the produced ``add`` actions.

        Raises:
            UnsupportedFeatureError: the table uses a feature lakequery cannot write under.
            SchemaError: a schema no data file may be written under (``void`` rules), a
                column named like lakequery's own (:func:`refuse_reserved_names`) or a
                field with an empty name.

        Example:
            >>> from lakequery.metadata import Metadata
            >>> from lakequery.protocol.features import Protocol
            >>> md = Metadata("id", '{"type":"struct","fields":[{"name":"a","type":"long",'
            ...               '"nullable":true,"metadata":{}}]}', (),
            ...               {"delta.parquet.compression.codec": "snappy"})
            >>> WriteState.for_table("memory://t", md, Protocol(1, 2)).compression
            'snappy'
        """
        from lakequery.protocol.features import check_table_writable

        # before any file is written: a refusal at commit would leave the files behind
        check_table_writable(protocol, metadata.schema, metadata.configuration)
        problem = void_layout_problem(metadata.schema, metadata.partition_columns)
        if problem:
            raise SchemaError(f"no data file can be written: {problem} (digest §8.3)")
        refuse_reserved_names(metadata.schema.names, "the table")
        empty = next((path for path, f in iter_fields(metadata.schema) if not f.name), None)
        if empty is not None:  # DuckDB cannot name it: rewrites lost its values
            where = ".".join(empty[:-1]) or "the table"
            raise SchemaError(f"{where} has a field with an empty name; rename it")
        config = dict(metadata.configuration)
        props = TableProperties(config)
        codec = props.compression_codec or "zstd"
        if codec not in CODECS:
            raise ValueError(f"unsupported delta.parquet.compression.codec {codec!r}")
        return cls(
            table_uri=table_uri,
            schema_string=metadata.schema_string,
            partition_columns=tuple(metadata.partition_columns),
            configuration=tuple(sorted(config.items())),
            column_mapping_mode=column_mapping_mode(config, protocol.supports("columnMapping")),
            storage_options=tuple(sorted(storage_options.items())) if storage_options else None,
            target_file_size=target_file_size or props.target_file_size or DEFAULT_TARGET_FILE_SIZE,
            compression=codec,
            data_change=data_change,
        )

    def properties(self) -> dict[str, str]:
        """The table properties as a dict."""
        return dict(self.configuration)

    def options(self) -> dict[str, Any] | None:
        """The storage options as a dict (None when there are none)."""
        return dict(self.storage_options) if self.storage_options is not None else None

    @cached_property
    def table_properties(self) -> TableProperties:
        """Typed view of :meth:`properties`."""
        return TableProperties(self.properties())

    @cached_property
    def schema(self) -> StructType:
        """The parsed Delta schema."""
        return parse_schema(self.schema_string)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The logical Arrow schema of the table."""
        return to_arrow_schema(self.schema)

    @property
    def parquet_codec(self) -> str:
        """The pyarrow name of :attr:`compression`."""
        return CODECS[self.compression][0]

    @property
    def file_suffix(self) -> str:
        """The data file name ending, e.g. ``.c000.zstd.parquet``."""
        infix = CODECS[self.compression][1]
        return f".c000.{infix}.parquet" if infix else ".c000.parquet"


__all__ = ["CODECS", "DEFAULT_TARGET_FILE_SIZE", "WriteState"]
