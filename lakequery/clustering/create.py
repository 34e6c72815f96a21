"""What creating (or replacing) a clustered table commits, and the ``cluster_by`` checks of
``lq.write``.

A new clustered table gets, as Delta Spark gives it (``CREATE TABLE … CLUSTER BY``):

* the writer features ``clustering`` and ``domainMetadata`` and nothing else for
  clustering (they are requested through the creation-time pseudo-property
  ``delta.feature.clustering=supported``, which :mod:`lakequery.protocol.features` turns
  into the smallest protocol, dependencies included);
* the domain ``delta.clustering`` with ``{"clusteringColumns":[["<physical name>"], …]}``;
* no table property (Delta Spark keeps none: the domain is the only record), and
  ``clusterBy`` (a JSON list of the logical names) in the commit's operation parameters;
* no partition columns: clustering and partitioning are mutually exclusive.

:func:`clustering_for_new_table` is the one entry for table-creating code
(``DeltaTable.create`` calls it with its ``cluster_by``); :func:`requested_clustering` and
:func:`apply_clustering` are the two hooks of ``lq.write``.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://clustering-create-doc"
    >>> _ = lq.write(uri, pa.table({"id": [3, 1, 2], "name": ["c", "a", "b"]}), cluster_by=["id"])
    >>> snap = lq.DeltaTable(uri).snapshot()
    >>> sorted(snap.protocol.writer_features)
    ['clustering', 'deletionVectors', 'domainMetadata']
    >>> snap.domains["delta.clustering"]
    '{"clusteringColumns":[["id"]]}'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakequery.clustering.domain import (
    CLUSTERING_DOMAIN,
    CLUSTERING_FEATURES,
    clustering_columns,
    clustering_configuration,
    clustering_domain_name,
    column_list_json,
    is_clustered_protocol,
    physical_clustering_columns,
    resolve_clustering_columns,
)
from lakequery.errors import ClusteringError

if TYPE_CHECKING:
    from lakequery.metadata import Metadata
    from lakequery.snapshot import Snapshot
    from lakequery.writer.api import WritePlan

#: The creation-time pseudo-property that asks for the clustering feature.
CLUSTERING_FEATURE_PROPERTY = "delta.feature.clustering"


@dataclass(frozen=True)
class ClusteringSetup:
    """What a clustered table's creating commit carries besides its metadata.

    Attributes:
        columns: the clustering columns as the schema spells them (logical).
        features: table features to add to the protocol (``clustering``,
            ``domainMetadata``).
        domain: the domain name (``delta.clustering``).
        configuration: the domain's configuration JSON.
    """

    columns: tuple[str, ...]
    features: frozenset[str]
    domain: str
    configuration: str

    @property
    def operation_parameter(self) -> str:
        """``clusterBy`` of the commit's operation parameters, as Delta Spark writes it."""
        return column_list_json(self.columns)


def _mode(metadata: Metadata) -> str:
    from lakequery.protocol.column_mapping import column_mapping_mode

    return column_mapping_mode(metadata.configuration, True)


def clustering_for_new_table(
    metadata: Metadata, cluster_by: Sequence[str], *, domain: str = CLUSTERING_DOMAIN
) -> ClusteringSetup:
    """Checks ``cluster_by`` against the new table's metadata (schema with its physical
    names already assigned, partition columns, configuration) and returns what to commit:
    ``protocol_for(features_in_use | setup.features)`` and ``txn.set_domain(setup.domain,
    setup.configuration)``.

    Raises:
        ClusteringError: the table has partition columns, or a column cannot be a
            clustering column (:func:`~lakequery.clustering.domain.resolve_clustering_columns`).

    Example:
        >>> from lakequery.metadata import Metadata
        >>> md = Metadata("id", '{"type":"struct","fields":[{"name":"a","type":"long",'
        ...               '"nullable":true,"metadata":{}}]}', (), {})
        >>> s = clustering_for_new_table(md, ["A"])
        >>> s.columns, sorted(s.features), s.configuration
        (('a',), ['clustering', 'domainMetadata'], '{"clusteringColumns":[["a"]]}')
    """
    if metadata.partition_columns:
        raise ClusteringError(
            "a table cannot be both partitioned and clustered: partition_by "
            f"{list(metadata.partition_columns)} and cluster_by {list(cluster_by)} are "
            "mutually exclusive"
        )
    logical, paths = resolve_clustering_columns(
        metadata.schema,
        cluster_by,
        mode=_mode(metadata),
        configuration=metadata.configuration,
    )
    return ClusteringSetup(
        tuple(logical), CLUSTERING_FEATURES, domain, clustering_configuration(paths)
    )


