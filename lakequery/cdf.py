"""Reading the Change Data Feed of a table (digest §13).

:func:`changes` plans the row-level changes of a range of commits and returns a
:class:`ChangeScan`, read like a :class:`~lakequery.scan.Scan`. Per commit, ascending:

1. a commit with ``cdc`` actions gives the rows of its change files (``_change_type`` is
   a column of the file; partition values come from the ``cdc`` action) and nothing else;
2. otherwise rows of ``add`` actions with ``dataChange=true`` are inserts and rows of such
   ``remove`` actions are deletes, minus the rows the file's deletion vector hides;
3. a ``remove(path, dv1)`` + ``add(path, dv2)`` of one file in one commit emits only the
   difference: rows in ``dv2`` but not ``dv1`` are deletes, rows in ``dv1`` but not ``dv2``
   are inserts.

No new reader is involved. The planned files become the live files of synthetic
snapshots whose schema is the table's plus ``_change_type``, ``_commit_version`` and
``_commit_timestamp``; those columns are per-file constants, so they are declared as
partition columns and every engine folds them in like partition values (for change
files ``_change_type`` stays a data column). A row selection that is not "all rows minus
the file's DV" (the DV refinement) is expressed as a synthetic inline deletion vector
holding the complement of the selected positions, which the engines apply natively. An
engine keys deletion vectors by file location, so a file planned more than once (added in
one commit, removed in a later one) goes to separate snapshots, scanned one after the
other.

Example:
    >>> import tempfile, pyarrow as pa, lakequery as lq
    >>> root = tempfile.mkdtemp()
    >>> cdf = {"delta.enableChangeDataFeed": "true"}
    >>> _ = lq.write(root, pa.table({"id": [1, 2]}), configuration=cdf)
    >>> _ = lq.write(root, pa.table({"id": [3]}), mode="append")
    >>> rows = changes(lq.DeltaTable(root), starting_version=1).to_arrow()
    >>> rows.select(["id", "_change_type", "_commit_version"]).to_pylist()
    [{'id': 3, '_change_type': 'insert', '_commit_version': 1}]
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import int64_array, int64_scalar, int_values, python_array
from lakequery.duckdb_databases import private_cursor
from lakequery.dv import z85
from lakequery.dv.bitmap import serialize
from lakequery.dv.descriptor import Descriptor
from lakequery.dv.files import load_deletion_vectors
from lakequery.engines.deletion import dv_cardinalities
from lakequery.errors import (
    ChangeDataFeedError,
    CorruptLogError,
    PredicateError,
    TableNotFoundError,
    VersionNotFoundError,
)
from lakequery.history import commit_timestamps, search_range
from lakequery.log_reader import replay_cursor
from lakequery.log_segment import (
    TableState,
    check_files,
    list_log,
    load_state,
    partition_specs,
)
from lakequery.metadata import Metadata
from lakequery.parquet_footers import footer_row_counts
from lakequery.protocol.change_feed import (
    CHANGE_FEED_COLUMNS,
    cdf_enabled,
    column_mapping_of,
    non_additive_change,
)
from lakequery.protocol.column_mapping import MAX_ID_KEY, ColumnMappingMode
from lakequery.protocol.features import Protocol, check_readable
from lakequery.protocol.log_files import LogFile, earliest_version
from lakequery.protocol.partitions import partition_struct
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.replay import key_sql, misread_line_sql
from lakequery.protocol.sql_spelling import glob_list_sql
from lakequery.snapshot import Snapshot
from lakequery.storage import Storage
from lakequery.storage.engine_errors import commit_read_error

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    from pyarrow.compute import Expression

    from lakequery.commands.progress import ProgressCallback
    from lakequery.scan import Scan
    from lakequery.table import DeltaTable

#: The columns the change feed adds to the table's columns, in output order.
CHANGE_COLUMNS = CHANGE_FEED_COLUMNS
CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = CHANGE_COLUMNS
_CHANGE_DELTA_TYPES = {CHANGE_TYPE: "string", COMMIT_VERSION: "long", COMMIT_TIMESTAMP: "timestamp"}

_DV_ARROW = pa.struct(
    [
        pa.field("storageType", pa.string()),
        pa.field("pathOrInlineDv", pa.string()),
        pa.field("offset", pa.int32()),
        pa.field("sizeInBytes", pa.int32()),
        pa.field("cardinality", pa.int64()),
    ]
)
_STR_MAP = "MAP(VARCHAR, VARCHAR)"
_DV_JSON = {
    "storageType": "VARCHAR",
    "pathOrInlineDv": "VARCHAR",
    "offset": "INTEGER",
    "sizeInBytes": "INTEGER",
    "cardinality": "BIGINT",
}
_FILE_JSON = {
    "path": "VARCHAR",
    "partitionValues": _STR_MAP,
    "size": "BIGINT",
    "dataChange": "BOOLEAN",
    "stats": "VARCHAR",
    "deletionVector": _DV_JSON,
}
#: What one log line is parsed into: file actions typed, metaData/protocol kept as JSON.
_LINE_STRUCTURE = json.dumps(
    {
        "add": _FILE_JSON,
        "remove": _FILE_JSON,
        "cdc": {"path": "VARCHAR", "partitionValues": _STR_MAP, "size": "BIGINT"},
        "metaData": "JSON",
        "protocol": "JSON",
    }
)
_ACTIONS = "_lq_cdf_actions"


# --- range --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    commits: list[LogFile]  # start..end
    times_ms: list[int]  # commit timestamp per commit of ``commits``


def _to_ms(when: datetime | str) -> int:
    from lakequery.table import _parse_as_of

    return int(_parse_as_of(when).timestamp() * 1000)


def _resolve_range(
    dt: DeltaTable,
    starting_version: int | None,
    ending_version: int | None,
    starting_timestamp: datetime | str | None,
    ending_timestamp: datetime | str | None,
) -> _Range:
    uri = dt.uri
    if starting_version is not None and starting_timestamp is not None:
        raise ChangeDataFeedError(uri, "pass starting_version or starting_timestamp, not both")
    if ending_version is not None and ending_timestamp is not None:
        raise ChangeDataFeedError(uri, "pass ending_version or ending_timestamp, not both")
    if starting_version is None and starting_timestamp is None:
        raise ChangeDataFeedError(uri, "a starting_version or starting_timestamp is required")
    for name, v in (("starting_version", starting_version), ("ending_version", ending_version)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ChangeDataFeedError(uri, f"{name} must be a non-negative integer, not {v!r}")
    listing = list_log(dt.storage, 0)
    latest = listing.latest_version
    if latest is None:
        raise TableNotFoundError(uri, "no commit files in _delta_log")
    earliest = earliest_version(listing)
    commits = [c for c in listing.commits if earliest is not None and c.version >= earliest]
    props = TableProperties(dt._latest_without_files().metadata.configuration)
    times = commit_timestamps(dt.storage, commits, props)
    versions = [c.version for c in commits]

    def not_found(version: int | None = None, timestamp: object = None, detail: str = "") -> Any:
        return VersionNotFoundError(
            uri,
            version=version,
            timestamp=timestamp,
            earliest=earliest,
            latest=latest,
            detail=detail,
        )

    if starting_timestamp is not None:
        # the first commit at or after the time (digest §16, CDF start semantics)
        ms = _to_ms(starting_timestamp)
        # (a time before the in-commit timestamp enablement that is after every commit
        # before it finds the enabling commit: the index after its side's range)
        i: int | None = bisect.bisect_left(times, ms, *search_range(commits, props, ms))
        i = None if i == len(times) else i
        if i is None:
            raise not_found(timestamp=starting_timestamp, detail="no commit at or after it")
        start = versions[i]
    else:
        start = int(starting_version)  # type: ignore[arg-type]
    if ending_timestamp is not None:
        ms = _to_ms(ending_timestamp)
        j = bisect.bisect_right(times, ms, *search_range(commits, props, ms))
        if j == 0:
            raise not_found(timestamp=ending_timestamp, detail="no commit at or before it")
        end = versions[j - 1]
    else:
        end = latest if ending_version is None else int(ending_version)
    if start > latest:
        raise not_found(start, detail="the starting version is after the latest version")
    if end > latest:
        raise not_found(end, detail="the ending version is after the latest version")
    if start > end:
        raise ChangeDataFeedError(
            uri, f"the starting version {start} is after the ending version {end}"
        )
    if earliest is None or start < earliest:
        raise not_found(start, detail="its commit is no longer in the log")
    lo = versions.index(start) if start in versions else None
    chosen = commits[lo : lo + end - start + 1] if lo is not None else []
    if [c.version for c in chosen] != list(range(start, end + 1)):
        raise not_found(start, detail="a commit of the range is missing from the log")
    return _Range(start, end, chosen, times[lo : lo + len(chosen)] if lo is not None else [])


# --- metadata checks ----------------------------------------------------------------------


def _check_versions(
    uri: str,
    rng: _Range,
    start_state: TableState,
    changes: dict[int, tuple[dict[str, Any] | None, dict[str, Any] | None]],
) -> tuple[Metadata, Protocol]:
    """Refuses ranges with versions where the feed was off or the schema changed in a
    non-additive way; returns the metadata and protocol in force at the end."""
    metadata, protocol = start_state.metadata, start_state.protocol
    segment_start = rng.start

    def check(last: int) -> None:
        if not cdf_enabled(metadata, protocol):
            raise ChangeDataFeedError(
                uri,
                f"change data feed was not enabled for versions {segment_start}..{last} "
                "(delta.enableChangeDataFeed), so their changes were not recorded",
                start=rng.start,
                end=rng.end,
            )

    for version in sorted(v for v in changes if v > rng.start):
        check(version - 1)
        meta_action, proto_action = changes[version]
        new_protocol = Protocol.from_action(proto_action) if proto_action else protocol
        check_readable(new_protocol)
        new_metadata = Metadata.from_action(meta_action) if meta_action else metadata
        if meta_action:
            why = non_additive_change(metadata, protocol, new_metadata, new_protocol)
            if why:
                raise ChangeDataFeedError(
                    uri,
                    f"version {version} changes the schema in a non-additive way ({why}); "
                    "read the changes before and after it separately",
                    start=rng.start,
                    end=rng.end,
                )
        metadata, protocol, segment_start = new_metadata, new_protocol, version
    check(rng.end)
    clash = [c for c in CHANGE_COLUMNS if metadata.schema.get(c) is not None]
    if clash:
        raise ChangeDataFeedError(uri, f"the table has a column named {clash[0]!r}")
    return metadata, protocol


# --- reading the actions ------------------------------------------------------------------


def _load_actions(con: duckdb.DuckDBPyConnection, storage: Storage, commits: list[LogFile]) -> None:
    """Parses the range's commits into the temp table ``_lq_cdf_actions`` (one row per line:
    version, add, remove, cdc structs and raw metaData/protocol JSON)."""
    storage.register_duckdb(con)
    paths = glob_list_sql([storage.duckdb_path(c.path) for c in commits])
    other = "CASE WHEN add IS NULL AND remove IS NULL AND cdc IS NULL THEN json END"
    unreadable = (
        f"{misread_line_sql(other, ('add', 'remove', 'cdc'))} OR (add IS NOT NULL AND "
        "add.path IS NULL) OR (remove IS NOT NULL AND remove.path IS NULL) OR "
        "(cdc IS NOT NULL AND cdc.path IS NULL)"
    )
    sql = (
        f"CREATE OR REPLACE TEMP TABLE {_ACTIONS} AS "
        "SELECT CAST(left(right(filename, 25), 20) AS BIGINT) AS version, add, remove, cdc, "
        'CAST("metaData" AS VARCHAR) AS meta, CAST(protocol AS VARCHAR) AS proto, '
        f"{unreadable} AS unreadable FROM ("
        f"SELECT unnest(from_json(json, {_lit(_LINE_STRUCTURE)})), json, filename "
        f"FROM read_ndjson_objects({paths}, filename=true))"
    )
    try:
        con.execute(sql)
        ((bad,),) = con.execute(f"SELECT min(version) FROM {_ACTIONS} WHERE unreadable").fetchall()
    except duckdb.Error as exc:
        raise commit_read_error(exc, storage.join("_delta_log"), [c.path for c in commits]) from exc
    if bad is not None:  # as replay refuses it (misread_line_sql)
        raise CorruptLogError(
            storage.join("_delta_log", f"{int(bad):020d}.json"),
            "a line that is not a well-formed action (a file action without a path, or of "
            "the wrong shape)",
        )


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _metadata_changes(
    con: duckdb.DuckDBPyConnection,
) -> dict[int, tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    rows = con.sql(
        f"SELECT version, max(meta), max(proto) FROM {_ACTIONS} "
        "WHERE meta IS NOT NULL OR proto IS NOT NULL GROUP BY version"
    ).fetchall()
    return {
        int(v): (json.loads(m) if m else None, json.loads(p) if p else None) for v, m, p in rows
    }


def _file_sql(action: str, root: str) -> str:
    a = f"t.{action}"
    pv = f"{a}.partitionValues"
    if action == "remove":
        # partitionValues are optional in a remove: take the file's add within the range
        pv = (
            f"coalesce({pv}, (SELECT x.add.partitionValues FROM {_ACTIONS} AS x "
            f"WHERE x.add IS NOT NULL AND x.version <= t.version AND x.add.path = {a}.path "
            "ORDER BY x.version DESC LIMIT 1))"
        )
    return (
        f"SELECT version, {key_sql(f'{a}.path', root)} AS path, {a}.size AS size, "
        f"{pv} AS pv, {a}.stats AS stats, {a}.deletionVector AS dv, "
        f"TRY_CAST(json_extract_string({a}.stats, '$.numRecords') AS BIGINT) AS num_records "
        f"FROM {_ACTIONS} AS t WHERE {a} IS NOT NULL AND coalesce({a}.dataChange, true) "
        f"AND version NOT IN (SELECT version FROM {_ACTIONS} WHERE cdc IS NOT NULL)"
    )


def _fill_partition_values(
    storage: Storage, tasks: pa.Table, start: int, metadata: Metadata, protocol: Protocol
) -> pa.Table:
    """Partition values of removes that carry none and whose add is before the range,
    from the live files of version ``start - 1`` (rare: old writers only)."""
    specs = partition_specs(metadata, protocol)
    missing = pc.is_null(tasks.column("pv"))
    if not specs or tasks.num_rows == 0 or not pc.any(missing).as_py():
        return tasks
    files = load_state(storage, start - 1).files if start > 0 else pa.table({"path": []})
    index = {p: i for i, p in enumerate(files.column("path").to_pylist())}
    raws = [
        pc.cast(files.column(f"partition_raw_{k}"), pa.string()).to_pylist()
        for k in range(len(specs))
        if files.num_rows
    ]
    pvs = tasks.column("pv").to_pylist()
    paths = tasks.column("path").to_pylist()
    for j in [int(x or 0) for x in pc.indices_nonzero(missing).to_pylist()]:
        i = index.get(paths[j])
        if i is None:
            raise CorruptLogError(
                storage.join("_delta_log"),
                f"a remove of {paths[j]!r} has no partitionValues and no add of it was found",
            )
        pvs[j] = [
            (key, raws[k][i]) for k, (_, key, _) in enumerate(specs) if raws[k][i] is not None
        ]
    col = tasks.schema.get_field_index("pv")
    return tasks.set_column(col, "pv", python_array(pvs, tasks.schema.field("pv").type))


def _file_actions(con: duckdb.DuckDBPyConnection, root: str) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(singles, pairs, cdc): adds/removes without a partner in their commit (with their
    change type), remove+add pairs of one path in one commit, and change files."""
    adds, removes = _file_sql("add", root), _file_sql("remove", root)
    cols = "version, path, size, pv, stats, dv, num_records"
    singles = con.sql(
        f"WITH a AS ({adds}), r AS ({removes}) "
        f"SELECT {cols}, 'insert' AS change_type FROM a "
        "WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.version = a.version AND r.path = a.path) "
        f"UNION ALL SELECT {cols}, 'delete' AS change_type FROM r "
        "WHERE NOT EXISTS (SELECT 1 FROM a WHERE a.version = r.version AND a.path = r.path)"
    ).to_arrow_table()
    pairs = con.sql(
        f"WITH a AS ({adds}), r AS ({removes}) "
        "SELECT a.version, a.path, a.size, coalesce(a.pv, r.pv) AS pv, a.stats, "
        "a.dv AS add_dv, r.dv AS remove_dv, coalesce(a.num_records, r.num_records) AS num_records "
        "FROM a JOIN r ON a.version = r.version AND a.path = r.path"
    ).to_arrow_table()
    cdc = con.sql(
        f"SELECT version, {key_sql('cdc.path', root)} AS path, cdc.size AS size, "
        f"cdc.partitionValues AS pv FROM {_ACTIONS} WHERE cdc IS NOT NULL"
    ).to_arrow_table()
    return _table(singles), _table(pairs), _table(cdc)


