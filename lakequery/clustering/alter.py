"""Changing a table's clustering columns (``ALTER TABLE … CLUSTER BY (…) | NONE``).

:func:`set_clustering_columns` is one commit that writes the ``delta.clustering`` domain
with the new columns (``[]``: ``CLUSTER BY NONE``, the table stays clustered without
columns, as Delta Spark keeps the feature and an empty list). No data is rewritten: files
clustered by the old columns count as unclustered for the next OPTIMIZE, which reclusters
them by the new columns (:mod:`lakequery.clustering.optimize`).

A table that is not clustered yet becomes clustered: the same commit adds the
``clustering`` and ``domainMetadata`` features to the protocol (never silently: the
commit's ``protocol`` action says so), refused for a partitioned table.

Concurrency: the commit writes the domain, so a concurrent commit that also writes it
(another clustering change) conflicts (digest §17); appends and DML run beside it.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> from lakequery.clustering.alter import set_clustering_columns
    >>> from lakequery.clustering.domain import clustering_columns
    >>> uri = "memory://clustering-alter-doc"
    >>> _ = lq.write(uri, pa.table({"a": [1, 2], "b": ["x", "y"]}), cluster_by=["a"])
    >>> set_clustering_columns(uri, ["b", "a"]).version
    1
    >>> clustering_columns(lq.DeltaTable(uri).snapshot())
    ['b', 'a']
    >>> _ = set_clustering_columns(uri, [])
    >>> clustering_columns(lq.DeltaTable(uri).snapshot())
    []
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakequery.clustering.create import clustering_for_new_table
from lakequery.clustering.domain import (
    CLUSTERING_DOMAIN,
    CLUSTERING_FEATURES,
    clustering_columns,
    clustering_configuration,
    clustering_domain_name,
    column_list_json,
)
from lakequery.errors import ClusteringError
from lakequery.txn import CommitResult, Transaction

if TYPE_CHECKING:
    from lakequery.table import DeltaTable


def set_clustering_columns(
    table: Any,
    columns: Sequence[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> CommitResult:
    """Sets the clustering columns of a table in one commit (``[]``: none); see
    :func:`commit_clustering` (which also says which features the commit added).

    Args:
        table: a table URI or a :class:`~lakequery.DeltaTable`.
        columns: the new clustering columns (top-level, with min/max statistics, at most
            four), or ``[]`` to stop clustering new data (``CLUSTER BY NONE``).
        storage_options: s3fs options for ``s3://`` URIs.

    Returns:
        The :class:`~lakequery.txn.CommitResult` (``.version``).

    Raises:
        ClusteringError: a column cannot be a clustering column, or the table is
            partitioned.
        DomainMetadataConflictError: a concurrent commit changed the clustering too.
    """
    from lakequery.table import DeltaTable

    dt = (
        table
        if isinstance(table, DeltaTable)
        else DeltaTable(table, storage_options=storage_options)
    )
    return commit_clustering(dt, columns)[0]


def commit_clustering(table: DeltaTable, columns: Sequence[str]) -> tuple[CommitResult, list[str]]:
    """The commit of :func:`set_clustering_columns` on the table's latest snapshot, and the
    table features it added to the protocol (none when the table was clustered already)."""
    from lakequery.protocol.features import upgraded_protocol

    if isinstance(columns, str):
        raise TypeError("columns is a list of column names, not a string")
    storage = table.storage
    snapshot = table.snapshot()
    meta = snapshot.metadata
    if meta.partition_columns:
        raise ClusteringError(
            f"table {storage.root!r} is partitioned by {list(meta.partition_columns)}; "
            "a partitioned table cannot be clustered"
        )
    domain = clustering_domain_name(snapshot.protocol, snapshot.domains) or CLUSTERING_DOMAIN
    old = clustering_columns(snapshot) or []
    if columns:
        setup = clustering_for_new_table(meta, list(columns), domain=domain)
        configuration, names = setup.configuration, list(setup.columns)
    else:
        configuration, names = clustering_configuration([]), []
    txn = Transaction(
        storage,
        snapshot,
        operation="CLUSTER BY",
        parameters={
            "oldClusteringColumns": column_list_json(old),
            "newClusteringColumns": column_list_json(names),
        },
    )
    upgraded = upgraded_protocol(snapshot.protocol, set(CLUSTERING_FEATURES))
    added: list[str] = []
    if upgraded is not None and domain == CLUSTERING_DOMAIN:
        txn.set_protocol(upgraded)
        added = sorted(upgraded.effective_features() - snapshot.protocol.effective_features())
    txn.set_domain(domain, configuration)
    return txn.commit(), added


__all__ = ["commit_clustering", "set_clustering_columns"]
