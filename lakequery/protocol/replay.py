"""Log replay as SQL (digest §6): reconciles file actions by (path, DV id), newest first.

Pure with respect to storage: the functions take DuckDB relations/tables of actions in the
canonical shape of :mod:`lakequery.protocol.actions` and return Arrow tables. Nothing
loops over actions in Python.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class ReplayResult:
    """Live files and unexpired tombstones, as Arrow tables."""

    adds: pa.Table  # columns: key, version, add (canonical struct)
    tombstones: pa.Table  # columns: key, version, remove (canonical struct)


def replay_files(
    con: duckdb.DuckDBPyConnection, actions: str, *, root: str, tombstone_cutoff_ms: int
) -> ReplayResult:
    """Reconciles the file actions in table/view ``actions`` (columns version, add, remove).

    A key's newest action decides: an ``add`` makes it live, a ``remove`` makes it a
    tombstone. Tombstones whose ``deletionTimestamp`` is at or before the cutoff expire.
    """
    path = "coalesce(add.path, remove.path)"
    dv = "coalesce(add.deletionVector, remove.deletionVector)"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _lq_latest AS
        SELECT key, version, add, remove FROM (
            SELECT {key_sql(path, root)} AS key, {dv_unique_id_sql(dv)} AS dvid,
                   version, add, remove
            FROM {actions}
            WHERE add IS NOT NULL OR remove IS NOT NULL
        )
        QUALIFY row_number() OVER (
            PARTITION BY key, dvid ORDER BY version DESC, (add IS NOT NULL) DESC) = 1
        """
    )
    try:
        adds = con.sql(
            "SELECT key, version, add FROM _lq_latest WHERE add IS NOT NULL"
        ).to_arrow_table()
        tombstones = con.sql(
            "SELECT key, version, remove FROM _lq_latest WHERE add IS NULL "
            f"AND coalesce(remove.deletionTimestamp, 0) > {int(tombstone_cutoff_ms)}"
        ).to_arrow_table()
    finally:
        con.execute("DROP TABLE IF EXISTS _lq_latest")
    return ReplayResult(adds, tombstones)


_ESCAPE_SQL = (
    "regexp_matches(key, '^[a-zA-Z][a-zA-Z0-9+.-]*:') OR starts_with(key, '/') "
    "OR regexp_matches(key, '(^|/)\\.\\.(/|$)')"
)


def check_paths(con: duckdb.DuckDBPyConnection, adds: pa.Table, *, root: str) -> None:
    """Refuses live files whose path escapes the table root.

    Relative paths with ``..`` segments and absolute paths outside the root are refused;
    absolute paths inside the root were already made relative by :func:`key_sql`.

    Raises:
        InvalidPathError: naming the first offending path.
    """
    if adds.num_rows == 0:
        return
    con.register("_lq_adds", adds)
    try:
        rows = con.sql(f"SELECT key FROM _lq_adds WHERE {_ESCAPE_SQL} LIMIT 1").fetchall()
    finally:
        con.unregister("_lq_adds")
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