def _check_change_files(
    storage: Storage, singles: pa.Table, pairs: pa.Table, cdc: pa.Table
) -> None:
    """The rule of a snapshot's files (:func:`lakequery.log_segment.check_files`) for the
    files and DVs of the change feed, before any is read."""
    for table, dv in ((singles, "dv"), (pairs, "add_dv"), (pairs, "remove_dv"), (cdc, None)):
        columns = {"path": table.column("path")}
        if dv is not None:
            columns["deletion_vector"] = table.column(dv)
        check_files(storage, pa.table(columns))


def _table(data: Any) -> pa.Table:
    out: pa.Table = data.read_all() if isinstance(data, pa.RecordBatchReader) else data
    return out


# --- row counts and deletion vectors ------------------------------------------------------


def _fill_counts(storage: Storage, table: pa.Table) -> pa.Table:
    """``num_records`` filled from footers where a file with a DV lacks it (Polars needs
    it to build keep masks)."""
    if table.num_rows == 0:
        return table
    counts = table.column("num_records")
    has_dv = pc.greater(dv_cardinalities(table), int64_scalar(0))
    need = pc.and_(pc.is_null(counts), has_dv)
    if not pc.any(need).as_py():
        return table
    idx = [int(i) for i in pc.indices_nonzero(need).to_pylist() if i is not None]
    all_paths = table.column("path").to_pylist()
    paths = [str(all_paths[i]) for i in idx]
    found = dict(zip(idx, footer_row_counts(storage, paths), strict=True))
    values = [found.get(i, v) for i, v in enumerate(counts.to_pylist())]
    col = table.schema.get_field_index("num_records")
    return table.set_column(col, "num_records", python_array(values, pa.int64()))


