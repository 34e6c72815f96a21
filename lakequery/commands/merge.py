"""MERGE: upsert a source into the table with SQL MERGE clauses, executed in DuckDB.

The source is loaded once into a DuckDB table (spilling when large). The target is read
with each row's storage position; when there is no ``WHEN NOT MATCHED BY SOURCE`` clause,
only files whose statistics overlap the source's join keys are read (``target.k =
source.k`` conjuncts of ``on`` give a min/max range per key), so a small upsert into a
large table reads a few files. One join, typed by which clause kinds exist, assigns each
row the first clause whose condition holds (SQL order); the result is the change table
of :mod:`lakequery.commands.change_set`.

A target row matched by several source rows that reach an update or delete clause raises
:class:`~lakequery.errors.MergeConflictError` before anything is written, unless the one
matched clause is an unconditional delete (Delta's exception: the row is deleted once).

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://merge-doc"
    >>> _ = lq.write(uri, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    >>> dt = lq.DeltaTable(uri)
    >>> src = pa.table({"id": [2, 3, 4], "v": ["B", None, "D"]})
    >>> m = (dt.merge(src, on="t.id = s.id", source_alias="s", target_alias="t")
    ...        .when_matched_delete(predicate="s.v IS NULL")
    ...        .when_matched_update(set={"v": "s.v"})
    ...        .when_not_matched_insert_all()
    ...        .execute())
    >>> m.num_updated_rows, m.num_deleted_rows, m.num_inserted_rows
    (1, 1, 1)
    >>> sorted(dt.snapshot().scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    [{'id': 1, 'v': 'a'}, {'id': 2, 'v': 'B'}, {'id': 4, 'v': 'D'}]
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import duckdb
import pyarrow as pa

from lakequery.commands.change_set import (
    CHANGE_TABLE,
    DmlMetrics,
    Statement,
    cast_sql,
    generation_expressions,
    new_value_column,
    old_value_column,
    parses,
    with_generated_values,
)
from lakequery.commands.progress import ProgressCallback
from lakequery.commands.update import resolve_assignments
from lakequery.engines.duckdb import ROW_FILE_COLUMN, ROW_NUMBER_COLUMN
from lakequery.engines.sql_types import quote_ident
from lakequery.errors import LakeQueryError, MergeConflictError, PredicateError, SchemaError
from lakequery.protocol.arrow_types import NUMERIC, category
from lakequery.protocol.schema import case_clash
from lakequery.writer.identity import (
    Generation,
    identity_columns,
    identity_value_sql,
    refuse_explicit_insert,
    refuse_identity_update,
    stage_dml_high_water_marks,
)
from lakequery.writer.inputs import exact_for_duckdb, to_reader
from lakequery.writer.state import refuse_reserved_names

if TYPE_CHECKING:
    from lakequery.table import DeltaTable
    from lakequery.writer.state import WriteState

ClauseKind = Literal["matched", "not_matched", "not_matched_by_source"]
Action = Literal["update", "delete", "insert"]
_SOURCE_TABLE = "__lq_source"
_TARGET_VIEW = "__lq_target"
_SOURCE_MARK = "__lq_src"


@dataclass(frozen=True)
class MergeMetrics(DmlMetrics):
    """:class:`~lakequery.commands.change_set.DmlMetrics` plus the source's row count.

    Attributes:
        num_source_rows: rows of the merge source.
    """

    num_source_rows: int = 0


@dataclass(frozen=True)
class _Clause:
    kind: ClauseKind
    action: Action
    predicate: str | None
    assignments: Mapping[str, str] | None  # None: every column ("*")

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"actionType": self.action}
        if self.predicate is not None:
            out["predicate"] = self.predicate
        return out


class MergeBuilder:
    """Collects the clauses of one MERGE; :meth:`execute` runs it. Build one with
    :meth:`lakequery.DeltaTable.merge`. Clauses are evaluated in the order they are added,
    per kind (matched, not matched, not matched by source), as in SQL MERGE."""

    def __init__(
        self,
        table: DeltaTable,
        source: Any,
        *,
        on: str,
        source_alias: str = "source",
        target_alias: str = "target",
        schema_mode: Literal["merge"] | None = None,
        copy_on_write: bool = False,
        rewrite_threshold: float | None = None,
    ) -> None:
        if schema_mode not in (None, "merge"):
            raise ValueError("schema_mode must be None or 'merge'")
        if source_alias.lower() == target_alias.lower():
            raise ValueError("source_alias and target_alias must differ")
        self.table = table
        self.source = source
        self.on = on
        self.source_alias = source_alias
        self.target_alias = target_alias
        self.schema_mode = schema_mode
        self.copy_on_write = copy_on_write
        self.rewrite_threshold = rewrite_threshold
        self.clauses: list[_Clause] = []
        self._source_consumed = False

    def _add(self, clause: _Clause) -> MergeBuilder:
        self.clauses.append(clause)
        return self

    def when_matched_update(
        self, set: Mapping[str, str], predicate: str | None = None
    ) -> MergeBuilder:
        """``WHEN MATCHED [AND predicate] THEN UPDATE SET col = expr, ...``."""
        if not set:
            raise ValueError("when_matched_update needs at least one column in set={...}")
        return self._add(_Clause("matched", "update", predicate, dict(set)))

    def when_matched_update_all(self, predicate: str | None = None) -> MergeBuilder:
        """``WHEN MATCHED THEN UPDATE SET *``: every target column the source has."""
        return self._add(_Clause("matched", "update", predicate, None))

    def when_matched_delete(self, predicate: str | None = None) -> MergeBuilder:
        """``WHEN MATCHED [AND predicate] THEN DELETE``."""
        return self._add(_Clause("matched", "delete", predicate, None))

    def when_not_matched_insert(
        self, values: Mapping[str, str], predicate: str | None = None
    ) -> MergeBuilder:
        """``WHEN NOT MATCHED [AND predicate] THEN INSERT (cols) VALUES (exprs)``; columns
        not given are NULL."""
        if not values:
            raise ValueError("when_not_matched_insert needs values={...}")
        return self._add(_Clause("not_matched", "insert", predicate, dict(values)))

    def when_not_matched_insert_all(self, predicate: str | None = None) -> MergeBuilder:
        """``WHEN NOT MATCHED THEN INSERT *``: columns by name from the source (NULL where
        the source lacks one)."""
        return self._add(_Clause("not_matched", "insert", predicate, None))

    def when_not_matched_by_source_update(
        self, set: Mapping[str, str], predicate: str | None = None
    ) -> MergeBuilder:
        """``WHEN NOT MATCHED BY SOURCE [AND predicate] THEN UPDATE SET ...``."""
        if not set:
            raise ValueError("when_not_matched_by_source_update needs set={...}")
        return self._add(_Clause("not_matched_by_source", "update", predicate, dict(set)))

    def when_not_matched_by_source_delete(self, predicate: str | None = None) -> MergeBuilder:
        """``WHEN NOT MATCHED BY SOURCE [AND predicate] THEN DELETE``."""
        return self._add(_Clause("not_matched_by_source", "delete", predicate, None))

    def execute(self, *, progress: ProgressCallback | None = None) -> MergeMetrics:
        """Runs the MERGE as one commit and returns its metrics.

        Args:
            progress: receives :class:`~lakequery.commands.progress.Progress` (rows
                written into new files); default: a bar when someone is watching.

        Raises:
            MergeConflictError: a target row matched by several source rows in an update
                or delete clause; nothing is committed.
            PredicateError: an expression or column that does not resolve.
            SchemaMismatchError: a value that does not fit its column.
            CommitConflictError: a concurrent commit conflicts (a subclass names the kind).
        """
        if not self.clauses:
            raise ValueError("a MERGE needs at least one WHEN clause")
        if self._source_consumed:
            raise ValueError(
                "this MERGE's source is a stream (RecordBatchReader or iterator) that an "
                "earlier execute() already read; pass a table (for example "
                "reader.read_all()) to run a MERGE more than once"
            )
        return _Merge(self).run(progress)

    def _read_source(self) -> pa.RecordBatchReader:
        """The source as a reader; a one-shot source (a RecordBatchReader or an iterator)
        is marked consumed, so that a second :meth:`execute` refuses instead of merging an
        empty or exhausted stream."""
        if isinstance(self.source, (pa.RecordBatchReader, Iterator)):
            self._source_consumed = True
        # nanoseconds exactly in microseconds, as lq.write (DuckDB would round them), and
        # float16 / decimal256 / date64 in types DuckDB reads
        return exact_for_duckdb(to_reader(self.source))


def _refuse_case_duplicates(columns: list[str]) -> None:
    """Refuses source columns whose names differ only in case, as ``lq.write`` does: the
    table's names are case-insensitive, so ``*`` clauses could not tell ``V`` from ``v``."""
    clash = case_clash(columns)
    if clash is not None:
        raise SchemaError(f"source columns {clash[0]!r} and {clash[1]!r} differ only in case")


