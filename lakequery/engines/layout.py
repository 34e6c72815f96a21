"""What every engine needs to know about the columns and files of a scan.

The engines differ only in how they read Parquet; which physical column feeds which
logical column, which columns are per-file constants (partition values) and which files
share them is decided here, once.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from lakequery.errors import ObjectNotFoundError
from lakequery.protocol.column_mapping import physical_name_map
from lakequery.protocol.schema import DeltaType

if TYPE_CHECKING:
    from lakequery.scan import Scan, ScanPlan


@dataclass(frozen=True)
class ColumnSpec:
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


@dataclass(frozen=True)
class FileGroup:
    """Files that share one tuple of partition values."""

    values: dict[str, Any]  # logical partition column -> Python value
    locations: list[str]


def file_groups(plan: ScanPlan, partition_names: Sequence[str]) -> list[FileGroup]:
    """Groups the plan's files by the partition values of ``partition_names``."""
    locations = plan.locations
    if not partition_names or plan.num_files == 0:
        return [FileGroup({}, plan.location_list)] if plan.num_files else []
    parts = plan.files.column("partition_values").combine_chunks()
    cols = {f"p{i}": pc.struct_field(parts, n) for i, n in enumerate(partition_names)}
    table = pa.table({**cols, "loc": locations})
    keys = list(cols)
    # group_by cannot key on every type (e.g. binary is fine, decimals fine); nulls are a group
    grouped = table.group_by(keys, use_threads=False).aggregate([("loc", "list")])
    out = []
    for row in grouped.to_pylist():
        values = {n: row[f"p{i}"] for i, n in enumerate(partition_names)}
        out.append(FileGroup(values, [str(x) for x in row["loc_list"]]))
    return out


def require_local_files(scan: Scan) -> None:
    """Raises ObjectNotFoundError for the first planned file missing on a local disk.

    Engines that open files only when the user collects (Polars) call this so that a
    vacuumed version fails with lakequery's error; on object stores the check would cost a
    request per file and is left to the engine's own error.
    """
    storage = scan.snapshot.storage
    if storage.protocol != "file":
        return
    for loc in scan.plan().location_list:
        if not os.path.exists(loc):
            raise ObjectNotFoundError(loc, "read data file")


#: Partition value texts that every engine's Hive path parser reads back unchanged.
_HIVE_SAFE = re.compile(r"^[A-Za-z0-9_.+-]+$")


def _hive_type_ok(typ: pa.DataType) -> bool:
    t = pa.types
    return bool(t.is_string(typ) or t.is_integer(typ) or t.is_date32(typ) or t.is_boolean(typ))


def _hive_text(value: Any, typ: pa.DataType) -> str | None:
    if value is None or not _hive_type_ok(typ):
        return None
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, dt.date):
        text = value.isoformat()
    else:
        text = str(value)
    return text if _HIVE_SAFE.match(text) else None


def hive_layout(scan: Scan, groups: Sequence[FileGroup] | None = None) -> bool:
    """True when every planned file sits in ``col=value/...`` directories (partition columns
    in order) that spell exactly its partition values from the log, so an engine's Hive
    reader yields the same values as the literals would — checked, never assumed (digest
    §2.1: the log is the truth). Only plain values qualify (no nulls, nothing escaped).

    One pass over the plan's files in plain Python (string operations per file; no
    grouping needed): ``groups`` is accepted for callers that have them and not used."""
    del groups
    snap = scan.snapshot
    names = snap.partition_columns
    plan = scan.plan()
    if not names or plan.num_files == 0:
        return False
    types = {f.name: f.type for f in snap.schema}
    parts = cast(pa.StructArray, plan.files.column("partition_values").combine_chunks())
    columns = []
    for n in names:
        typ = types[n]
        if not _hive_type_ok(typ):
            return False
        # StructArray.field: no compute options (whose first use imports pandas, ~0.25 s)
        values = parts.field(n) if parts.null_count == 0 else pc.struct_field(parts, n)
        if values.null_count:
            return False
        texts = [_hive_text(v, typ) for v in values.to_pylist()]
        if any(t is None for t in texts):
            return False  # a value that does not spell plainly
        columns.append([f"{n}={t}" for t in texts])
    root = snap.storage.root + "/"
    for location, *dirs in zip(plan.location_list, *columns, strict=True):
        prefix = root + "/".join(dirs) + "/"
        if not location.startswith(prefix) or "=" in location[len(prefix) :]:
            return False
    return True