def _selection_dv(keep: BitMap64, num_rows: int) -> dict[str, Any]:
    """An inline DV that deletes every row of ``[0, num_rows)`` not in ``keep``."""
    hidden = BitMap64()
    hidden.add_range(0, num_rows)
    hidden.difference_update(keep)
    hidden.run_optimize()
    payload = serialize(hidden)
    d = Descriptor("i", z85.encode(payload, pad=True), None, len(payload), len(hidden))
    return d.to_dict() | {"offset": None}


def _refine_pairs(storage: Storage, pairs: pa.Table) -> pa.Table:
    """Rows of remove(path, dv1) + add(path, dv2): deletes are rows in dv2 but not dv1,
    inserts rows in dv1 but not dv2; each becomes a task with a selection DV."""
    if pairs.num_rows == 0:
        return _tasks_from_rows([])
    rows = pairs.to_pylist()  # one per refined file: planning metadata only
    items: list[tuple[str, Descriptor]] = []
    for r in rows:
        for key in ("remove_dv", "add_dv"):
            d = r[key]
            if d and d.get("storageType"):
                items.append((r["path"], Descriptor.from_dict(d)))
    loaded = iter(load_deletion_vectors(storage, storage.root, items))
    missing = [r["path"] for r in rows if r["num_records"] is None]
    counts = dict(zip(missing, footer_row_counts(storage, missing), strict=True))
    out: list[dict[str, Any]] = []
    for r in rows:
        before = next(loaded) if r["remove_dv"] and r["remove_dv"].get("storageType") else None
        after = next(loaded) if r["add_dv"] and r["add_dv"].get("storageType") else None
        old, new = before or BitMap64(), after or BitMap64()
        n = r["num_records"] if r["num_records"] is not None else counts[r["path"]]
        for change, keep in (("delete", new - old), ("insert", old - new)):
            if len(keep):
                out.append(
                    {
                        "version": r["version"],
                        "path": r["path"],
                        "size": r["size"],
                        "pv": r["pv"],
                        "stats": r["stats"],
                        "dv": _selection_dv(keep, int(n)),
                        "num_records": int(n),
                        "change_type": change,
                    }
                )
    return _tasks_from_rows(out)


