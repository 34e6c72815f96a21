"""OPTIMIZE on a clustered table: incremental Hilbert clustering by the clustering columns.

:func:`lakequery.commands.optimize.optimize` asks :func:`clustered_layout` first; on a
clustered table it gets a :class:`ClusteredLayout` that replaces compaction's bin choice:

* **Columns and curve**: the table's clustering columns (the ``delta.clustering`` domain),
  always the Hilbert curve, as Delta Spark; ``z_order_by`` is refused
  (:class:`~lakequery.errors.ClusteringError`), as Delta Spark refuses ``ZORDER BY`` on a
  clustered table. A clustered table without clustering columns (``cluster_by([])``) is
  compacted like any other table.
* **Marking**: every file the clustering writes gets ``add.clusteringProvider = "liquid"``
  and the tags Delta Spark writes: ``ZCUBE_ID`` (one id per OPTIMIZE run), and
  ``ZCUBE_ZORDER_BY`` (the compact JSON list of the logical clustering columns) and
  ``ZCUBE_ZORDER_CURVE`` (``hilbert``).
* **Incremental**: a file counts as clustered when its ``ZCUBE_ZORDER_BY`` tag names the
  current clustering columns (by logical name, case-insensitively). Those are left alone
  unless a deletion vector hides more than
  :data:`~lakequery.commands.optimize.DV_PURGE_RATIO` of their rows. Every other file (new
  appends, DML output, files clustered by columns the table no longer uses after
  :func:`~lakequery.clustering.alter.set_clustering_columns`, files of other tools) is a
  candidate, and the candidates are clustered together into one new set of files (one
  ``ZCUBE_ID``), even when there is a single candidate: afterwards it is sorted and marked.
  A file another clustering implementation wrote (``clusteringProvider`` set to another
  name) is never a candidate (digest §14: only files of the same or no provider).
* ``full=True`` (Spark's ``OPTIMIZE … FULL``) makes every live file a candidate: the whole
  table is reclustered into one cube.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://clustering-optimize-doc"
    >>> _ = lq.write(uri, pa.table({"id": [5, 1], "v": ["e", "a"]}), cluster_by=["id"])
    >>> _ = lq.write(uri, pa.table({"id": [3, 2], "v": ["c", "b"]}), mode="append")
    >>> m = lq.DeltaTable(uri).optimize()
    >>> m.files_removed, m.files_added, m.z_order_by, m.curve
    (2, 1, ('id',), 'hilbert')
    >>> lq.DeltaTable(uri).optimize().committed      # everything is clustered already
    False
    >>> lq.DeltaTable(uri).optimize(full=True).files_removed
    1
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lakequery.clustering.domain import (
    CLUSTERING_PROVIDER,
    clustering_columns,
    column_list_json,
)
from lakequery.errors import ClusteringError

if TYPE_CHECKING:
    from lakequery.commands.optimize import OptimizePlan
    from lakequery.snapshot import Snapshot

#: Tags Delta Spark puts on the files of one clustering run (AddFile.Tags).
ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
ZCUBE_ZORDER_CURVE = "ZCUBE_ZORDER_CURVE"
#: The curve of liquid clustering.
CLUSTERING_CURVE = "hilbert"


@dataclass(frozen=True)
class ClusteredLayout:
    """How OPTIMIZE treats a clustered table (see the module docstring).

    Attributes:
        columns: the clustering columns (logical, top-level); empty: compaction only.
        full: recluster every file, not only the unclustered ones.
        zcube_id: the ``ZCUBE_ID`` of the files this run writes.
    """

    columns: tuple[str, ...]
    full: bool = False
    zcube_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def clusters(self) -> bool:
        return bool(self.columns)

    def clustered_mask(self, files: pa.Table) -> pa.Array[Any]:
        """Per file of ``snapshot.files()``: True when it is clustered by the current
        columns (its ``ZCUBE_ZORDER_BY`` tag names them)."""
        if not files.num_rows:
            return pa.array([], pa.bool_())
        tags: Any = files.column("tags").combine_chunks()
        if pa.types.is_null(tags.type):
            return pa.array([False] * files.num_rows, pa.bool_())
        zorder_by: Any = pc.map_lookup(tags, ZCUBE_ZORDER_BY, "first")
        wanted = [c.lower() for c in self.columns]
        distinct = [v for v in pc.unique(zorder_by).to_pylist() if v is not None]
        same = [v for v in distinct if _names(v) == wanted]
        mask: Any = pc.is_in(zorder_by, value_set=pa.array(same, pa.string()))
        out: pa.Array[Any] = pc.fill_null(mask, False)  # type: ignore[arg-type]
        return out

    def plan(self, snapshot: Snapshot, files: pa.Table) -> OptimizePlan:
        """The one bin of candidate files (none when nothing needs clustering)."""
        from lakequery.commands.optimize import DV_PURGE_RATIO, Bin, OptimizePlan
        from lakequery.engines.deletion import dv_cardinalities

        if not files.num_rows:
            return OptimizePlan(files, ())
        if self.full:
            candidate: Any = pa.array([True] * files.num_rows, pa.bool_())
        else:
            cards_raw: Any = dv_cardinalities(files)
            cards = pc.cast(cards_raw, pa.float64())
            num_records: Any = files.column("num_records")
            records = pc.cast(pc.fill_null(num_records, pa.scalar(0, pa.int64())), pa.float64())
            mostly_deleted = pc.greater(
                cards, pc.multiply(records, pa.scalar(DV_PURGE_RATIO, pa.float64()))
            )
            candidate = pc.or_(pc.invert(self.clustered_mask(files)), mostly_deleted)
            # another clustering implementation's files are its to recluster (digest §14)
            provider: Any = files.column("clustering_provider")
            foreign = pc.fill_null(
                pc.not_equal(provider, pa.scalar(CLUSTERING_PROVIDER, pa.string())), False
            )
            candidate = pc.and_(candidate, pc.invert(foreign))
        rows = pc.indices_nonzero(candidate).to_pylist()
        if not rows:
            return OptimizePlan(files, ())
        size = int(pc.sum(files.column("size").take(pa.array(rows, pa.int64()))).as_py() or 0)
        return OptimizePlan(files, (Bin((), tuple(rows), size),))

    def mark(self, adds: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The clustering's ``add`` actions with the provider and the ZCube tags."""
        tags = {
            ZCUBE_ID: self.zcube_id,
            ZCUBE_ZORDER_BY: column_list_json(self.columns),
            ZCUBE_ZORDER_CURVE: CLUSTERING_CURVE,
        }
        return [
            {
                **a,
                "clusteringProvider": CLUSTERING_PROVIDER,
                "tags": {**(a.get("tags") or {}), **tags},
            }
            for a in adds
        ]

    def parameters(self) -> dict[str, Any]:
        """Operation parameters of the OPTIMIZE commit, as Delta Spark names them."""
        return {"clusterBy": list(self.columns), "isFull": self.full}


