"""Makes the files of a log segment queryable in DuckDB, without copying them.

This is the I/O edge of replay. JSON commits are read as raw lines
(``read_ndjson_objects``) and parsed with ``from_json`` into the canonical action shape;
checkpoint Parquet files (classic, multi-part, V2 with sidecars, JSON V2) are projected
onto the same shape. Only a slim table is materialised — per file action its version, a
128-bit hash of its (path, DV id) key and whether it adds — plus the raw text of the few
non-file actions; replay then reads the winners' payloads in one more streaming pass.
Failures name the file at fault.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple
from urllib.parse import unquote

import duckdb

from lakequery.duckdb_databases import private_cursor
from lakequery.errors import CorruptLogError, ObjectNotFoundError
from lakequery.protocol import actions as act
from lakequery.protocol.log_files import Checkpoint, LogFile
from lakequery.protocol.replay import dv_unique_id_sql, key_hash_sql, key_sql, root_prefixes
from lakequery.protocol.sql_spelling import file_key, glob_list_sql
from lakequery.storage import Storage
from lakequery.storage.engine_errors import (
    log_storage_failure,
    public_text,
    raise_storage_failure,
    storage_failure,
)

#: Slim per-action table of the commits: version, h (key hash, NULL for non-file actions),
#: is_add, other (raw JSON of a non-file action, else NULL).
COMMIT_KEYS = "_lq_commit_keys"
#: View of the commits' actions in the canonical shape with ``key``, ``dvid`` and ``h``.
COMMITS = "_lq_commits"
#: View of the checkpoint's actions, same columns (empty without a checkpoint).
CHECKPOINT = "_lq_checkpoint"
#: Logs (and single-file checkpoints) up to this size are parsed once into a temporary
#: table instead of being planned again in every statement of replay (see LogReader.load).
SMALL_LOG_BYTES = 4 * 1024 * 1024
#: Commit files are named ``<20 digits>.json``: the version is a fixed slice of the name.
_VERSION_FROM_NAME = "left(right(filename, 25), 20)"


#: A file action's path and deletion vector, whichever of ``add`` and ``remove`` it is.
_ACTION_PATH = "coalesce(add.path, remove.path)"
_ACTION_DV = "coalesce(add.deletionVector, remove.deletionVector)"


def _small(files: Sequence[LogFile]) -> bool:
    return sum(f.size for f in files) <= SMALL_LOG_BYTES


def replay_cursor(
    checkpoint: Checkpoint | None, commits: Sequence[LogFile]
) -> duckdb.DuckDBPyConnection:
    """A fresh cursor to replay this segment on
    (:func:`lakequery.duckdb_databases.private_cursor`). Its joins keep their sides as
    written unless the segment is small, so that replay joins no stream of JSON lines:
    commits of at most :data:`SMALL_LOG_BYTES` in all, which :meth:`LogReader.load` parses
    into a temporary table, and no checkpoint or a single-file one of at most that size
    (a table, or a view of Parquet files, whose row counts DuckDB takes from their
    footers)."""
    small = _small(commits) and (
        checkpoint is None or (len(checkpoint.files) == 1 and _small(checkpoint.files))
    )
    return private_cursor(fixed_joins=not small)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class LogReader:
    """Loads commits and checkpoints of one table into ``_lq_actions`` on a connection."""

    def __init__(self, storage: Storage, con: duckdb.DuckDBPyConnection) -> None:
        self.storage = storage
        self.con = con
        #: whether :meth:`load` materialised the parsed commits (small logs)
        self.materialized = False
        self._created: dict[str, str] = {}
        # checkpoint footers read by this reader: the struct tree, and the whole schema
        # (types included) that decides which files one read_parquet can take together
        self._schemas: dict[str, _Group] = {}
        self._schema_keys: dict[str, tuple[Any, ...]] = {}
        storage.register_duckdb(con)

    # -- commits -------------------------------------------------------------------------------
    def json_actions_sql(self, files: Sequence[str], *, version: int | None = None) -> str:
        """SQL selecting canonical action columns from NDJSON files (commits or JSON checkpoints).

        Lines are read as raw JSON objects and parsed with one ``from_json`` (far cheaper per
        file than ``read_json`` with typed columns). ``version`` overrides the version
        otherwise read from each file name.
        """
        return self._json_sql(files, version=version)

    def _json_sql(
        self, files: Sequence[str], *, version: int | None = None, raw: bool = False
    ) -> str:
        """:meth:`json_actions_sql`; with ``raw`` also ``other``: the line's text when it
        is not a file action (what the slim table keeps)."""
        paths = glob_list_sql([self.storage.duckdb_path(f) for f in files])
        ver = str(int(version)) if version is not None else f"CAST({_VERSION_FROM_NAME} AS BIGINT)"
        names = ", ".join(_q(a) for a in act.ACTIONS)
        other = ", CASE WHEN add IS NULL AND remove IS NULL THEN json END AS other" if raw else ""
        # unnest() expands the parsed struct once; field access on a from_json() expression
        # would be inlined and parse every line once per field.
        return (
            f"SELECT {ver} AS version, {names}{other} FROM ("
            f"SELECT unnest(from_json(json, {_lit(act.json_structure())})), "
            f"{'json, ' if raw else ''}filename "
            f"FROM read_ndjson_objects({paths}, filename=true))"
        )

    def load(
        self,
        checkpoint: Checkpoint | None,
        commits: Sequence[LogFile],
        *,
        file_actions: bool = True,
    ) -> None:
        """Creates ``_lq_commit_keys`` (slim), ``_lq_commits`` and ``_lq_checkpoint``.

        Without ``file_actions`` (the caller reads the protocol, metadata, txns and domains
        only) the checkpoint is never materialised: a view over it reads just those
        columns, where a small checkpoint would otherwise be read whole.

        Large logs: the slim table is materialised and the two others are views, streamed
        when replay reads them. Small logs (at most :data:`SMALL_LOG_BYTES` of commits, a
        single-file checkpoint of at most that size): the parsed actions are materialised
        once and the other names are cheap views or tables over them. The rows are the
        same either way; what differs is the cost: planning SQL over the canonical JSON
        structure takes milliseconds per statement, and a small log would otherwise pay
        it in every statement of replay.
        """
        if checkpoint is None and not commits:
            raise CorruptLogError(self.storage.join("_delta_log"), "no log files to read")
        self._created = {}
        paths = [c.path for c in commits]
        small_commits = bool(commits) and _small(commits)
        if small_commits:
            try:
                self._create("TABLE", COMMITS, self._keyed(self._json_sql(paths, raw=True)))
            except duckdb.Error as exc:
                raise self._diagnose(exc, None, commits) from exc
            self.materialized = True
            self._create(
                "VIEW",
                COMMIT_KEYS,
                f"SELECT version, h, CAST(add IS NOT NULL AS BIGINT) AS is_add, other "
                f"FROM {COMMITS}",
            )
        elif commits:
            self._create("VIEW", COMMITS, self._keyed(self.json_actions_sql(paths)))
            try:
                self._create("TABLE", COMMIT_KEYS, self._slim_sql(paths))
            except duckdb.Error as exc:
                raise self._diagnose(exc, None, commits) from exc
        else:
            self._create(
                "TABLE",
                COMMIT_KEYS,
                "SELECT * FROM (VALUES (CAST(NULL AS BIGINT), CAST(NULL AS HUGEINT), "
                "CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR))) "
                "AS t(version, h, is_add, other) WHERE false",
            )
        try:
            if checkpoint is None:
                if small_commits:
                    self._create(
                        "TABLE", CHECKPOINT, f"SELECT * EXCLUDE (other) FROM {COMMITS} LIMIT 0"
                    )
                else:
                    self._create("VIEW", CHECKPOINT, self._keyed(self._empty_sql_where_false()))
            else:
                parts = self._checkpoint_sql(checkpoint)
                small = file_actions and len(parts) == 1 and _small(checkpoint.files)
                if small:  # reading it all is the readability check
                    self._create("TABLE", CHECKPOINT, self._keyed(parts[0]))
                else:
                    self._create("VIEW", CHECKPOINT, self._keyed(" UNION ALL ".join(parts)))
                    # cheap: reads the small protocol column of every part
                    self.con.execute(f"SELECT count(protocol) FROM {CHECKPOINT}").fetchall()
        except duckdb.Error as exc:
            raise self._diagnose(exc, checkpoint, ()) from exc
        if not commits:
            if self._created[CHECKPOINT] == "TABLE":
                self._create("TABLE", COMMITS, f"SELECT * FROM {CHECKPOINT} LIMIT 0")
            else:
                self._create("VIEW", COMMITS, self._keyed(self._empty_sql_where_false()))

    @property
    def small(self) -> bool:
        """Whether every relation :meth:`load` made is a small materialised table."""
        return self.materialized and self._created.get(CHECKPOINT) == "TABLE"

    def _create(self, kind: str, name: str, sql: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP {kind} {name} AS {sql}")
        self._created[name] = kind

    def _empty_sql_where_false(self) -> str:
        return f"SELECT * FROM ({self._empty_sql()}) WHERE false"

    def _slim_sql(self, files: Sequence[str]) -> str:
        """Pass one over the commits: keys and versions only, plus raw non-file lines."""
        paths = glob_list_sql([self.storage.duckdb_path(f) for f in files])
        ver = f"CAST({_VERSION_FROM_NAME} AS BIGINT)"
        file_action = "add IS NOT NULL OR remove IS NOT NULL"
        key = key_hash_sql(key_sql(_ACTION_PATH, self.storage.root), dv_unique_id_sql(_ACTION_DV))
        return (
            f"SELECT {ver} AS version, CASE WHEN {file_action} THEN {key} END AS h, "
            "CAST(add IS NOT NULL AS BIGINT) AS is_add, "
            f"CASE WHEN NOT ({file_action}) THEN json END AS other FROM ("
            f"SELECT unnest(from_json(json, {_lit(act.json_structure(slim=True))})), json, "
            f"filename FROM read_ndjson_objects({paths}, filename=true))"
        )

    def _empty_sql(self) -> str:
        cols = ", ".join(f"CAST(NULL AS {act.action_type(a)}) AS {_q(a)}" for a in act.ACTIONS)
        return f"SELECT CAST(NULL AS BIGINT) AS version, {cols}"

    def _keyed(self, source: str) -> str:
        # The action's path and DV are projected once and the key expressions read those
        # columns: spelled out, each of their many uses binds the struct fields anew, and
        # binding is most of a small log's cost (~1.5 ms of 5-7 ms per statement).
        key = key_sql("_lq_path", self.storage.root)
        dvid = dv_unique_id_sql("_lq_dv")
        return (
            f"SELECT * EXCLUDE (_lq_path, _lq_dv), {key_hash_sql('key', 'dvid')} AS h FROM ("
            "SELECT *, CASE WHEN add IS NULL AND remove IS NULL THEN NULL "
            f"ELSE {key} END AS key, {dvid} AS dvid FROM ("
            f"SELECT *, {_ACTION_PATH} AS _lq_path, {_ACTION_DV} AS _lq_dv FROM ({source})))"
        )

    def non_file_actions_sql(self) -> str:
        """The segment's protocol/metaData/txn/domainMetadata actions with their versions."""
        cols = ", ".join(_q(a) for a in act.NON_FILE_ACTIONS)
        if self.materialized:  # the same parse of the same lines, already done
            commits = f"SELECT version, {cols} FROM {COMMITS} WHERE other IS NOT NULL"
        else:
            parsed = ", ".join(f"j.{_q(a)} AS {_q(a)}" for a in act.NON_FILE_ACTIONS)
            commits = (
                f"SELECT version, {parsed} FROM (SELECT version, "
                f"from_json(other, {_lit(act.json_structure())}) AS j FROM {COMMIT_KEYS} "
                "WHERE other IS NOT NULL)"
            )
        return f"SELECT version, {cols} FROM {CHECKPOINT} UNION ALL {commits}"

    def drop(self) -> None:
        """Drops what :meth:`load` created (views before the tables they read)."""
        created = self._created or {CHECKPOINT: "VIEW", COMMITS: "VIEW", COMMIT_KEYS: "TABLE"}
        for kind in ("VIEW", "TABLE"):
            for name, k in created.items():
                if k == kind:
                    self.con.execute(f"DROP {kind} IF EXISTS {name}")
        self._created = {}
        self.materialized = False

    # -- checkpoints ---------------------------------------------------------------------------
    def _top_sql(self, checkpoint: Checkpoint) -> str:
        """SQL reading a checkpoint's own file(s), without following sidecars."""
        version = checkpoint.version
        if checkpoint.format == "uuid" and checkpoint.files[0].name.extension == "json":
            return self.json_actions_sql([checkpoint.files[0].path], version=version)
        return self._parquet_actions_sql([f.path for f in checkpoint.files], version)

    def sidecar_paths(self, checkpoint: Checkpoint) -> list[str]:
        """Locations of the sidecars a checkpoint references (V2; none for multi-part).

        Raises:
            CorruptLogError: the checkpoint cannot be read, or names a sidecar path that is
                not a plain file name.
        """
        if checkpoint.format == "multi":
            return []
        return self._sidecars_from_sql(self._top_sql(checkpoint), strict=True)

    def _checkpoint_sql(self, checkpoint: Checkpoint) -> list[str]:
        """SQL parts reading a checkpoint, following V2 sidecars when present."""
        version = checkpoint.version
        top = self._top_sql(checkpoint)
        sidecars = self._sidecars_from_sql(top) if self._may_have_sidecars(checkpoint) else []
        if not sidecars:
            return [top]
        # V2: file actions live in the sidecars; the top file keeps the non-file actions.
        for path in sidecars:
            if not self.storage.exists(path):
                raise CorruptLogError(path, "sidecar referenced by the checkpoint is missing")
        return [top, self._parquet_actions_sql(sidecars, version)]

    def _may_have_sidecars(self, checkpoint: Checkpoint) -> bool:
        """False when no sidecar can be listed: multi-part checkpoints, and Parquet ones
        whose schema has no ``sidecar`` column (the projection would make it NULL)."""
        if checkpoint.format == "multi":
            return False
        top = checkpoint.files[0]
        if top.name.extension == "json":
            return True
        return "sidecar" in self._parquet_schema(top.path).fields

    def _sidecars_from_sql(self, top_sql: str, *, strict: bool = False) -> list[str]:
        try:
            rows = self.con.sql(
                f"SELECT sidecar.path FROM ({top_sql}) WHERE sidecar IS NOT NULL"
            ).fetchall()
        except duckdb.Error as exc:
            raise_storage_failure(exc, self.storage.join("_delta_log"))
            if strict:
                raise CorruptLogError(
                    self.storage.join("_delta_log"), f"unreadable checkpoint: {exc}"
                ) from exc
            return []  # the caller's full read reports the corrupt file
        base = self.storage.join("_delta_log", "_sidecars")
        # a sidecar listed twice is one file (its adds would otherwise count twice)
        return list(dict.fromkeys(f"{base}/{_sidecar_name(str(p), base)}" for (p,) in rows))

    def _parquet_actions_sql(self, paths: Sequence[str], version: int) -> str:
        """SQL reading the actions of checkpoint files (the parts of a multi-part
        checkpoint, a V2 checkpoint's sidecars). Each file is projected by its own footer:
        a column a file lacks is NULL in that file only (digest 7.3), so the files are read
        in groups of one schema (one group for files a writer made alike) joined by UNION
        ALL; one ``read_parquet`` over files of different shapes would take the first
        file's projection for all, or make DuckDB unify their structs."""
        self._read_parquet_schemas(paths)
        groups: dict[tuple[Any, ...], list[str]] = {}
        for p in paths:
            groups.setdefault(self._schema_keys[p], []).append(p)
        selects = []
        for files in groups.values():
            schema = self._schemas[files[0]]
            exprs = []
            for name in act.ACTIONS:
                field = schema.fields.get(name)
                exprs.append(f"{_project(_q(name), field, act.ACTIONS[name], name)} AS {_q(name)}")
            listed = glob_list_sql([self.storage.duckdb_path(p) for p in files])
            selects.append(
                f"SELECT CAST({int(version)} AS BIGINT) AS version, {', '.join(exprs)} "
                f"FROM read_parquet({listed})"
            )
        return " UNION ALL ".join(selects)

    def _parquet_schema(self, path: str) -> _Group:
        self._read_parquet_schemas([path])
        return self._schemas[path]

    def _read_parquet_schemas(self, paths: Sequence[str]) -> None:
        """Reads the Parquet schema trees of the ``paths`` not read yet, from DuckDB's
        ``parquet_schema`` over all of them (~1 ms; a fresh process would spend ~12 ms
        importing ``pyarrow.parquet`` for it)."""
        todo = [p for p in paths if p not in self._schemas]
        if not todo:
            return
        named = [self.storage.duckdb_path(p) for p in todo]
        by_key = {file_key(n): p for n, p in zip(named, todo, strict=True)}
        sql = (
            "SELECT file_name, name, type, num_children, repetition_type, converted_type, "
            f"logical_type FROM parquet_schema({glob_list_sql(named)})"
        )
        try:
            rows = self.con.execute(sql).fetchall()
        except duckdb.Error as exc:
            if len(todo) > 1:  # name the file at fault (error path only)
                for p in todo:
                    self._read_parquet_schemas([p])
            path = todo[0]
            raise_storage_failure(exc, path)
            if not self.storage.exists(path):
                raise ObjectNotFoundError(path) from exc
            raise CorruptLogError(path, f"unreadable checkpoint: {_first_line(str(exc))}") from exc
        per_file: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            per_file.setdefault(by_key.get(file_key(row[0]), row[0]), []).append(row[1:])
        for p in todo:
            found = per_file.get(p)
            if not found:
                raise CorruptLogError(p, "unreadable checkpoint: no Parquet schema")
            self._schema_keys[p] = tuple(found)
            self._schemas[p] = _schema_tree([(r[0], *r[2:]) for r in found])

    # -- errors --------------------------------------------------------------------------------
    def _diagnose(
        self, exc: duckdb.Error, checkpoint: Checkpoint | None, commits: Sequence[LogFile]
    ) -> Exception:
        log = self.storage.join("_delta_log")
        where = checkpoint.files[0].path if checkpoint else log
        failure = log_storage_failure(exc, [f.path for f in commits] or [where], log)
        if failure is not None and (failure.uri != log or not commits):
            return failure  # the store failed (the log is not corrupt), the object named
        msg = str(exc)
        candidates = [f.path for f in commits] + (
            [f.path for f in checkpoint.files] if checkpoint else []
        )
        for path in candidates if failure is None else ():
            base = path.rsplit("/", 1)[-1]
            if base in msg:
                return CorruptLogError(path, _first_line(msg))
        # DuckDB did not name the file: try them one by one (error path only).
        for f in commits:
            try:
                self.con.sql(f"SELECT count(*) FROM ({self.json_actions_sql([f.path])})").fetchall()
            except duckdb.Error as one:
                return storage_failure(one, f.path) or CorruptLogError(
                    f.path, _first_line(str(one))
                )
        return failure or CorruptLogError(where, _first_line(msg))