_TASK_SCHEMA = pa.schema(
    [  # type: ignore[arg-type]
        pa.field("version", pa.int64()),
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("pv", pa.map_(pa.string(), pa.string())),
        pa.field("stats", pa.string()),
        pa.field("dv", _DV_ARROW),
        pa.field("num_records", pa.int64()),
        pa.field("change_type", pa.string()),
    ]
)


def _tasks_from_rows(rows: list[dict[str, Any]]) -> pa.Table:
    for r in rows:
        if isinstance(r["pv"], dict):
            r["pv"] = list(r["pv"].items())
    return pa.Table.from_pylist(rows, schema=_TASK_SCHEMA)


def _conform_tasks(table: pa.Table) -> pa.Table:
    """A DuckDB result cast onto the task schema (columns it lacks, such as the change
    type of change files, are null)."""
    n = table.num_rows
    cols: dict[str, Any] = {}
    for f in _TASK_SCHEMA:
        if f.name in table.column_names:
            cols[f.name] = pc.cast(table.column(f.name), f.type)
        else:
            cols[f.name] = pa.nulls(n, f.type)
    return pa.table(cols, schema=_TASK_SCHEMA)


# --- synthetic snapshots ------------------------------------------------------------------


def _change_metadata(metadata: Metadata, mode: ColumnMappingMode, cdc: bool) -> Metadata:
    """The table's metadata plus the change columns: constants are partition columns;
    for change files ``_change_type`` is a data column stored under its own name."""
    doc = json.loads(metadata.schema_string)
    ids = [int(f.metadata.get("delta.columnMapping.id", 0) or 0) for f in metadata.schema]
    # above every id the table ever assigned (nested and dropped columns included)
    high = int(metadata.configuration.get(MAX_ID_KEY) or 0)
    next_id = max([*ids, high]) + 1
    for name in CHANGE_COLUMNS:
        md: dict[str, Any] = {}
        if mode != "none":
            md = {"delta.columnMapping.id": next_id, "delta.columnMapping.physicalName": name}
            next_id += 1
        doc["fields"].append(
            {"name": name, "type": _CHANGE_DELTA_TYPES[name], "nullable": True, "metadata": md}
        )
    extra = CHANGE_COLUMNS[1:] if cdc else CHANGE_COLUMNS
    return Metadata(
        id=metadata.id,
        schema_string=json.dumps(doc),
        partition_columns=(*metadata.partition_columns, *extra),
        configuration=metadata.configuration,
    )