def _names(value: str) -> list[str] | None:
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    if not isinstance(parsed, list):
        return None
    return [str(n).lower() for n in parsed]


def clustered_layout(
    snapshot: Snapshot,
    *,
    z_order_by: Sequence[str] | str | None = None,
    full: bool = False,
) -> ClusteredLayout | None:
    """The layout OPTIMIZE uses on a clustered table; None for other tables.

    Raises:
        ClusteringError: ``z_order_by`` on a clustered table; a nested clustering column;
            ``full=True`` on a table that is not clustered.
    """
    columns = clustering_columns(snapshot)
    if columns is None:
        if full:
            raise ClusteringError(
                "full=True reclusters a clustered table; this table is not clustered "
                "(create it with cluster_by, or use z_order_by)"
            )
        return None
    if z_order_by is not None:
        raise ClusteringError(
            f"z_order_by cannot be used on a clustered table (clustered by {columns}): "
            "OPTIMIZE clusters it by its clustering columns; change those with "
            "set_clustering_columns / DeltaTable.alter.cluster_by"
        )
    names = set(snapshot.schema.names)
    for c in columns:
        if c not in names:
            raise ClusteringError(
                f"clustering column {c!r} is not a top-level column of the table; lakequery "
                "clusters by top-level columns only"
            )
    return ClusteredLayout(tuple(columns), full=full)


__all__ = [
    "CLUSTERING_CURVE",
    "ZCUBE_ID",
    "ZCUBE_ZORDER_BY",
    "ZCUBE_ZORDER_CURVE",
    "ClusteredLayout",
    "clustered_layout",
]
