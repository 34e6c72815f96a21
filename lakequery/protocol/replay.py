"""Log replay as SQL (digest §6): reconciles file actions by (path, DV id), newest first.

Pure with respect to storage: the functions take DuckDB relations/tables of actions in the
canonical shape of :mod:`lakequery.protocol.actions` and return Arrow tables. Nothing
loops over actions in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.errors import CorruptLogError, InvalidPathError


def dv_unique_id_sql(dv: str) -> str:
    """SQL for the DV unique id (digest §11.3) of a ``deletionVector`` struct expression."""
    return (
        f"CASE WHEN {dv} IS NULL OR {dv}.storageType IS NULL THEN NULL "
        f"ELSE {dv}.storageType || {dv}.pathOrInlineDv || "
        f"coalesce('@' || CAST({dv}.\"offset\" AS VARCHAR), '') END"
    )


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def root_prefixes(root: str) -> list[str]:
    """The spellings of the table root an absolute ``add.path`` may start with."""
    base = root.rstrip("/")
    out = [base + "/"]
    if base.startswith("/"):
        out += ["file://" + base + "/", "file:" + base + "/", "file://localhost" + base + "/"]
    elif base.startswith("s3://"):
        out += ["s3a://" + base[5:] + "/", "s3n://" + base[5:] + "/"]
    return out


def key_sql(path: str, root: str) -> str:
    """SQL turning a raw ``add.path``/``remove.path`` into the canonical relative key.

    The path is URI-decoded once; an absolute path under the table root is made relative.
    Absolute paths elsewhere keep their decoded form (files outside the root, see
    :mod:`lakequery.protocol.file_locations`; :func:`check_paths` refuses the unsafe ones).
    """
    decoded = f"url_decode({path})"
    cases = " ".join(
        f"WHEN starts_with({decoded}, {_sql_str(p)}) THEN substr({decoded}, {len(p) + 1})"
        for p in root_prefixes(root)
    )
    # the common case (relative, nothing escaped) skips decoding and the prefix tests
    return (
        f"(CASE WHEN NOT (contains({path}, ':') OR starts_with({path}, '/')) THEN "
        f"(CASE WHEN contains({path}, '%') THEN {decoded} ELSE {path} END) "
        f"ELSE (CASE {cases} ELSE {decoded} END) END)"
    )


#: Partition column types DuckDB casts exactly as the protocol serializes them (digest §9.1);
#: the others (floats in Java notation, decimals, timestamps, binary) are left as strings
#: for :func:`lakequery.protocol.partitions.parse_partition_values`.
SQL_PARTITION_TYPES = {
    "string": "VARCHAR",
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INTEGER",
    "long": "BIGINT",
    "date": "DATE",
    "boolean": "BOOLEAN",
}


def partition_value_sql(key: str, type_name: str) -> str:
    """SQL reading one partition value from ``add.partitionValues``: typed when DuckDB can
    cast it exactly, else the serialized string; ``''`` is NULL either way."""
    # partitionValues is required on a partitioned table: without it every value would
    # read as NULL (other rows), so the query fails and replay reports a corrupt log
    raw = (
        f"CASE WHEN add.partitionValues IS NULL THEN error({_sql_str(_NO_PARTITION_VALUES)}) "
        f"ELSE nullif(add.partitionValues[{_sql_str(key)}], '') END"
    )
    sql_type = SQL_PARTITION_TYPES.get(type_name)
    if sql_type is None or sql_type == "VARCHAR":
        return raw
    if sql_type in _INTEGER_SQL_TYPES:
        # DuckDB's cast also takes '0E0' or ' 1': only decimal digits are the protocol's
        # spelling; anything else fails the cast (a conversion error, which the caller
        # reports as a corrupt log) instead of becoming some integer
        raw = (
            f"CASE WHEN regexp_full_match({raw}, '[+-]?[0-9]+') THEN {raw} "
            f"ELSE 'not an integer: ' || {raw} END"
        )
    return f"CAST({raw} AS {sql_type})"


_INTEGER_SQL_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT"})
_NO_PARTITION_VALUES = "an add action of a partitioned table without partitionValues"


def key_hash_sql(key: str, dvid: str) -> str:
    """SQL for a 128-bit hash of a file action's (key, DV id): what replay groups on, so the
    wide path strings never need to be held for every action (collisions: ~2**-100)."""
    return f"md5_number({key} || chr(0) || coalesce({dvid}, ''))"


#: The live-file columns replay produces, followed by one ``partition_raw_<i>`` column per
#: partition column (``Snapshot.files()`` turns those into typed values).
FILE_COLUMNS = (
    "path",
    "size",
    "modification_time",
    "num_records",
    "stats",
    "deletion_vector",
    "base_row_id",
    "default_row_commit_version",
    "tags",
    "clustering_provider",
)

_WINNERS = "_lq_winners"


def _winners_sql(commit_keys: str) -> str:
    """Per key hash in the commits, the code ``2 * version + is_add`` of its newest action."""
    return (
        f"SELECT h, max(version * 2 + is_add) AS code FROM {commit_keys} "
        "WHERE h IS NOT NULL GROUP BY h"
    )


def _winners(con: duckdb.DuckDBPyConnection, commit_keys: str) -> None:
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_WINNERS} AS {_winners_sql(commit_keys)}")


def _live_sql(checkpoint: str, commits: str, what: str, cols: str, extra: str = "") -> str:
    """Rows of ``what`` (add | remove) that are the newest action of their key."""
    is_add = 1 if what == "add" else 0
    return (
        f"SELECT {cols} FROM {checkpoint} AS a ANTI JOIN {_WINNERS} AS w ON w.h = a.h "
        f"WHERE {what} IS NOT NULL {extra} "
        f"UNION ALL SELECT {cols} FROM {commits} AS a SEMI JOIN {_WINNERS} AS w "
        f"ON w.h = a.h AND w.code = a.version * 2 + {is_add} WHERE {what} IS NOT NULL {extra}"
    )


def _stream_to_arrow(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """Runs ``sql`` and collects its result batch by batch: DuckDB never holds the whole
    result next to its Arrow copy (``to_arrow_table`` would, doubling peak memory)."""
    reader = con.sql(sql).to_arrow_reader(batch_size=64 * 1024)
    table: pa.Table = reader.read_all()
    return table


def misread_line_sql(other: str, actions: tuple[str, ...] = ("add", "remove")) -> str:
    """SQL: the raw commit line ``other`` (NULL when the parse found a file action in it)
    names one of ``actions`` the parse could not read, or is no JSON object. The parse
    makes a value of the wrong type NULL, so such a line would pass for an action replay
    ignores: a damaged remove would leave its file live."""
    named = " ".join(f"OR coalesce(json_type({other}, '$.{a}'), 'NULL') <> 'NULL'" for a in actions)
    return f"({other} IS NOT NULL AND (json_type({other}) <> 'OBJECT' {named}))"


def _refuse_unreadable_file_actions(
    con: duckdb.DuckDBPyConnection, commit_keys: str, where: str
) -> None:
    """Raises CorruptLogError naming the first commit with a file action replay cannot
    key: without a path (the parse makes a path of the wrong type NULL too), or not
    parsed at all (:func:`misread_line_sql`). Either would drop out of replay silently: an
    add's file would vanish, a remove's file would stay live."""
    ((pathless_add, pathless_remove, misread),) = con.execute(
        "SELECT min(version) FILTER (WHERE h IS NULL AND is_add = 1), "
        "min(version) FILTER (WHERE h IS NULL AND is_add = 0 AND other IS NULL), "
        f"min(version) FILTER (WHERE {misread_line_sql('other')}) FROM {commit_keys}"
    ).fetchall()
    for version, what in (
        (pathless_add, "an add action without a path"),
        (pathless_remove, "a remove action without a path"),
        (misread, "a line that is not a well-formed action (add/remove of the wrong shape)"),
    ):
        if version is not None:
            raise CorruptLogError(f"{where}/{int(version):020d}.json", what)


def replay_files(
    con: duckdb.DuckDBPyConnection,
    *,
    commit_keys: str,
    commits: str,
    checkpoint: str,
    partition_sql: Sequence[str] = (),
    small: bool = False,
    where: str = "_delta_log",
) -> pa.Table:
    """The live files of a segment (digest §6), one row each, columns FILE_COLUMNS.

    Raises:
        CorruptLogError: at ``where`` (the log directory), when a partition value does not
            parse as its column's type; naming the commit, when an add has no path.

    ``commit_keys`` is the slim table (version, h, is_add) of the commits' file actions;
    ``commits`` and ``checkpoint`` are views of the actions in the canonical shape with
    ``h``. A key's newest action decides: an ``add`` makes it live. Checkpoint rows are
    already one per key and survive unless a commit names their key; among the commits,
    the winner per key comes from a hash aggregate over the slim table. Only the winners'
    payloads are read out, with one column ``partition_raw_<i>`` per expression of
    ``partition_sql`` (over ``add``: see :func:`partition_value_sql`). ``small``: the
    relations are small tables, so the winners are a common table expression of the same
    statement rather than a temporary table of their own.
    """
    raw_parts = "".join(f", {expr} AS partition_raw_{i}" for i, expr in enumerate(partition_sql))
    cols = f"""key AS path, add.size AS size,
        add.modificationTime AS modification_time,
        TRY_CAST(json_extract_string(add.stats, '$.numRecords') AS BIGINT) AS num_records,
        add.stats AS stats, add.deletionVector AS deletion_vector,
        add.baseRowId AS base_row_id,
        add.defaultRowCommitVersion AS default_row_commit_version,
        add.tags AS tags, add.clusteringProvider AS clustering_provider{raw_parts}"""
    live = _live_sql(checkpoint, commits, "add", cols)
    _refuse_unreadable_file_actions(con, commit_keys, where)
    try:
        if small:  # one statement instead of three (create, read, drop); same winners
            return _stream_to_arrow(
                con, f"WITH {_WINNERS} AS MATERIALIZED ({_winners_sql(commit_keys)}) {live}"
            )
        _winners(con, commit_keys)
        try:
            return _stream_to_arrow(con, live)
        finally:
            con.execute(f"DROP TABLE IF EXISTS {_WINNERS}")
    except (duckdb.Error, OSError) as exc:  # OSError: DuckDB's error through the Arrow stream
        if _NO_PARTITION_VALUES in str(exc):
            raise CorruptLogError(where, _NO_PARTITION_VALUES) from exc
        if "Conversion Error" not in str(exc):
            raise
        first = str(exc).strip().splitlines()[0][:300]
        raise CorruptLogError(where, f"a partition value does not parse: {first}") from exc


def replay_adds(
    con: duckdb.DuckDBPyConnection,
    *,
    commit_keys: str,
    commits: str,
    checkpoint: str,
) -> pa.Table:
    """The live ``add`` actions of a segment as the log states them (for checkpoints).

    Same winners as :func:`replay_files`, but each row keeps the whole ``add`` struct in
    the canonical shape of :mod:`lakequery.protocol.actions` (``add.path`` exactly as
    written in the log, not decoded). Columns: path (the canonical key), version, add.
    """
    _winners(con, commit_keys)
    try:
        sql = _live_sql(checkpoint, commits, "add", "key AS path, version, add")
        return _stream_to_arrow(con, sql)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {_WINNERS}")


def replay_tombstones(
    con: duckdb.DuckDBPyConnection,
    *,
    commit_keys: str,
    commits: str,
    checkpoint: str,
    cutoff_ms: int,
) -> pa.Table:
    """Unexpired tombstones: removes that are the newest action of their key and whose
    ``deletionTimestamp`` is after ``cutoff_ms``. Columns: path, version, remove."""
    _winners(con, commit_keys)
    try:
        alive = f"AND coalesce(remove.deletionTimestamp, 0) > {int(cutoff_ms)}"
        sql = _live_sql(checkpoint, commits, "remove", "key AS path, version, remove", alive)
        return _stream_to_arrow(con, sql)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {_WINNERS}")


def check_paths(files: pa.Table, *, root: str, plain: bool | None = None) -> None:
    """Refuses live files lakequery must not read, by the rule of
    :mod:`lakequery.protocol.file_locations`: a ``..`` segment, or an absolute location
    on another kind of storage than the table's. Absolute locations on the table's own
    storage (a shallow clone's files, digest §4.3) are accepted; those inside the root were
    already made relative by :func:`key_sql`. ``plain``: :func:`all_plain_relative` of the
    paths, when the caller has it.

    Raises:
        InvalidPathError: naming the first offending path and why.
    """
    from lakequery.protocol.file_locations import all_plain_relative, refusals

    if files.num_rows == 0:
        return
    path = files.column("path")
    if plain is None:
        plain = all_plain_relative(path)
    if plain:
        return  # most tables: one pass over the bytes, no regex
    # a finer pre-filter in Arrow, then the exact rule for the candidates
    candidates = pc.or_(
        pc.or_(pc.match_substring(path, ":"), pc.starts_with(path, "/")),
        pc.or_(
            pc.match_substring(path, ".."),
            pc.match_substring_regex(path, "^$|/$"),  # options only: no pandas import
        ),
    )
    if not pc.any(candidates).as_py():
        return
    suspects = pc.filter(path, candidates)
    reasons = refusals(root, suspects.combine_chunks())
    bad = pc.indices_nonzero(pc.is_valid(reasons))
    if len(bad):
        first = int(bad[0].as_py())
        raise InvalidPathError(
            str(suspects[first].as_py()), f"{reasons[first].as_py()} (table root {root})"
        )


def latest_non_file_actions(
    con: duckdb.DuckDBPyConnection, actions_sql: str
) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """The non-file actions that survive replay, newest first where order matters.

    Returns ``{"protocol": [(v, action)], "metaData": [...], "txn": [...],
    "domainMetadata": [...]}`` with the latest protocol/metaData (at most one each), the
    latest txn per appId and the latest domainMetadata per domain (tombstones included;
    the caller drops ``removed`` domains).
    """
    # One statement: the actions are parsed once (a CTE materialised for the four picks)
    # instead of once per kind; each row carries exactly one non-NULL kind column.
    kinds = ("protocol", "metaData", "txn", "domainMetadata")
    picks = [
        f'SELECT * FROM (SELECT version, "{name}" FROM a WHERE "{name}" IS NOT NULL '
        "ORDER BY version DESC LIMIT 1)"
        for name in ("protocol", "metaData")
    ] + [
        f'SELECT version, "{name}" FROM a WHERE "{name}" IS NOT NULL '
        f'QUALIFY row_number() OVER (PARTITION BY "{name}".{key} ORDER BY version DESC) = 1'
        for name, key in (("txn", "appId"), ("domainMetadata", "domain"))
    ]
    cols = ", ".join(f'"{k}"' for k in kinds)
    # execute(), not sql(): a relation would plan the statement once more for its schema
    rows = con.execute(
        f"WITH a AS MATERIALIZED ({actions_sql}) SELECT version, {cols} FROM ("
        + " UNION ALL BY NAME ".join(picks)
        + ")"
    ).fetchall()
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {k: [] for k in kinds}
    for version, *values in rows:
        for kind, value in zip(kinds, values, strict=True):
            if value is not None:
                out[kind].append((int(version), dict(value)))
    return out