def _layers(tasks: pa.Table) -> list[pa.Table]:
    """Splits tasks so that no file appears twice in one part (engines key DVs by file)."""
    if tasks.num_rows == 0:
        return []
    if pc.count_distinct(tasks.column("path")).as_py() == tasks.num_rows:
        return [tasks]  # the common case: every file once
    con = private_cursor(fixed_joins=False)  # a window over Arrow data, no join
    try:
        con.register("_lq_cdf_tasks", tasks)
        ranked = _table(
            con.sql(
                "SELECT *, CAST(row_number() OVER (PARTITION BY path ORDER BY version) AS BIGINT) "
                "- 1 AS _layer FROM _lq_cdf_tasks"
            ).to_arrow_table()
        )
    finally:
        con.close()
    layer = ranked.column("_layer")
    count = int(pc.max(layer).as_py()) + 1
    return [
        pc.filter(ranked, pc.equal(layer, int64_scalar(i))).drop_columns(["_layer"])
        for i in range(count)
    ]


def _files_table(
    tasks: pa.Table,
    metadata: Metadata,
    protocol: Protocol,
    times: dict[int, int],
) -> pa.Table:
    """Tasks as rows of ``Snapshot.files()`` (replay's columns, typed partition values)."""
    n = tasks.num_rows
    specs = [
        (name, key, t)
        for name, key, t in partition_specs(metadata, protocol)
        if name not in CHANGE_COLUMNS
    ]
    parts = partition_struct(tasks.column("pv"), specs) if specs else None
    versions = tasks.column("version").combine_chunks()
    first = min(times, default=0)
    by_offset = np.array([times.get(first + i, 0) for i in range(len(times))], dtype=np.int64)
    offsets = int_values(versions).astype(np.int64) - first
    ms = int64_array(by_offset[offsets] if len(offsets) else np.empty(0, np.int64))
    raw: list[Any] = [parts.field(i) for i in range(len(specs))] if parts is not None else []
    extra = [c for c in metadata.partition_columns if c in CHANGE_COLUMNS]
    for name in extra:
        if name == CHANGE_TYPE:
            raw.append(tasks.column("change_type").combine_chunks())
        elif name == COMMIT_VERSION:
            raw.append(versions)
        else:
            us = pc.multiply(ms, int64_scalar(1000))
            raw.append(pc.cast(us, pa.timestamp("us", tz="UTC")))
    cols: dict[str, Any] = {
        "path": tasks.column("path"),
        "size": tasks.column("size"),
        "modification_time": pa.nulls(n, pa.int64()),
        "num_records": tasks.column("num_records"),
        "stats": tasks.column("stats"),
        "deletion_vector": tasks.column("dv"),
        "base_row_id": pa.nulls(n, pa.int64()),
        "default_row_commit_version": pa.nulls(n, pa.int64()),
        "tags": pa.nulls(n, pa.map_(pa.string(), pa.string())),
        "clustering_provider": pa.nulls(n, pa.string()),
    }
    for i, arr in enumerate(raw):
        cols[f"partition_raw_{i}"] = arr
    return pa.table(cols)


