"""Log replay as SQL (digest §6): reconciles file actions by (path, DV id), newest first.

Pure with respect to storage: the functions take DuckDB relations/tables of actions in the
canonical shape of :mod:`lakequery.protocol.actions` and return Arrow tables. Nothing
loops over actions in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from lakequery.errors import InvalidPathError


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
        out += ["file://" + base + "/", "file:" + base + "/"]
    elif base.startswith("s3://"):
        out += ["s3a://" + base[5:] + "/", "s3n://" + base[5:] + "/"]
    return out


def key_sql(path: str, root: str) -> str:
    """SQL turning a raw ``add.path``/``remove.path`` into the canonical relative key.

    The path is URI-decoded once; an absolute path under the table root is made relative.
    Absolute paths elsewhere keep their decoded form (and are refused by
    :func:`check_paths` for data files).
    """
    decoded = f"url_decode({path})"
    cases = " ".join(
        f"WHEN starts_with({decoded}, {_sql_str(p)}) THEN substr({decoded}, {len(p) + 1})"
        for p in root_prefixes(root)
    )
    return f"(CASE {cases} ELSE {decoded} END)"


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
    raw = f"nullif(add.partitionValues[{_sql_str(key)}], '')"
    sql_type = SQL_PARTITION_TYPES.get(type_name)
    if sql_type is None or sql_type == "VARCHAR":
        return raw
    return f"CAST({raw} AS {sql_type})"


@dataclass(frozen=True)
class ReplayResult:
    """Live files and unexpired tombstones, as Arrow tables."""

    files: pa.Table  # one row per live file, columns FILE_COLUMNS
    tombstones: pa.Table  # columns: path, version, remove (canonical struct)


#: The live-file columns replay produces, followed by one ``partition_raw_<i>`` string
#: column per partition column (``Snapshot.files()`` turns those into typed values).
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
)


def replay_files(
    con: duckdb.DuckDBPyConnection,
    *,
    commits: str,
    checkpoint: str,
    tombstone_cutoff_ms: int,
    partition_sql: Sequence[str] = (),
) -> ReplayResult:
    """Reconciles file actions: ``checkpoint`` (a table or view of reconciled actions) and
    ``commits`` (the commits after it), both with the columns version, add, remove and the
    canonical ``key`` / ``dvid`` of each file action.

    A key's newest action decides: an ``add`` makes it live, a ``remove`` makes it a
    tombstone; tombstones whose ``deletionTimestamp`` is at or before the cutoff expire.
    Checkpoint rows are already one per key, so they survive unless a commit names their
    key (an anti-join against the small commit table); among commits the winner of each
    key is found with a hash aggregate on slim columns. Only the winners' payloads are
    copied out, with one column ``partition_raw_<i>`` per expression of ``partition_sql``
    (over ``add``: see :func:`partition_value_sql`).
    """
    raw_parts = "".join(f", {expr} AS partition_raw_{i}" for i, expr in enumerate(partition_sql))
    file_cols = f"""key AS path, add.size AS size,
        add.modificationTime AS modification_time,
        TRY_CAST(json_extract_string(add.stats, '$.numRecords') AS BIGINT) AS num_records,
        add.stats AS stats, add.deletionVector AS deletion_vector,
        add.baseRowId AS base_row_id,
        add.defaultRowCommitVersion AS default_row_commit_version,
        add.tags AS tags{raw_parts}"""
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _lq_winners AS
        SELECT arg_max(rowid, version * 2 + CAST(add IS NOT NULL AS BIGINT)) AS rid, key, dvid
        FROM {commits} WHERE key IS NOT NULL GROUP BY key, dvid
        """
    )
    surviving = (
        "NOT EXISTS (SELECT 1 FROM _lq_winners AS w "
        "WHERE w.key = a.key AND w.dvid IS NOT DISTINCT FROM a.dvid)"
    )
    in_commits = "rowid IN (SELECT rid FROM _lq_winners)"
    alive = f"coalesce(remove.deletionTimestamp, 0) > {int(tombstone_cutoff_ms)}"
    try:
        files = con.sql(
            f"SELECT {file_cols} FROM {checkpoint} AS a WHERE add IS NOT NULL AND {surviving} "
            f"UNION ALL SELECT {file_cols} FROM {commits} AS a "
            f"WHERE add IS NOT NULL AND {in_commits}"
        ).to_arrow_table()
        tombstones = con.sql(
            f"SELECT key AS path, version, remove FROM {checkpoint} AS a "
            f"WHERE remove IS NOT NULL AND {alive} AND {surviving} "
            f"UNION ALL SELECT key AS path, version, remove FROM {commits} AS a "
            f"WHERE add IS NULL AND remove IS NOT NULL AND {alive} AND {in_commits}"
        ).to_arrow_table()
    finally:
        con.execute("DROP TABLE IF EXISTS _lq_winners")
    return ReplayResult(files, tombstones)


_ESCAPE_SQL = (
    "(contains(path, ':') OR starts_with(path, '/') OR contains(path, '..')) AND "
    "(regexp_matches(path, '^[a-zA-Z][a-zA-Z0-9+.-]*:') OR starts_with(path, '/') "
    "OR regexp_matches(path, '(^|/)\\.\\.(/|$)'))"
)


def check_paths(con: duckdb.DuckDBPyConnection, files: pa.Table, *, root: str) -> None:
    """Refuses live files whose path escapes the table root.

    Relative paths with ``..`` segments and absolute paths outside the root are refused;
    absolute paths inside the root were already made relative by :func:`key_sql`.

    Raises:
        InvalidPathError: naming the first offending path.
    """
    if files.num_rows == 0:
        return
    con.register("_lq_files", files)
    try:
        rows = con.sql(f"SELECT path FROM _lq_files WHERE {_ESCAPE_SQL} LIMIT 1").fetchall()
    finally:
        con.unregister("_lq_files")
    if rows:
        raise InvalidPathError(str(rows[0][0]), f"it is not inside the table root {root}")


def latest_non_file_actions(
    con: duckdb.DuckDBPyConnection, actions: str
) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """The non-file actions that survive replay, newest first where order matters.

    Returns ``{"protocol": [(v, action)], "metaData": [...], "txn": [...],
    "domainMetadata": [...]}`` with the latest protocol/metaData (at most one each), the
    latest txn per appId and the latest domainMetadata per domain (tombstones included;
    the caller drops ``removed`` domains).
    """
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for name in ("protocol", "metaData"):
        rows = con.sql(
            f'SELECT version, "{name}" FROM {actions} WHERE "{name}" IS NOT NULL '
            "ORDER BY version DESC LIMIT 1"
        ).fetchall()
        out[name] = [(int(v), dict(a)) for v, a in rows]
    for name, key in (("txn", "appId"), ("domainMetadata", "domain")):
        rows = con.sql(
            f'SELECT version, "{name}" FROM {actions} WHERE "{name}" IS NOT NULL '
            f'QUALIFY row_number() OVER (PARTITION BY "{name}".{key} ORDER BY version DESC) = 1'
        ).fetchall()
        out[name] = [(int(v), dict(a)) for v, a in rows]
    return out