def _recording(source: pa.RecordBatchReader, failed: list[LakeQueryError]) -> pa.RecordBatchReader:
    """``source``, keeping a LakeQueryError it raises (DuckDB reports a stream's error as
    its own ``InvalidInputException``)."""

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from source
        except LakeQueryError as exc:
            failed.append(exc)
            raise

    return pa.RecordBatchReader.from_batches(source.schema, batches())


def _on_parameters(b: MergeBuilder) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for c in b.clauses:
        by_kind.setdefault(c.kind, []).append(c.describe())
    return {
        "predicate": b.on,
        "matchedPredicates": json.dumps(by_kind.get("matched", [])),
        "notMatchedPredicates": json.dumps(by_kind.get("not_matched", [])),
        "notMatchedBySourcePredicates": json.dumps(by_kind.get("not_matched_by_source", [])),
    }


#: Change-table column: the row got generated identity values (counts the new mark).
_IDENTITY_MARK = "__lq_identity"


class _Merge:
    def __init__(self, b: MergeBuilder) -> None:
        self.b = b
        self.s = quote_ident(b.source_alias)
        self.t = quote_ident(b.target_alias)

    def run(self, progress: ProgressCallback | None = None) -> MergeMetrics:
        b = self.b
        with Statement.for_table(
            b.table,
            operation="MERGE",
            parameters=_on_parameters(b),
            copy_on_write=b.copy_on_write,
            rewrite_threshold=b.rewrite_threshold,
            progress=progress,
        ) as st:
            self.st = st
            con = st.con
            source = b._read_source()
            _refuse_case_duplicates(source.schema.names)  # DuckDB would rename one
            failed: list[LakeQueryError] = []
            con.register("__lq_source_stream", _recording(source, failed))
            try:
                con.execute(
                    f"CREATE TEMP TABLE {_SOURCE_TABLE} AS SELECT * FROM __lq_source_stream"
                )
            except duckdb.Error:
                if failed:  # the source's own refusal, not DuckDB's wrapping of it
                    raise failed[0] from None
                raise
            con.unregister("__lq_source_stream")
            source_columns = [str(c) for c in con.table(_SOURCE_TABLE).columns]
            refuse_reserved_names(source_columns, "the MERGE source")
            state = self._write_state(source_columns)
            st.target(self._pruning_filter(source_columns), name=_TARGET_VIEW)
            self._check_sides()
            st.build_change_table(self._change_sql(source_columns, state), b.on)
            self._check_duplicate_matches()
            if self.identity:  # values generated for inserted rows: new high-water marks
                ((generated,),) = con.sql(
                    f"SELECT count(*) FROM {CHANGE_TABLE} WHERE {_IDENTITY_MARK}"
                ).fetchall()
                stage_dml_high_water_marks(st.txn, self.identity, int(generated))
            ((num_source,),) = con.sql(f"SELECT count(*) FROM {_SOURCE_TABLE}").fetchall()
            metrics = st.commit_changes(
                state=state,
                metric_names={
                    "deleted": "numTargetRowsDeleted",
                    "updated": "numTargetRowsUpdated",
                    "inserted": "numTargetRowsInserted",
                    "copied": "numTargetRowsCopied",
                },
                extra_metrics={"numSourceRows": int(num_source)},
            )
            return MergeMetrics(**vars(metrics), num_source_rows=int(num_source))

    # -- schema ------------------------------------------------------------------------------
    def _write_state(self, source_columns: list[str]) -> WriteState:
        """The table's write state; with ``schema_mode="merge"`` and an ``*`` clause, new
        source columns, and new fields of its struct columns, are added to the table
        (nullable) in this commit."""
        st, b = self.st, self.b
        star = any(c.assignments is None and c.action != "delete" for c in b.clauses)
        if b.schema_mode != "merge" or not star:
            return st.state
        types = dict(
            zip(
                source_columns,
                st.con.sql(f"SELECT * FROM {_SOURCE_TABLE} LIMIT 0").to_arrow_table().schema.types,
                strict=True,
            )
        )
        by_lower = {c.lower(): c for c in source_columns if c != _SOURCE_MARK}
        fields = []
        for f in st.snapshot.schema:
            given = types.get(by_lower.pop(f.name.lower(), ""))
            # a struct (in a list or map too) gains the source's new fields, as lq.write
            if given is not None and pa.types.is_nested(f.type) and pa.types.is_nested(given):
                f = pa.field(f.name, given, nullable=True) if given != f.type else f
            fields.append(f)
        fields += [pa.field(c, types[c], nullable=True) for c in by_lower.values()]
        wanted = pa.schema(fields)
        if wanted == st.snapshot.schema:
            return st.state
        from lakequery.writer.api import plan_write

        plan = plan_write(
            b.table,
            wanted,
            mode="append",
            schema_mode="merge",
            storage_options=b.table.storage_options,
        )
        if plan.metadata is None and plan.protocol is None:
            return st.state  # the source's types fit the table's as they are
        if plan.metadata is not None:
            st.txn.set_metadata(plan.metadata)
        if plan.protocol is not None:
            st.txn.set_protocol(plan.protocol)
        assert plan.state is not None
        return plan.state

    # -- pruning -----------------------------------------------------------------------------
    def _pruning_filter(self, source_columns: list[str]) -> str | None:
        """A target filter from ``target.k = source.e`` conjuncts of ``on``: k between the
        min and max of the source keys. None when not-matched-by-source clauses need every
        target row, or ``on`` gives no such conjunct."""
        from lakequery.protocol.predicates import (
            And,
            Column,
            Compare,
            format_predicate,
            parse_predicate,
        )
        from lakequery.protocol.predicates import Literal as Lit

        b = self.b
        if any(c.kind == "not_matched_by_source" for c in b.clauses):
            return None
        try:
            on = parse_predicate(b.on)
        except PredicateError:
            return None  # DuckDB syntax lakequery's predicate language lacks: no pruning
        conjuncts = on.items if isinstance(on, And) else (on,)
        target_types = {f.name: f.type for f in self.st.snapshot.schema}
        target_cols = {n.lower(): n for n in target_types}
        source_cols = {n.lower(): n for n in source_columns}
        ta, sa = b.target_alias.lower(), b.source_alias.lower()
        bounds = []
        for c in conjuncts:
            if not (isinstance(c, Compare) and c.op == "=" and isinstance(c.left, Column)):
                continue
            if not isinstance(c.right, Column):
                continue
            sides = {c.left.path[0].lower(): c.left.path, c.right.path[0].lower(): c.right.path}
            t_path, s_path = sides.get(ta), sides.get(sa)
            if t_path is None or s_path is None or len(t_path) != 2 or len(s_path) != 2:
                continue
            t_col, s_col = target_cols.get(t_path[1].lower()), source_cols.get(s_path[1].lower())
            if t_col is None or s_col is None:
                continue
            q = quote_ident(s_col)
            row = self.st.con.sql(f"SELECT min({q}) AS lo, max({q}) AS hi FROM {_SOURCE_TABLE}")
            lo_hi = row.to_arrow_table()
            lo, hi = lo_hi.column("lo")[0], lo_hi.column("hi")[0]
            if not lo.is_valid or not _same_order(lo.type, target_types[t_col]):
                continue
            col = Column((t_col,))
            bound = And(
                (
                    Compare(">=", col, Lit(lo.as_py(), lo.type)),
                    Compare("<=", col, Lit(hi.as_py(), hi.type)),
                )
            )
            try:  # keys the predicate language cannot spell (NaN, bytes) just do not prune
                bounds.append(format_predicate(bound))
            except PredicateError:
                continue
        if not bounds:
            return None
        combined = " AND ".join(f"({b})" for b in bounds)
        return combined if parses(combined, self.st.snapshot.schema) else None

    # -- the change table ----------------------------------------------------------------------
    def _join(self) -> str:
        kinds = {c.kind for c in self.b.clauses}
        inserts = "not_matched" in kinds
        by_source = "not_matched_by_source" in kinds
        join = {
            (True, True): "FULL OUTER JOIN",
            (True, False): "RIGHT JOIN",
            (False, True): "LEFT JOIN",
            (False, False): "JOIN",
        }[(inserts, by_source)]
        return (
            f"{_TARGET_VIEW} AS {self.t} {join} "
            f"(SELECT *, true AS {_SOURCE_MARK} FROM {_SOURCE_TABLE}) AS {self.s} ON ({self.b.on})"
        )

    def _clause_case(self) -> str:
        matched = f"{self.t}.{ROW_FILE_COLUMN} IS NOT NULL AND {self.s}.{_SOURCE_MARK}"
        arms = {
            "matched": matched,
            "not_matched": f"{self.t}.{ROW_FILE_COLUMN} IS NULL",
            "not_matched_by_source": f"{self.s}.{_SOURCE_MARK} IS NULL",
        }
        branches = []
        for kind, when in arms.items():
            inner = " ".join(
                f"WHEN ({c.predicate or 'true'}) THEN {i}"
                for i, c in enumerate(self.b.clauses)
                if c.kind == kind
            )
            if inner:
                branches.append(f"WHEN {when} THEN (CASE {inner} END)")
        return f"CASE {' '.join(branches)} END"

    @staticmethod
    def _gives_value(clause: _Clause, column: str, source_columns: dict[str, str]) -> bool:
        """Whether an update/insert clause gives ``column`` a value (from its assignments,
        or the source's column of that name for ``*``)."""
        if clause.assignments is None:
            return column.lower() in source_columns
        return column in clause.assignments

    def _values(self, clause: _Clause, column: str, source_columns: dict[str, str]) -> str:
        """The new value of ``column`` for a row that ``clause`` updates or inserts."""
        t_col = f"{self.t}.{quote_ident(column)}"
        old = t_col if column.lower() in self.known else "NULL"
        if clause.assignments is None:  # UPDATE SET * / INSERT *
            src = source_columns.get(column.lower())
            if src is not None:
                return f"{self.s}.{quote_ident(src)}"
            return old if clause.action == "update" else "NULL"
        if column in clause.assignments:
            return clause.assignments[column]
        return old if clause.action == "update" else "NULL"

    def _change_sql(self, source_columns: list[str], state: WriteState) -> str:
        st, b = self.st, self.b
        schema = state.arrow_schema
        self.known = {n.lower() for n in st.snapshot.schema.names}
        by_name = {c.lower(): c for c in source_columns if c != _SOURCE_MARK}
        clauses = [
            _Clause(
                c.kind,
                c.action,
                c.predicate,
                None
                if c.assignments is None
                else resolve_assignments(c.assignments, schema, alias=b.target_alias),
            )
            for c in b.clauses
        ]
        kind = " ".join(f"WHEN {i} THEN '{c.action}'" for i, c in enumerate(clauses))
        columns = []
        for n, name in enumerate(schema.names):
            arms = " ".join(
                f"WHEN {i} THEN {self._values(c, name, by_name)}"
                for i, c in enumerate(clauses)
                if c.action != "delete"
            )
            value = f"CASE __lq_clause {arms} END" if arms else "NULL"
            columns.append(f"{cast_sql(value, schema.field(name).type)} AS {new_value_column(n)}")
        old = ""
        if st.change_data_feed:
            old = "".join(
                f", {self.t}.{quote_ident(c)} AS {old_value_column(i)}"
                for i, c in enumerate(st.read_columns)
            )
        # the clause number is a column of a LATERAL subquery, not an alias the other
        # columns refer to: DuckDB inlines the CASE at each alias reference, and planning
        # (a CASE per column) then took 10-15 s for 1,500 columns instead of ~1 s
        select = (
            "SELECT __lq_clause, "
            f"CASE __lq_clause {kind} END AS __lq_kind, "
            f"{self.t}.{ROW_FILE_COLUMN} AS {ROW_FILE_COLUMN}, "
            f"{self.t}.{ROW_NUMBER_COLUMN} AS {ROW_NUMBER_COLUMN}, "
            + ", ".join(columns)
            + old
            + f" FROM {self._join()}, "
            f"LATERAL (SELECT {self._clause_case()} AS __lq_clause) AS __lq_clauses"
        )
        regenerate = self._identity_values(clauses, state, by_name)
        for name, expression in generation_expressions(state).items():
            ids = [
                str(i)
                for i, c in enumerate(clauses)
                if c.action != "delete" and not self._gives_value(c, name, by_name)
            ]
            if ids:
                regenerate[name] = (expression, f"__lq_clause IN ({', '.join(ids)})")
        select = with_generated_values(select, schema, regenerate)
        inserts = ", ".join(str(i) for i in self.identity_clauses) or "NULL"
        return (
            f"SELECT * EXCLUDE (__lq_clause), coalesce(__lq_clause IN ({inserts}), false) "
            f"AS {_IDENTITY_MARK} FROM ({select}) WHERE __lq_clause IS NOT NULL"
        )

    def _identity_values(
        self, clauses: list[_Clause], state: WriteState, by_name: dict[str, str]
    ) -> dict[str, tuple[str, str]]:
        """Refuses updates of identity columns and explicit values for ALWAYS ones (as
        Spark does); numbers the rows of insert clauses that give no value from above the
        high-water mark (:mod:`lakequery.writer.identity`)."""
        self.identity: Generation = ()
        self.identity_clauses: list[int] = []
        columns = identity_columns(state.schema)
        if not columns:
            return {}
        out = {}
        for col in columns:
            given = [
                c.action
                for c in clauses
                if c.action != "delete" and self._gives_value(c, col.name, by_name)
            ]
            if "update" in given:
                refuse_identity_update(state.schema, [col.name])
            if "insert" in given:
                refuse_explicit_insert(state.schema, [col.name])
            ids = [
                i
                for i, c in enumerate(clauses)
                if c.action == "insert" and not self._gives_value(c, col.name, by_name)
            ]
            if ids:
                condition = f"__lq_clause IN ({', '.join(map(str, ids))})"
                first = col.next_value()
                out[col.name] = (identity_value_sql(first, col.step, condition), condition)
                self.identity += ((col.name, first, col.step),)
                self.identity_clauses = sorted({*self.identity_clauses, *ids})
        return out

    def _check_sides(self) -> None:
        """Refuses, as Spark does, a WHEN NOT MATCHED clause that refers to the target and
        a WHEN NOT MATCHED BY SOURCE clause that refers to the source: there is no such
        row, and the join would silently give NULL (inserted rows of NULLs, or every
        unmatched target row set to NULL)."""
        sides = {
            "not_matched": (_SOURCE_TABLE, self.s, "the source"),
            "not_matched_by_source": (_TARGET_VIEW, self.t, "the target"),
        }
        for c in self.b.clauses:
            side = sides.get(c.kind)
            if side is None:
                continue
            table, alias, what = side
            texts = [c.predicate] if c.predicate is not None else []
            texts += list((c.assignments or {}).values())
            for text in texts:
                try:
                    self.st.con.execute(f"SELECT ({text}) FROM {table} AS {alias} LIMIT 0")
                except duckdb.BinderException as exc:
                    clause = c.kind.replace("_", " ").upper()
                    raise PredicateError(
                        text,
                        f"a WHEN {clause} clause can refer to {what} only: "
                        + str(exc).splitlines()[0],
                    ) from exc

    def _check_duplicate_matches(self) -> None:
        """Refuses a target row matched by several source rows, unless the one matched
        clause is an unconditional delete: then the row is deleted once, as Delta allows
        (the outcome is the same whichever source row matched)."""
        rows = self.st.con.sql(
            f"SELECT {ROW_FILE_COLUMN}, {ROW_NUMBER_COLUMN}, count(*) AS n FROM {CHANGE_TABLE} "
            f"WHERE {ROW_FILE_COLUMN} IS NOT NULL GROUP BY ALL HAVING count(*) > 1 LIMIT 1"
        ).fetchall()
        matched = [c for c in self.b.clauses if c.kind == "matched"]
        if rows and [(c.action, c.predicate) for c in matched] == [("delete", None)]:
            key = f"{ROW_FILE_COLUMN}, {ROW_NUMBER_COLUMN}"
            con = self.st.con
            con.execute(
                f"CREATE TEMP TABLE __lq_change_once AS SELECT * FROM {CHANGE_TABLE} "
                f"WHERE {ROW_FILE_COLUMN} IS NULL UNION ALL SELECT * FROM {CHANGE_TABLE} "
                f"WHERE {ROW_FILE_COLUMN} IS NOT NULL "
                f"QUALIFY row_number() OVER (PARTITION BY {key}) = 1"
            )
            con.execute(f"DROP TABLE {CHANGE_TABLE}")
            con.execute(f"ALTER TABLE __lq_change_once RENAME TO {CHANGE_TABLE}")
            return
        if rows:
            index, row, matches = rows[0]
            assert self.st.plan is not None
            path = self.st.plan.files.column("path")[int(index)].as_py()
            raise MergeConflictError(str(path), int(row), int(matches))


def _same_order(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether the source keys' min and max, in the source's type, bound the target keys
    they join: both numbers, or both of one kind. DuckDB casts a VARCHAR key to the
    target's BIGINT, DECIMAL or DATE to join, where '10' < '9' and '2024-1-5' >
    '2024-01-10' as text: a range of text bounds pruned every matching file (an upsert
    then inserted its matched rows again)."""
    a, b = category(source), category(target)
    return a == b or (a in NUMERIC and b in NUMERIC)


__all__ = ["MergeBuilder", "MergeMetrics"]