# --- the public object --------------------------------------------------------------------


class ChangeScan:
    """The planned change feed of a range of versions; read it like a
    :class:`~lakequery.scan.Scan`.

    Rows come in no particular order (sort by ``_commit_version`` when order matters).

    Attributes:
        starting_version: first version of the range.
        ending_version: last version of the range (inclusive).
        columns: the output columns, in order.
        scans: the underlying scans (one per group of files read together).
    """

    def __init__(self, start: int, end: int, scans: list[Scan], columns: list[str]) -> None:
        self.starting_version = start
        self.ending_version = end
        self.scans = scans
        self.columns = columns

    def __repr__(self) -> str:
        from lakequery.display import column_list

        return (
            f"ChangeScan(versions={self.starting_version}..{self.ending_version}, "
            f"columns={column_list(self.columns)})"
        )

    def _repr_html_(self) -> str:
        """Jupyter's view: version range, files to read, output schema."""
        from lakequery.display.html import change_scan_html

        return change_scan_html(self)

    @property
    def output_schema(self) -> pa.Schema:
        """The Arrow schema of the rows (table columns, then the change columns)."""
        return self.scans[0].output_schema

    @property
    def num_files(self) -> int:
        """How many data or change files the feed reads (after pruning by the filter)."""
        return sum(s.plan().num_files for s in self.scans)

    def to_arrow_reader(self, *, progress: ProgressCallback | None = None) -> pa.RecordBatchReader:
        """Streams the changes as Arrow record batches, one underlying scan at a time.

        Args:
            progress: a callback receiving :class:`~lakequery.commands.progress.Progress`
                (files and bytes read) after each file group; without one, a bar is drawn
                on a terminal or in Jupyter when the read takes a while.
        """
        from lakequery.commands.progress import ProgressReporter

        schema = self.output_schema
        plans = [s.plan() for s in self.scans]
        size = sum(int(pc.sum(p.files.column("size")).as_py() or 0) for p in plans if p.num_files)

        def batches() -> Iterator[pa.RecordBatch]:
            files = sum(p.num_files for p in plans)
            with ProgressReporter("CHANGES", files, size, callback=progress) as reporter:
                for scan, plan in zip(self.scans, plans, strict=True):
                    if plan.num_files:
                        for batch in scan.to_arrow_reader():
                            yield (
                                batch if batch.schema == schema else pc.cast_columns(batch, schema)
                            )
                        done = int(pc.sum(plan.files.column("size")).as_py() or 0)
                        reporter.advance(plan.num_files, done)

        return pa.RecordBatchReader.from_batches(schema, batches())

    def to_arrow(self) -> pa.Table:
        """Reads the changes into one Arrow table."""
        return self.to_arrow_reader().read_all()

    def to_pandas(self, **kwargs: Any) -> pd.DataFrame:
        """Reads the changes into a pandas DataFrame (``kwargs`` go to
        ``pyarrow.Table.to_pandas``)."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_duckdb(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """A lazy DuckDB relation: the scans' relations combined with ``UNION ALL``.

        Args:
            con: the connection to build the relation on (when None, a new cursor of
                lakequery's engine database, :mod:`lakequery.duckdb_databases`).
        """
        if con is None:
            from lakequery.duckdb_databases import engine_cursor

            con = engine_cursor()
        live = [s for s in self.scans if s.plan().num_files] or self.scans[:1]
        rels = [s.to_duckdb(con) for s in live]
        out = rels[0]
        for rel in rels[1:]:
            out = out.union(rel)
        return out

    def to_polars(self) -> pl.LazyFrame:
        """A Polars LazyFrame concatenating the scans' frames."""
        import polars as pl

        live = [s for s in self.scans if s.plan().num_files] or self.scans[:1]
        frames = [s.to_polars() for s in live]
        return pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]