def _sidecar_name(path: str, base: str) -> str:
    """The file name a sidecar action's URI-encoded ``path`` names in ``base``, the table's
    ``_delta_log/_sidecars`` directory (digest 4.10): the name alone, as writers should
    store it, or an absolute location in that directory.

    Raises:
        CorruptLogError: the path leaves that directory.
    """
    decoded = unquote(path)
    name: str | None = decoded
    if "/" in path or ":" in path:  # a location (its name may hold an encoded ':')
        prefix = next((p for p in root_prefixes(base) if decoded.startswith(p)), None)
        name = None if prefix is None else decoded[len(prefix) :]
    if not name or "/" in name or name in (".", ".."):
        raise CorruptLogError(base, f"sidecar path {path!r} is not a file in {base}")
    return name


def _first_line(msg: str) -> str:
    line = re.sub(r"\s+", " ", msg.strip().splitlines()[0] if msg.strip() else msg)
    return public_text(line)[:400]


class _Group(NamedTuple):
    """A struct of a Parquet schema (or its root): the fields by name, each a nested
    struct or None (a leaf, a list or a map: never projected field by field)."""

    fields: dict[str, _Group | None]


def _schema_tree(rows: Sequence[tuple[Any, ...]]) -> _Group:
    """Rebuilds the struct tree from ``parquet_schema`` rows (depth-first, each group
    followed by its ``num_children`` children; the first row is the root)."""

    def node(i: int) -> tuple[str, _Group | None, int]:
        name, children, repetition, converted, logical = rows[i]
        i += 1
        fields: dict[str, _Group | None] = {}
        for _ in range(int(children or 0)):
            child, sub, i = node(i)
            fields[child] = sub
        annotated = str(converted or "") in _NOT_STRUCT or str(logical or "").startswith(
            ("ListType", "MapType")
        )
        struct = bool(children) and repetition != "REPEATED" and not annotated
        return str(name), (_Group(fields) if struct else None), i

    _, root, _ = node(0)
    return root if root is not None else _Group({})


