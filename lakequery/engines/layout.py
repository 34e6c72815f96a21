"""What every engine needs to know about the columns and files of a scan.

The engines differ only in how they read Parquet; which physical column feeds which
logical column, which columns are per-file constants (partition values) and which files
share them is decided here, once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.errors import ObjectNotFoundError
from lakequery.protocol.column_mapping import physical_name_map
from lakequery.protocol.schema import DeltaType

if TYPE_CHECKING:
    from lakequery.scan import Scan, ScanPlan


class ColumnSpec(NamedTuple):
    """One logical top-level column of a scan."""

    name: str  # logical name
    type: pa.DataType  # logical Arrow type
    partition: bool  # value comes from the file's partition values
    physical: str  # top-level name in the Parquet files
    delta_type: DeltaType  # the Delta type (for nested relabelling)


def column_specs(scan: Scan, names: Sequence[str] | None = None) -> list[ColumnSpec]:
    """Specs for ``names`` (default: the columns the scan must read)."""
    snap = scan.snapshot
    schema = snap.schema
    parts = set(snap.partition_columns)
    mapping = physical_name_map(snap.metadata.schema, snap.column_mapping_mode)
    out = []
    for name in names if names is not None else scan.read_columns:
        field = schema.field(name)
        physical = mapping.get((name,), (name,))[0]
        delta = snap.metadata.schema[name].type
        out.append(ColumnSpec(name, field.type, name in parts, physical, delta))
    return out


#: Above this many partition-value groups an engine reads the files in one scan and joins
#: each row with its file's partition values, instead of one constant-folded scan per
#: group: a scan costs each engine a fixed few milliseconds to plan (DuckDB: a
#: ``read_parquet`` bind; Polars: a ``scan_parquet`` source), the join a hash probe per row.
MAX_UNION_GROUPS = 64


class FileGroup(NamedTuple):
    """Files that share one tuple of partition values."""

    values: dict[str, Any]  # logical partition column -> Python value
    locations: list[str]


def file_groups(plan: ScanPlan, partition_names: Sequence[str]) -> list[FileGroup]:
    """Groups the plan's files by the partition values of ``partition_names``."""
    if not partition_names or plan.num_files == 0:
        return [FileGroup({}, plan.location_list)] if plan.num_files else []
    from lakequery.row_grouping import group_rows  # partitioned scans only

    parts = plan.files.column("partition_values").combine_chunks()
    # nulls are a group of their own (see lakequery.row_grouping)
    groups = group_rows([pc.struct_field(parts, n) for n in partition_names])
    locations = plan.location_list
    out = []
    for g in range(groups.num_groups):
        values = {n: groups.value(c, g).as_py() for c, n in enumerate(partition_names)}
        out.append(FileGroup(values, [locations[i] for i in groups.rows(g).tolist()]))
    return out


#: Hashes of the long file lists found on the local disk in this process.
_FOUND: dict[int, None] = {}
_FOUND_MAX = 4096
STAT_EVERY_BUILD = 1024


def require_local_files(
    scan: Scan, locations: Sequence[str] | None = None, *, always: bool = False
) -> None:
    """Raises ObjectNotFoundError for the first of ``locations`` (default: every planned
    file) missing on a local disk.

    Engines that open files only when the query runs (Polars, DuckDB for the files whose
    footers it has not read) call this so that a vacuumed version fails with lakequery's
    error; on object stores the check would cost a request per file and is left to the
    engine's own error. A stat costs ~3-4 us a file (0.6 s for 200,000) and data files are
    immutable, so a list longer than :data:`STAT_EVERY_BUILD` is stat'ed once in the
    process, and not at all when the snapshot's load found every live file on its way
    (``TableState.files_found``); a file removed after that (VACUUM) surfaces as the
    engine's own error when the query runs, as on object stores. Shorter lists, and every
    list with ``always`` (naming the file behind an engine's error), are stat'ed each time.
    """
    storage = scan.snapshot.storage
    if storage.protocol != "file":
        return
    locs = scan.plan().location_list if locations is None else locations
    key = None
    if not always and len(locs) > STAT_EVERY_BUILD:
        if scan.snapshot._state.files_found:
            return
        key = hash((storage.root, tuple(locs)))
        if key in _FOUND:
            return
    for loc in locs:
        if not os.path.exists(loc):
            raise ObjectNotFoundError(loc, "read data file")
    if key is not None:
        if len(_FOUND) >= _FOUND_MAX:
            _FOUND.pop(next(iter(_FOUND)))
        _FOUND[key] = None