def _resolve_columns(uri: str, metadata: Metadata, columns: Sequence[str] | None) -> list[str]:
    """Output columns: the requested ones (matched case-insensitively) with the change
    columns appended unless named; all table columns then the change columns by default."""
    table_cols = [f.name for f in metadata.schema]
    if columns is None:
        return [*table_cols, *CHANGE_COLUMNS]
    if isinstance(columns, str):
        raise TypeError("columns must be a sequence of names, not a string")
    known = {c.lower(): c for c in [*table_cols, *CHANGE_COLUMNS]}
    out = []
    for c in columns:
        name = known.get(c.lower()) if c not in known.values() else c
        if name is None:
            raise PredicateError(c, f"no column {c!r} in the change feed of {uri!r}", kind="column")
        if name in out:
            raise PredicateError(c, "listed twice in columns", kind="column")
        out.append(name)
    return out + [c for c in CHANGE_COLUMNS if c not in out]


def changes(
    dt: DeltaTable,
    *,
    starting_version: int | None = None,
    ending_version: int | None = None,
    starting_timestamp: datetime | str | None = None,
    ending_timestamp: datetime | str | None = None,
    columns: Sequence[str] | None = None,
    filter: str | Expression | None = None,
) -> ChangeScan:
    """Plans the change feed of ``dt`` over a version range; see
    :meth:`lakequery.DeltaTable.changes` for the arguments."""
    rng = _resolve_range(dt, starting_version, ending_version, starting_timestamp, ending_timestamp)
    storage = dt.storage
    start_state = load_state(storage, rng.start, with_files=False)
    con = replay_cursor(None, rng.commits)  # the commits become a table: see replay_cursor
    try:
        _load_actions(con, storage, rng.commits)
        meta_changes = _metadata_changes(con)
        metadata, protocol = _check_versions(dt.uri, rng, start_state, meta_changes)
        singles, pairs, cdc = _file_actions(con, storage.root)
    finally:
        con.close()
    _check_change_files(storage, singles, pairs, cdc)
    out_columns = _resolve_columns(dt.uri, metadata, columns)
    times = {c.version: t for c, t in zip(rng.commits, rng.times_ms, strict=True)}
    data_tasks = pa.concat_tables([_conform_tasks(singles), _refine_pairs(storage, pairs)])
    data_tasks = _fill_partition_values(storage, data_tasks, rng.start, metadata, protocol)
    cdc_tasks = _conform_tasks(cdc)
    mode = column_mapping_of(metadata, protocol)
    scans: list[Scan] = []
    for tasks, is_cdc in ((data_tasks, False), (cdc_tasks, True)):
        meta = _change_metadata(metadata, mode, is_cdc)
        for layer in _layers(tasks):
            files = _fill_counts(storage, _files_table(layer, meta, protocol, times))
            scans.append(_scan(storage, rng.end, protocol, meta, files, out_columns, filter))
    if not scans:
        meta = _change_metadata(metadata, mode, False)
        empty = _files_table(_conform_tasks(singles.slice(0, 0)), meta, protocol, times)
        scans.append(_scan(storage, rng.end, protocol, meta, empty, out_columns, filter))
    return ChangeScan(rng.start, rng.end, scans, out_columns)