_NOT_STRUCT = frozenset({"LIST", "MAP", "MAP_KEY_VALUE"})


def _project(
    expr: str, field: _Group | None, fields: tuple[tuple[str, str], ...], action: str
) -> str:
    """Projects a checkpoint struct column onto the canonical struct type."""
    target = "STRUCT(" + ", ".join(f"{_q(n)} {t}" for n, t in fields) + ")"
    if field is None:
        return f"CAST(NULL AS {target})"
    present = field.fields
    if not (action == "add" and "stats_parsed" in present):
        # DuckDB casts structs by field name: missing fields become NULL, extra ones go
        return f"CAST({expr} AS {target})"
    members = []
    for name, typ in fields:
        has = name in present
        ref = f"{expr}.{_q(name)}"
        if name == "stats" and action == "add":
            parsed = "stats_parsed" in present
            if has and parsed:
                value = f"coalesce(CAST({ref} AS VARCHAR), CAST(to_json({expr}.stats_parsed) AS VARCHAR))"
            elif parsed:
                value = f"CAST(to_json({expr}.stats_parsed) AS VARCHAR)"
            elif has:
                value = f"CAST({ref} AS VARCHAR)"
            else:
                value = "CAST(NULL AS VARCHAR)"
        elif not has:
            value = f"CAST(NULL AS {typ})"
        elif name == "deletionVector":
            value = _project(ref, present[name], act.DV_FIELDS, "deletionVector")
        else:
            value = f"CAST({ref} AS {typ})"
        members.append(f"{_q(name)} := {value}")
    return f"CASE WHEN {expr} IS NULL THEN NULL ELSE struct_pack({', '.join(members)}) END"
