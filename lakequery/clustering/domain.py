"""The ``delta.clustering`` domain: which columns a clustered table is clustered by.

A clustered table (writer feature ``clustering`` + ``domainMetadata``, digest §14) keeps its
clustering columns in the system domain ``delta.clustering`` as JSON. Three shapes exist
in the wild and all are read (digest §18 item 6):

* ``{"clusteringColumns": [["a"], ["b", "c"]]}``: what Delta Spark writes (one array of
  physical name parts per column) and what lakequery writes;
* ``{"clusteringColumns": ["a", "b"]}``: the protocol text's example (flat names);
* ``{"clusteringColumns": [{"physicalName": ["a"]}], "domainName": "delta.liquid"}``: the
  Databricks preview (writer feature ``liquid``, domain ``delta.liquid``), e.g. the
  conformance table ``deltars_table_with_liquid_clustering``.

Names in the domain are *physical* (column mapping); :func:`clustering_columns` turns them
into logical, dotted names. Only top-level columns can be clustering columns in lakequery
(the curve keys are built from top-level columns); a table whose domain names a nested
column reads fine, and its OPTIMIZE fails with :class:`~lakequery.errors.ClusteringError`.

Example:
    >>> parse_clustering_columns('{"clusteringColumns":[["a"],["b","c"]]}')
    (('a',), ('b', 'c'))
    >>> parse_clustering_columns('{"clusteringColumns":[{"physicalName":["id"]}]}')
    (('id',),)
    >>> clustering_configuration([("a",), ("col-5f1",)])
    '{"clusteringColumns":[["a"],["col-5f1"]]}'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakequery.errors import ClusteringError, CorruptLogError

if TYPE_CHECKING:
    from lakequery.protocol.features import Protocol
    from lakequery.protocol.schema import StructType
    from lakequery.snapshot import Snapshot

#: The system domain of liquid clustering (Delta 3.1+).
CLUSTERING_DOMAIN = "delta.clustering"
#: The domain the Databricks preview wrote (with writer feature ``liquid``).
LIQUID_DOMAIN = "delta.liquid"
#: Domains lakequery owns as a clustering writer (``Transaction.set_domain`` allows them).
CLUSTERING_DOMAINS = (CLUSTERING_DOMAIN, LIQUID_DOMAIN)
#: The writer features a new clustered table gets (and nothing else for clustering).
CLUSTERING_FEATURES = frozenset({"clustering", "domainMetadata"})
#: ``add.clusteringProvider`` of files written by lakequery's clustering OPTIMIZE, as Spark.
CLUSTERING_PROVIDER = "liquid"
#: At most this many clustering columns, as Delta Spark
#: (``spark.databricks.delta.clusteredTable.maxClusteringColumns``).
MAX_CLUSTERING_COLUMNS = 4

ColumnPath = tuple[str, ...]


def parse_clustering_columns(
    configuration: str, domain: str = CLUSTERING_DOMAIN
) -> tuple[ColumnPath, ...]:
    """The physical column paths of a clustering domain's configuration (any shape).

    Raises:
        CorruptLogError: the configuration is not one of the known shapes.
    """
    try:
        doc = json.loads(configuration) if configuration else {}
        raw = doc.get("clusteringColumns", [])
        out: list[ColumnPath] = []
        for item in raw:
            if isinstance(item, Mapping):
                item = item["physicalName"]
            if isinstance(item, str):
                out.append((item,))
            elif isinstance(item, list) and item and all(isinstance(p, str) for p in item):
                out.append(tuple(item))
            else:
                raise TypeError(f"column entry {item!r}")
        return tuple(out)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CorruptLogError(
            f"domainMetadata {domain!r}",
            f"clustering configuration {configuration!r} is malformed: {exc}",
        ) from exc


def clustering_configuration(paths: Sequence[ColumnPath]) -> str:
    """The domain configuration as Delta Spark writes it (compact JSON, name-part arrays)."""
    return json.dumps({"clusteringColumns": [list(p) for p in paths]}, separators=(",", ":"))


def column_list_json(names: Sequence[str]) -> str:
    """A list of column names as Delta Spark puts it in commit parameters and tags
    (compact JSON, e.g. ``["a","b"]``)."""
    return json.dumps(list(names), separators=(",", ":"))


def is_clustered_protocol(protocol: Protocol) -> bool:
    """Whether the protocol lists ``clustering`` (or the preview's ``liquid``)."""
    return protocol.supports("clustering") or protocol.supports("liquid")


def clustering_domain_name(protocol: Protocol, domains: Mapping[str, str]) -> str | None:
    """The clustering domain in force: the one present (``delta.clustering`` first), else
    ``delta.clustering`` for a clustered protocol, else None (not a clustered table)."""
    for name in CLUSTERING_DOMAINS:
        if name in domains:
            return name
    if protocol.supports("clustering"):
        return CLUSTERING_DOMAIN
    if protocol.supports("liquid"):
        return LIQUID_DOMAIN
    return None


def physical_clustering_columns(snapshot: Snapshot) -> tuple[ColumnPath, ...] | None:
    """The clustering columns as physical paths; None when the table is not clustered
    (a clustered table without a domain yet has no clustering columns: ``()``)."""
    domains = snapshot.domains
    name = clustering_domain_name(snapshot.protocol, domains)
    if name is None:
        return None
    return parse_clustering_columns(domains.get(name, ""), name)


def clustering_columns(snapshot: Snapshot) -> list[str] | None:
    """The clustering columns of a snapshot as logical names (nested ones dotted), or
    None when the table is not clustered.

    Example:
        >>> import pyarrow as pa, lakequery as lq
        >>> from lakequery.clustering.domain import clustering_columns
        >>> uri = "memory://clustering-columns-doc"
        >>> _ = lq.write(uri, pa.table({"id": [1, 2], "v": ["a", "b"]}), cluster_by=["id"])
        >>> clustering_columns(lq.DeltaTable(uri).snapshot())
        ['id']
    """
    paths = physical_clustering_columns(snapshot)
    if paths is None:
        return None
    return logical_names(snapshot.metadata.schema, paths, snapshot.column_mapping_mode)


def logical_names(schema: StructType, paths: Sequence[ColumnPath], mode: str) -> list[str]:
    """Physical paths -> dotted logical names (a path the schema lacks stays as it is)."""
    from lakequery.protocol.column_mapping import physical_name_map

    reverse = {p: lp for lp, p in physical_name_map(schema, mode).items()}
    return [".".join(reverse.get(tuple(p), tuple(p))) for p in paths]


def clustering_stats_problem(
    snapshot: Snapshot, schema: StructType, configuration: Mapping[str, str]
) -> str | None:
    """Why ``schema`` and ``configuration`` (a table's next ones) would leave one of the
    snapshot's clustering columns (nested ones too) without statistics, which writers must
    collect for them in every file (digest §14); None when they would not, or the table is
    not clustered."""
    from lakequery.protocol.column_mapping import column_mapping_mode
    from lakequery.protocol.properties import TableProperties
    from lakequery.writer.stats import configured_stats_columns

    clustered = physical_clustering_columns(snapshot)
    if not clustered:
        return None
    mode = column_mapping_mode(configuration, snapshot.protocol.supports("columnMapping"))
    props = TableProperties(dict(configuration))
    indexed = {
        c.physical for c in configured_stats_columns(schema, (), mode, props) if c.kind != "count"
    }
    for path, name in zip(clustered, logical_names(schema, clustered, mode), strict=True):
        if tuple(path) not in indexed:
            return (
                f"clustering column {name!r} would get no statistics (beyond "
                "delta.dataSkippingNumIndexedCols or outside delta.dataSkippingStatsColumns); "
                "clustering columns must have statistics"
            )
    return None


def resolve_clustering_columns(
    schema: StructType,
    names: Sequence[str],
    *,
    mode: str = "none",
    configuration: Mapping[str, str] | None = None,
    partition_columns: Sequence[str] = (),
) -> tuple[list[str], list[ColumnPath]]:
    """Checks clustering columns against a table and returns (logical names as the schema
    spells them, physical paths for the domain).

    A column must be a top-level column of the schema (matched case-insensitively), not a
    partition column, of a type with min/max statistics (numbers, decimals, dates,
    timestamps, strings: what data skipping and the curve keys use) and among the columns
    that get statistics (``delta.dataSkippingNumIndexedCols`` /
    ``delta.dataSkippingStatsColumns``), at most :data:`MAX_CLUSTERING_COLUMNS`, no repeats.

    Raises:
        ClusteringError: naming the column and the reason.

    Example:
        >>> from lakequery.protocol.schema import from_arrow_schema
        >>> import pyarrow as pa
        >>> s = from_arrow_schema(pa.schema([("Id", pa.int64()), ("flag", pa.bool_())]))
        >>> resolve_clustering_columns(s, ["id"])
        (['Id'], [('Id',)])
        >>> resolve_clustering_columns(s, ["flag"])
        Traceback (most recent call last):
        ...
        lakequery.errors.ClusteringError: cannot cluster by column 'flag' of type boolean: clustering columns need min/max statistics (numbers, decimals, dates, timestamps, strings)
    """
    from lakequery.protocol.column_mapping import physical_name_map
    from lakequery.protocol.properties import TableProperties
    from lakequery.writer.stats import configured_stats_columns

    if isinstance(names, str):
        raise TypeError("cluster_by takes a list of column names, not a string")
    if len(names) > MAX_CLUSTERING_COLUMNS:
        raise ClusteringError(
            f"at most {MAX_CLUSTERING_COLUMNS} clustering columns, got {len(names)}: {list(names)}"
        )
    props = TableProperties(dict(configuration or {}))
    with_stats = {c.path: c.kind for c in configured_stats_columns(schema, (), mode, props)}
    physical = physical_name_map(schema, mode)
    parts = {p.lower() for p in partition_columns}
    by_lower = {f.name.lower(): f for f in schema.fields}
    logical: list[str] = []
    paths: list[ColumnPath] = []
    for name in names:
        f = schema.fields[schema.names.index(name)] if name in schema.names else None
        f = f or by_lower.get(str(name).lower())
        if f is None:
            detail = " (nested clustering columns are not supported)" if "." in name else ""
            raise ClusteringError(
                f"no column {name!r} to cluster by{detail}; columns: {schema.names}"
            )
        if f.name in logical:
            raise ClusteringError(f"clustering column {f.name!r} is listed twice")
        if f.name.lower() in parts:
            raise ClusteringError(f"{f.name!r} is a partition column; it cannot be clustered by")
        kind = with_stats.get((f.name,))
        if _min_max_kind(schema, f.name, mode) == "count":
            raise ClusteringError(
                f"cannot cluster by column {f.name!r} of type {_type(f.type)}: clustering "
                "columns need min/max statistics (numbers, decimals, dates, timestamps, strings)"
            )
        if kind is None:
            raise ClusteringError(
                f"clustering column {f.name!r} gets no statistics (it is beyond "
                "delta.dataSkippingNumIndexedCols or outside delta.dataSkippingStatsColumns); "
                "clustering columns must have statistics"
            )
        logical.append(f.name)
        paths.append(physical[(f.name,)])
    return logical, paths


def _type(t: Any) -> str:
    from lakequery.protocol.schema import type_to_json

    out = type_to_json(t)
    return out if isinstance(out, str) else str(out.get("type", out))


def _min_max_kind(schema: StructType, name: str, mode: str) -> str:
    """The statistics kind the column would get if it were indexed."""
    from lakequery.writer.stats import stats_columns

    for c in stats_columns(schema, (), mode, num_indexed_cols=-1):
        if c.path == (name,):
            return c.kind
    return "count"


__all__ = [
    "CLUSTERING_DOMAIN",
    "CLUSTERING_DOMAINS",
    "CLUSTERING_FEATURES",
    "CLUSTERING_PROVIDER",
    "LIQUID_DOMAIN",
    "MAX_CLUSTERING_COLUMNS",
    "clustering_columns",
    "clustering_configuration",
    "clustering_domain_name",
    "clustering_stats_problem",
    "column_list_json",
    "is_clustered_protocol",
    "logical_names",
    "parse_clustering_columns",
    "physical_clustering_columns",
    "resolve_clustering_columns",
]