def staged_scan(
    storage: Storage,
    version: int,
    metadata: Metadata,
    protocol: Protocol,
    adds: Sequence[Mapping[str, Any]],
) -> Scan:
    """The rows of ``add`` actions not committed yet (a write's new files), as a scan:
    what a commit that must also write change data files reads back as its inserts."""
    from urllib.parse import unquote

    rows = [
        {
            "version": version,
            "path": unquote(str(a["path"])),  # the canonical key: decoded, relative
            "size": a.get("size"),
            "pv": dict(a.get("partitionValues") or {}),
            "stats": a.get("stats"),
            "dv": None,
            "num_records": None,
            "change_type": None,
        }
        for a in adds  # one per new file
    ]
    files = _files_table(_tasks_from_rows(rows), metadata, protocol, {version: 0})
    columns = [f.name for f in metadata.schema]
    return _scan(storage, version, protocol, metadata, files, columns, None)


def inserts_scan(
    storage: Storage,
    snapshot: Snapshot,
    files: pa.Table,
    columns: Sequence[str] | None,
    filter: str | Expression | None,
) -> Scan:
    """Live ``files`` of ``snapshot`` read as a change feed: every row an insert at the
    snapshot's version and time (what a change-feed stream without a starting version
    delivers first). The change columns are constants of the files, as in
    :func:`changes`, so ``columns`` and ``filter`` may name them."""
    metadata, protocol = snapshot.metadata, snapshot.protocol
    meta = _change_metadata(metadata, column_mapping_of(metadata, protocol), False)
    first = len(partition_specs(metadata, protocol))  # the table's own partition_raw_<i>
    values = (
        pa.scalar("insert", pa.string()),
        pa.scalar(snapshot.version, pa.int64()),
        pa.scalar(snapshot.timestamp, pa.timestamp("us", tz="UTC")),
    )
    repeat: Any = pa.repeat  # (its stubs list one overload per scalar type)
    for i, value in enumerate(values):
        files = files.append_column(f"partition_raw_{first + i}", repeat(value, files.num_rows))
    out_columns = _resolve_columns(storage.root, metadata, columns)
    return _scan(
        storage, snapshot.version, protocol, meta, _fill_counts(storage, files), out_columns, filter
    )


def _scan(
    storage: Storage,
    version: int,
    protocol: Protocol,
    metadata: Metadata,
    files: pa.Table,
    columns: list[str],
    filter: str | Expression | None,
) -> Scan:
    state = TableState(
        version=version,
        protocol=protocol,
        metadata=metadata,
        files=files,
        txns={},
        domains={},
        segment=None,  # type: ignore[arg-type]  # synthetic: no log segment behind it
    )
    return Snapshot(storage, state).scan(columns=columns, filter=filter)


__all__ = [
    "CHANGE_COLUMNS",
    "ChangeScan",
    "cdf_enabled",
    "changes",
    "non_additive_change",
]