#: Partition value texts that every engine's Hive path parser reads back unchanged.
_HIVE_SAFE = "^[A-Za-z0-9_.+-]+$"


def _hive_type_ok(typ: pa.DataType) -> bool:
    t = pa.types
    return bool(t.is_string(typ) or t.is_integer(typ) or t.is_date32(typ) or t.is_boolean(typ))


def hive_layout(scan: Scan) -> bool:
    """True when every planned file sits in ``col=value/...`` directories (partition columns
    in order) that spell exactly its partition values from the log, so an engine's Hive
    reader yields the same values as the literals would — checked, never assumed (digest
    §2.1: the log is the truth). Only plain values qualify (no nulls, nothing escaped).

    Vectorised over the plan's files: each value's text (Arrow's cast: decimal integers,
    ISO dates, ``true``/``false``) against the directory names one regular expression
    extracts from each location; engines ask before grouping the files by their values,
    which a Hive read does not need (10,000 groups cost ~0.06 s)."""
    snap = scan.snapshot
    names = snap.partition_columns
    plan = scan.plan()
    if not names or plan.num_files == 0:
        return False
    from lakequery.protocol.partitions import HIVE_NULL  # partitioned tables only

    types = {f.name: f.type for f in snap.schema}
    parts = cast(pa.StructArray, plan.files.column("partition_values").combine_chunks())
    texts = []
    for n in names:
        typ = types[n]
        if not _hive_type_ok(typ):
            return False
        # StructArray.field: no compute options
        values = parts.field(n) if parts.null_count == 0 else pc.struct_field(parts, n)
        if values.null_count:
            return False
        text = values if pa.types.is_string(typ) else pc.cast(values, pa.string())
        if not _all(pc.match_substring_regex(text, _HIVE_SAFE)):
            return False  # a value that does not spell plainly
        if pc.any(pc.match_substring(text, HIVE_NULL)).as_py():
            return False  # the string itself: a Hive reader takes its directory for NULL
        texts.append(text)
    pattern = f"^{re2_literal(snap.storage.root + '/')}{hive_directories(names)}/[^=]*$"
    found = pc.extract_regex(plan.locations, pattern)
    if found.null_count:
        return False  # elsewhere, or a directory named col=value below the partitions
    return all(_all(pc.equal(found.field(i), text)) for i, text in enumerate(texts))


def hive_directories(names: Sequence[str]) -> str:
    """The RE2 pattern of the ``col=value`` directories of ``names`` in order, whose
    ``i``-th group (1-based, named ``v<i-1>``) captures the ``i``-th column's value."""
    return "/".join(f"{re2_literal(n)}=(?P<v{i}>[^/]*)" for i, n in enumerate(names))


def hive_file_pattern(names: Sequence[str]) -> str:
    """The RE2 pattern of the end of a path that :func:`hive_layout` accepted (the
    directories of ``names``, then a file name or plain subdirectories with no ``=``),
    wherever its root sits and however a reader spells the root."""
    return f"/{hive_directories(names)}/[^=]*$"


def re2_literal(text: str) -> str:
    """``text`` as a RE2 pattern matching itself: RE2's metacharacters escaped, nothing
    else (the one spelling of names and roots in the patterns lakequery builds)."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in text)


_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def _all(flags: pa.Array[Any] | pa.ChunkedArray[Any]) -> bool:
    return bool(pc.all(flags).as_py())
