"""``DeltaTable.detail()``: DESCRIBE DETAIL as a typed value.

Fields are Spark's DESCRIBE DETAIL columns in snake_case; :meth:`TableDetail.to_dict` gives
them under Spark's own column names (``numFiles``, ``sizeInBytes``...), so a row of
``DESCRIBE DETAIL`` and ``dt.detail().to_dict()`` compare key by key. Decisions (recorded
in ARCHITECTURE.md, "Table management"): ``location`` is the table URI as lakequery
normalised it; ``last_modified`` is the latest commit's timestamp as time travel sees it
(in-commit timestamp where enabled, else the commit file's time); ``table_features`` lists
the features the protocol supports explicitly or implies through its legacy versions,
sorted (as Spark does); ``clustering_columns`` are read from the ``delta.clustering``
domain (or the preview ``delta.liquid`` one), logical names (nested ones joined by dots),
``()`` for a table without clustering.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> _ = lq.write("memory://detail-doc", pa.table({"id": [1, 2], "g": ["a", "b"]}),
    ...              partition_by=["g"], configuration={"delta.appendOnly": "true"})
    >>> d = lq.DeltaTable("memory://detail-doc").detail()
    >>> d.format, d.num_files, d.partition_columns, d.properties["delta.appendOnly"]
    ('delta', 2, ('g',), 'true')
    >>> d.to_dict()["minWriterVersion"], d.table_features
    (7, ('appendOnly', 'deletionVectors'))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from lakequery import arrow_kernels as pc
from lakequery.clustering.domain import clustering_columns
from lakequery.snapshot import Snapshot


@dataclass(frozen=True)
class TableDetail:
    """One row of DESCRIBE DETAIL.

    Attributes:
        format: always ``"delta"``.
        id: the table id (``metaData.id``).
        name: the name stored in the metadata, or None.
        description: the description stored in the metadata, or None.
        location: the table's URI.
        created_at: ``metaData.createdTime`` (UTC), or None when the writer left it out.
        last_modified: the latest commit's timestamp (UTC).
        partition_columns: partition columns, in order.
        clustering_columns: liquid clustering columns, or ``()``.
        num_files: live data files.
        size_in_bytes: total size of the live data files.
        properties: the table properties (``metaData.configuration``).
        min_reader_version: ``protocol.minReaderVersion``.
        min_writer_version: ``protocol.minWriterVersion``.
        table_features: features supported, explicitly or implied by legacy versions.
        version: the version described (not a Spark column; left out of ``to_dict``).
    """

    format: str
    id: str
    name: str | None
    description: str | None
    location: str
    created_at: datetime | None
    last_modified: datetime | None
    partition_columns: tuple[str, ...]
    clustering_columns: tuple[str, ...]
    num_files: int
    size_in_bytes: int
    properties: Mapping[str, str] = field(default_factory=dict)
    min_reader_version: int = 1
    min_writer_version: int = 2
    table_features: tuple[str, ...] = ()
    version: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The row under Spark's DESCRIBE DETAIL column names (lists, not tuples)."""
        return {
            "format": self.format,
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "location": self.location,
            "createdAt": self.created_at,
            "lastModified": self.last_modified,
            "partitionColumns": list(self.partition_columns),
            "clusteringColumns": list(self.clustering_columns),
            "numFiles": self.num_files,
            "sizeInBytes": self.size_in_bytes,
            "properties": dict(self.properties),
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
            "tableFeatures": list(self.table_features),
        }


def describe_detail(snapshot: Snapshot) -> TableDetail:
    """The DESCRIBE DETAIL row of ``snapshot``."""
    meta, proto = snapshot.metadata, snapshot.protocol
    created = meta.created_time
    size = pc.sum(snapshot.files().column("size")).as_py() if snapshot.num_files else 0
    features = proto.effective_features()
    return TableDetail(
        format="delta",
        id=meta.id,
        name=meta.name,
        description=meta.description,
        location=snapshot.table_uri,
        created_at=(
            datetime.fromtimestamp(created / 1000, tz=timezone.utc) if created is not None else None
        ),
        last_modified=snapshot.timestamp,
        partition_columns=tuple(meta.partition_columns),
        clustering_columns=tuple(clustering_columns(snapshot) or ()),
        num_files=snapshot.num_files,
        size_in_bytes=int(size or 0),
        properties=dict(meta.configuration),
        min_reader_version=proto.min_reader_version,
        min_writer_version=proto.min_writer_version,
        table_features=tuple(sorted(features)),
        version=snapshot.version,
    )


__all__ = ["TableDetail", "describe_detail"]