def requested_clustering(
    snapshot: Snapshot | None,
    cluster_by: Sequence[str] | str | None,
    partition_by: Sequence[str] | str | None,
    *,
    replacing: bool,
) -> list[str] | None:
    """Checks the ``cluster_by`` of a write before it is planned.

    Returns the columns to set (a new table, or ``schema_mode="overwrite"``), or None when
    the write leaves the clustering as it is (no ``cluster_by``, or one equal to the
    table's).

    Raises:
        ClusteringError: ``partition_by`` with ``cluster_by``; ``cluster_by`` on an existing
            table that differs from its clustering columns (change those with
            :func:`~lakequery.clustering.alter.set_clustering_columns`).
    """
    if cluster_by is None:
        return None
    columns = [cluster_by] if isinstance(cluster_by, str) else list(cluster_by)
    if partition_by:
        raise ClusteringError(
            f"partition_by {partition_by!r} and cluster_by {columns} are mutually exclusive: "
            "a clustered table has no partition columns"
        )
    if snapshot is None or replacing:
        return columns
    current = clustering_columns(snapshot)
    if current is None:
        raise ClusteringError(
            f"cluster_by {columns}: the table is not clustered (use schema_mode='overwrite' "
            "to replace it by a clustered table, or set_clustering_columns)"
        )
    if [c.lower() for c in current] != [c.lower() for c in columns]:
        raise ClusteringError(
            f"cluster_by {columns} differs from the table's clustering columns {current} "
            "(change them with set_clustering_columns / DeltaTable.alter.cluster_by)"
        )
    return None


def clustering_pseudo_properties(
    snapshot: Snapshot | None, columns: list[str] | None
) -> dict[str, str]:
    """The creation-time pseudo-property asking for the ``clustering`` feature, when a
    write sets clustering columns on a table whose protocol lacks it (a new table, or a
    replaced one; a table with the preview's ``liquid`` feature keeps that one)."""
    if not columns:
        return {}
    if snapshot is not None and is_clustered_protocol(snapshot.protocol):
        return {}
    return {CLUSTERING_FEATURE_PROPERTY: "supported"}


def apply_clustering(plan: WritePlan, columns: list[str] | None) -> WritePlan:
    """Completes a planned write: the domain of a new (or replaced) clustered table, and
    the checks that a replaced clustered table stays valid (no partitions, its clustering
    columns still exist).

    The clustering feature itself was requested through :func:`clustering_pseudo_properties`
    when the write was planned, so the protocol already has it.

    Raises:
        ClusteringError: as :func:`clustering_for_new_table`, or a replacement that would
            partition a clustered table or drop one of its clustering columns.
    """
    if plan.metadata is None or plan.skipped:
        return plan
    snapshot = plan.snapshot
    domain = CLUSTERING_DOMAIN
    if snapshot is not None:
        domain = clustering_domain_name(snapshot.protocol, snapshot.domains) or domain
    if columns is not None:
        was_clustered = snapshot is not None and physical_clustering_columns(snapshot) is not None
        if columns or was_clustered:  # [] on a clustered table: CLUSTER BY NONE
            setup = clustering_for_new_table(plan.metadata, columns, domain=domain)
            plan.domains[setup.domain] = setup.configuration
            plan.cluster_by = setup.columns
        return plan
    if snapshot is None:
        return plan
    paths = physical_clustering_columns(snapshot)
    if paths is None:
        return plan
    # The table stays clustered by the same columns: they must survive a schema change,
    # and under column mapping a replaced schema has new physical names.
    current = clustering_columns(snapshot) or []
    setup = clustering_for_new_table(plan.metadata, current, domain=domain)
    if paths != physical_clustering_columns_of(setup):
        plan.domains[setup.domain] = setup.configuration
    return plan


def physical_clustering_columns_of(setup: ClusteringSetup) -> tuple[tuple[str, ...], ...]:
    """The physical paths a setup's domain configuration names."""
    from lakequery.clustering.domain import parse_clustering_columns

    return parse_clustering_columns(setup.configuration)


__all__ = [
    "CLUSTERING_FEATURE_PROPERTY",
    "ClusteringSetup",
    "apply_clustering",
    "clustering_for_new_table",
    "clustering_pseudo_properties",
    "requested_clustering",
]
