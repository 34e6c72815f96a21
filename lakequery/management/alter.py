"""``DeltaTable.alter``: the ALTER TABLE namespace (one commit per method).

Each method plans its change on the latest snapshot (the planners live in
:mod:`~lakequery.management.columns`, :mod:`~lakequery.management.type_widening`,
:mod:`~lakequery.management.properties`, :mod:`~lakequery.management.constraints` and
:mod:`~lakequery.management.table_features`) and commits it as ONE transaction through
:func:`~lakequery.management.change.commit_change`, returning an
:class:`~lakequery.management.change.AlterResult`. Names follow deltalake's
``TableAlterer`` and Spark SQL's ALTER TABLE. A new ALTER is one planner
(``Snapshot -> AlterChange``) and one method calling :meth:`TableAlterer.apply`.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://alter-doc"
    >>> _ = lq.write(uri, pa.table({"id": [1, 2]}))
    >>> dt = lq.DeltaTable(uri)
    >>> dt.alter.add_columns(pa.field("name", pa.string())).version
    1
    >>> dt.alter.add_constraint({"id_positive": "id > 0"}).rows_checked
    2
    >>> dt.alter.set_properties({"delta.enableChangeDataFeed": "true"}).version
    3
    >>> dt.snapshot().scan().to_arrow().column_names
    ['id', 'name']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakequery.management.change import AlterResult, Planner, commit_change
from lakequery.management.columns import (
    ColumnPath,
    plan_add_columns,
    plan_drop_columns,
    plan_rename_column,
    plan_set_column_metadata,
)
from lakequery.management.constraints import plan_add_constraint, plan_drop_constraint
from lakequery.management.properties import plan_properties, plan_table_info
from lakequery.management.table_features import (
    plan_add_features,
    plan_drop_feature,
    plan_enable_features,
)
from lakequery.management.type_widening import plan_change_column_type

if TYPE_CHECKING:
    from lakequery.snapshot import Snapshot
    from lakequery.table import DeltaTable

__all__ = ["TableAlterer"]


class TableAlterer:
    """ALTER TABLE operations on one table; get it as ``DeltaTable(uri).alter``.

    Every method makes exactly one commit and returns an :class:`AlterResult`
    (``.version``, ``.features_added``...). Concurrency: a concurrent append or delete
    never fails an ALTER (it retries, re-checking what it depends on); a concurrent
    metadata or protocol change raises ``MetadataChangedError`` / ``ProtocolChangedError``
    (see :mod:`lakequery.management.change`).

    Args:
        table: the table.
        snapshot: the version the first attempt plans on (default: the latest when the
            method is called); later attempts always plan on the latest.
    """

    def __init__(self, table: DeltaTable, snapshot: Snapshot | None = None) -> None:
        self._table = table
        self._snapshot = snapshot

    def apply(self, planner: Planner) -> AlterResult:
        """Plans and commits one change (the extension point for new ALTERs)."""
        return commit_change(self._table, planner, snapshot=self._snapshot)

    # -- columns -------------------------------------------------------------------------------
    def add_columns(self, fields: Any) -> AlterResult:
        """ALTER TABLE ADD COLUMNS: nullable columns appended to the schema.

        Args:
            fields: a ``pyarrow.Field`` or ``Schema``, a Delta ``StructField``, or a list.

        Raises:
            AlterTableError: a column exists already or is not nullable.
        """
        return self.apply(lambda s: plan_add_columns(s, fields))

    def rename_column(self, old: ColumnPath, new: str) -> AlterResult:
        """ALTER TABLE RENAME COLUMN ``old`` TO ``new``; enables column mapping (name mode)
        in the same commit when the table has none. ``old`` may be a nested path
        (``"s.inner"``); ``new`` is the new last name.

        Raises:
            AlterTableError: no such column, ``new`` is taken, or a constraint, generated
                column or stats-column list refers to the column.
        """
        return self.apply(lambda s: plan_rename_column(s, old, new))

    def drop_column(self, column: ColumnPath) -> AlterResult:
        """ALTER TABLE DROP COLUMN; enables column mapping (name mode) in the same commit
        when the table has none. Data files are not rewritten.

        Raises:
            AlterTableError: no such column, a partition column, the last data column,
                or one a constraint or generated column uses.
        """
        return self.apply(lambda s: plan_drop_columns(s, [column]))

    def drop_columns(self, columns: Iterable[ColumnPath]) -> AlterResult:
        """ALTER TABLE DROP COLUMNS (several, one commit); see :meth:`drop_column`."""
        wanted = list(columns)
        return self.apply(lambda s: plan_drop_columns(s, wanted))

    def change_column_type(self, column: ColumnPath, new_type: Any) -> AlterResult:
        """ALTER TABLE CHANGE COLUMN ``column`` TYPE ``new_type``: an allowed type widening
        (``"long"``, ``"double"``, ``"decimal(12,2)"``, a pyarrow type...). Enables
        ``typeWidening`` in the same commit; data files are not rewritten.

        Raises:
            AlterTableError: not an allowed widening, or a partition or nested-type column.
        """
        return self.apply(lambda s: plan_change_column_type(s, column, new_type))

    def set_column_metadata(self, column: ColumnPath, metadata: Mapping[str, Any]) -> AlterResult:
        """Merges ``metadata`` into a column's metadata (deltalake's
        ``set_column_metadata``; ``{"comment": "..."}`` is Spark's column comment).

        Raises:
            AlterTableError: no such column, or a reserved ``delta.*`` key.
        """
        items = dict(metadata)
        return self.apply(lambda s: plan_set_column_metadata(s, column, items))

    # -- clustering ---------------------------------------------------------------------------
    def cluster_by(self, columns: Sequence[str]) -> AlterResult:
        """ALTER TABLE CLUSTER BY: the liquid clustering columns (``[]``: CLUSTER BY NONE).

        One commit of the ``delta.clustering`` domain (adding the ``clustering`` feature to
        a plain table); the next ``optimize()`` clusters by the new columns. See
        :func:`lakequery.clustering.alter.commit_clustering` (a concurrent change of
        the clustering raises ``DomainMetadataConflictError``).

        Raises:
            ClusteringError: a column cannot be a clustering column, or the table is
                partitioned.
        """
        from lakequery.clustering.alter import commit_clustering

        result, added = commit_clustering(self._table, list(columns))
        return AlterResult(
            result.version,
            "CLUSTER BY",
            features_added=tuple(added),
            attempts=result.attempts,
            parameters={"newClusteringColumns": list(columns)},
        )

    # -- properties ---------------------------------------------------------------------------
    def set_properties(
        self, properties: Mapping[str, Any], *, raise_if_not_exists: bool = True
    ) -> AlterResult:
        """ALTER TABLE SET TBLPROPERTIES; a property that turns a feature on upgrades the
        protocol in the same commit.

        Args:
            properties: keys and values (``True``/``False`` become ``"true"``/``"false"``).
            raise_if_not_exists: refuse unknown ``delta.*`` keys (deltalake's switch).

        Raises:
            AlterTableError: an unknown or reserved key, or an invalid value.
        """
        props = dict(properties)
        return self.apply(
            lambda s: plan_properties(s, props, raise_if_not_exists=raise_if_not_exists)
        )

    def set_table_properties(
        self, properties: Mapping[str, Any], raise_if_not_exists: bool = True
    ) -> AlterResult:
        """deltalake's name for :meth:`set_properties`."""
        return self.set_properties(properties, raise_if_not_exists=raise_if_not_exists)

    def set_table_name(self, name: str) -> AlterResult:
        """Sets ``metaData.name`` (deltalake's ``set_table_name``)."""
        return self.apply(lambda s: plan_table_info(s, name=name))

    def set_table_description(self, description: str) -> AlterResult:
        """Sets ``metaData.description`` (deltalake's ``set_table_description``)."""
        return self.apply(lambda s: plan_table_info(s, description=description))

    def unset_properties(
        self, keys: str | Iterable[str], *, raise_if_not_exists: bool = True
    ) -> AlterResult:
        """ALTER TABLE UNSET TBLPROPERTIES [IF EXISTS] (``raise_if_not_exists=False``).

        Raises:
            AlterTableError: a key is not set, or may not be unset.
        """
        names = [keys] if isinstance(keys, str) else list(keys)
        return self.apply(
            lambda s: plan_properties(s, unset=names, raise_if_not_exists=raise_if_not_exists)
        )

    # -- constraints --------------------------------------------------------------------------
    def add_constraint(self, constraints: Mapping[str, str]) -> AlterResult:
        """ALTER TABLE ADD CONSTRAINT ``name`` CHECK (``expr``) for each item, after
        checking every live row (deletion vectors applied).

        Raises:
            ConstraintViolationError: existing rows break it (with their count).
            AlterTableError: the name exists, or the expression cannot be evaluated.
        """
        items = dict(constraints)
        return self.apply(lambda s: plan_add_constraint(s, items))

    def drop_constraint(self, name: str, *, raise_if_not_exists: bool = True) -> AlterResult:
        """ALTER TABLE DROP CONSTRAINT [IF EXISTS] ``name``.

        Raises:
            AlterTableError: no such constraint (with ``raise_if_not_exists``).
        """
        return self.apply(
            lambda s: plan_drop_constraint(s, name, raise_if_not_exists=raise_if_not_exists)
        )

    # -- table features -----------------------------------------------------------------------
    def enable_feature(self, features: str | Iterable[str]) -> AlterResult:
        """Turns table features on (their switch property, and the protocol) in one
        commit: ``deletionVectors``, ``changeDataFeed``, ``columnMapping``,
        ``rowTracking``, ``inCommitTimestamp``, ``typeWidening``, ``v2Checkpoint``,
        ``appendOnly``; features without a switch are added to the protocol.

        Raises:
            AlterTableError: an unknown feature, or one that cannot be enabled here.
            UnsupportedFeatureError: a feature lakequery cannot write under.
        """
        names = [features] if isinstance(features, str) else list(features)
        return self.apply(lambda s: plan_enable_features(s, names))

    def add_feature(self, features: str | Iterable[str]) -> AlterResult:
        """Adds protocol support for table features without turning them on (deltalake's
        ``add_feature``; Spark's ``delta.feature.<name>=supported``)."""
        names = [features] if isinstance(features, str) else list(features)
        return self.apply(lambda s: plan_add_features(s, names))

    def drop_feature(self, feature: str) -> AlterResult:
        """ALTER TABLE DROP FEATURE for writer features the table no longer uses; see
        :mod:`lakequery.management.table_features` for what is refused.

        Raises:
            AlterTableError: not listed, still in use, or not droppable by lakequery.
        """
        return self.apply(lambda s: plan_drop_feature(s, feature))
