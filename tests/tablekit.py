"""A tiny hand-written Delta table builder for tests (no lakequery code involved).

It writes what the protocol digest describes, independently of the library under test:

* commits: NDJSON lines of ``protocol`` / ``metaData`` / ``add`` / ``remove`` / ``txn`` /
  ``domainMetadata`` / ``commitInfo`` actions (digest §4), optionally with a chosen file
  modification time (``os.utime``) to control commit timestamps (§16);
* Parquet data files through pyarrow, with Hive-style partition directories (§9.2), the
  URI-encoded ``add.path`` (§9.3) and JSON statistics (§10);
* on-disk deletion vectors (§11.5, §11.6: RoaringBitmapArray in the portable layout,
  ``u`` storage type with a Z85-encoded UUID);
* classic and multi-part V1 checkpoints following §7.3, from this module's own replay of
  the JSON commits (:func:`replay`), and ``_last_checkpoint`` with the §2.5 checksum.

Example:
    >>> import tempfile, pyarrow as pa
    >>> kit = TableKit(tempfile.mkdtemp())
    >>> kit.create(pa.schema([("id", pa.int64())]))
    0
    >>> kit.commit([kit.write_parquet(pa.table({"id": [1, 2]}))])
    1
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap

LOG_DIR = "_delta_log"
CONFORMANCE_ENV = "LAKEQUERY_CONFORMANCE_DIR"


def conformance_dir() -> Path:
    """The shared conformance set: ``$LAKEQUERY_CONFORMANCE_DIR`` or
    ``<repo>/../shared/conformance`` (CI clones the repo beside ``shared/``)."""
    override = os.environ.get(CONFORMANCE_ENV)
    base = (
        Path(override).expanduser()
        if override
        else Path(__file__).resolve().parents[1].parent / "shared" / "conformance"
    )
    return base.resolve()


def conformance_table(name: str) -> Path:
    """A real Delta table of the shared conformance set."""
    return conformance_dir() / "tables" / name


HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

# --------------------------------------------------------------------------------------------
# schema and actions
# --------------------------------------------------------------------------------------------


def delta_type(t: pa.DataType) -> str:
    """The Delta primitive type name of an Arrow type (digest §8.1)."""
    simple = {
        pa.int8(): "byte",
        pa.int16(): "short",
        pa.int32(): "integer",
        pa.int64(): "long",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.string(): "string",
        pa.large_string(): "string",
        pa.binary(): "binary",
        pa.date32(): "date",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t) and t.tz is not None:
        return "timestamp"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    raise ValueError(f"no Delta type for {t}")


def schema_string(schema: pa.Schema) -> str:
    fields = [
        {"name": f.name, "type": delta_type(f.type), "nullable": f.nullable, "metadata": {}}
        for f in schema
    ]
    return json.dumps({"type": "struct", "fields": fields})


def protocol_action(
    min_reader: int = 1,
    min_writer: int = 2,
    reader_features: Sequence[str] | None = None,
    writer_features: Sequence[str] | None = None,
) -> dict[str, Any]:
    p: dict[str, Any] = {"minReaderVersion": min_reader, "minWriterVersion": min_writer}
    if reader_features is not None:
        p["readerFeatures"] = list(reader_features)
    if writer_features is not None:
        p["writerFeatures"] = list(writer_features)
    return {"protocol": p}


def dv_protocol() -> dict[str, Any]:
    """Reader 3 / writer 7 with the deletionVectors feature."""
    return protocol_action(3, 7, ["deletionVectors"], ["deletionVectors"])


def metadata_action(
    schema: pa.Schema,
    partition_by: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    table_id: str | None = None,
) -> dict[str, Any]:
    return {
        "metaData": {
            "id": table_id or str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string(schema),
            "partitionColumns": list(partition_by),
            "configuration": dict(configuration or {}),
            "createdTime": 1_700_000_000_000,
        }
    }


def txn_action(app_id: str, version: int, last_updated: int | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"appId": app_id, "version": version}
    if last_updated is not None:
        t["lastUpdated"] = last_updated
    return {"txn": t}


def domain_action(domain: str, configuration: str, removed: bool = False) -> dict[str, Any]:
    return {
        "domainMetadata": {"domain": domain, "configuration": configuration, "removed": removed}
    }


def now_ms() -> int:
    return int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)


def remove_action(
    add: Mapping[str, Any],
    *,
    deletion_timestamp: int | None = None,
    path: str | None = None,
) -> dict[str, Any]:
    """An extended ``remove`` of the logical file an ``add`` action (or its body) made live."""
    body = add.get("add", add)
    r: dict[str, Any] = {
        "path": path if path is not None else body["path"],
        "deletionTimestamp": now_ms() if deletion_timestamp is None else deletion_timestamp,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": dict(body.get("partitionValues") or {}),
        "size": body.get("size"),
    }
    if body.get("deletionVector") is not None:
        r["deletionVector"] = dict(body["deletionVector"])
    return {"remove": r}


def with_dv(add: Mapping[str, Any], dv: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of an ``add`` action carrying deletion vector ``dv`` (None: none)."""
    body = dict(add.get("add", add))
    body.pop("deletionVector", None)
    if dv is not None:
        body["deletionVector"] = dict(dv)
    return {"add": body}


def commit_info(
    operation: str = "WRITE",
    *,
    timestamp: int | None = None,
    parameters: Mapping[str, Any] | None = None,
    metrics: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "timestamp": now_ms() if timestamp is None else timestamp,
        "operation": operation,
        "operationParameters": {
            k: v if isinstance(v, str) else json.dumps(v) for k, v in (parameters or {}).items()
        },
        "engineInfo": "tablekit",
    }
    if metrics is not None:
        info["operationMetrics"] = dict(metrics)
    info.update(extra)
    return {"commitInfo": info}


# --------------------------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------------------------

_HIVE_ESCAPE = set(range(0x01, 0x20)) | {ord(c) for c in "\"#%'*/:=?\\{[]^"} | {0x7F}
_URI_ESCAPE = set(range(0x00, 0x20)) | {ord(c) for c in '%" #<>?[\\]^`{|}'} | {0x7F}


def hive_escape(text: str) -> str:
    """Directory-name escaping of a partition value (digest §9.2)."""
    return "".join(f"%{ord(c):02X}" if ord(c) in _HIVE_ESCAPE else c for c in text)


def uri_encode(path: str) -> str:
    """The second, URI-level encoding applied to ``add.path`` (digest §9.3)."""
    return "".join(f"%{ord(c):02X}" if ord(c) in _URI_ESCAPE else c for c in path)


def partition_string(value: Any) -> str | None:
    """The ``partitionValues`` form of a Python value (digest §9.1)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------


def _stat_value(v: Any) -> Any:
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def file_stats(data: pa.Table) -> dict[str, Any]:
    """``numRecords``, ``minValues``, ``maxValues`` and ``nullCount`` of a data table."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in data.column_names:
        col = data.column(name)
        nulls[name] = col.null_count
        t = col.type
        summable = (
            pa.types.is_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_string(t)
            or pa.types.is_date(t)
        )
        if summable and col.null_count < len(col):
            mm = pc.min_max(col)
            mins[name] = _stat_value(mm["min"].as_py())
            maxs[name] = _stat_value(mm["max"].as_py())
    return {
        "numRecords": data.num_rows,
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
    }


# --------------------------------------------------------------------------------------------
# deletion vectors
# --------------------------------------------------------------------------------------------

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_encode(data: bytes) -> str:
    assert len(data) % 4 == 0
    out = []
    for i in range(0, len(data), 4):
        (word,) = struct.unpack(">I", data[i : i + 4])
        chars = []
        for _ in range(5):
            chars.append(_Z85[word % 85])
            word //= 85
        out.append("".join(reversed(chars)))
    return "".join(out)


def dv_payload(rows: Iterable[int]) -> bytes:
    """RoaringBitmapArray, portable layout (digest §11.6): magic, bucket count, buckets."""
    buckets: dict[int, list[int]] = {}
    for r in sorted(set(rows)):
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    out = [struct.pack("<I", 1681511377), struct.pack("<q", len(buckets))]
    for key in sorted(buckets):
        out.append(struct.pack("<I", key))
        out.append(BitMap(buckets[key]).serialize())
    return b"".join(out)


# --------------------------------------------------------------------------------------------
# checkpoints (digest §7.3)
# --------------------------------------------------------------------------------------------

STR_MAP = pa.map_(pa.string(), pa.string())
DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        (
            "txn",
            pa.struct(
                [("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())]
            ),
        ),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", STR_MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("stats", pa.string()),
                    ("tags", STR_MAP),
                    ("deletionVector", DV_TYPE),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                    ("clusteringProvider", pa.string()),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("extendedFileMetadata", pa.bool_()),
                    ("partitionValues", STR_MAP),
                    ("size", pa.int64()),
                    ("deletionVector", DV_TYPE),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", STR_MAP)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", STR_MAP),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
        (
            "domainMetadata",
            pa.struct(
                [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
            ),
        ),
    ]
)


def _to_arrow_value(value: Any, t: pa.DataType) -> Any:
    """Shapes a JSON action value for ``pa.array`` of type ``t`` (maps as item lists)."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return [(str(k), v) for k, v in value.items()]
    if pa.types.is_struct(t):
        return {
            t.field(i).name: _to_arrow_value(value.get(t.field(i).name), t.field(i).type)
            for i in range(t.num_fields)
        }
    return value


def checkpoint_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """One Parquet row per action; exactly one non-null struct column per row."""
    columns = {}
    for f in CHECKPOINT_SCHEMA:
        values = [_to_arrow_value(r.get(f.name), f.type) for r in rows]
        columns[f.name] = pa.array(values, type=f.type)
    return pa.table(columns, schema=CHECKPOINT_SCHEMA)


def _leaf_encode(text: str) -> str:
    safe = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    return "".join(chr(b) if b in safe else f"%{b:02X}" for b in text.encode("utf-8"))


def last_checkpoint_checksum(doc: Mapping[str, Any]) -> str:
    """The §2.5 checksum: sorted ``path=value`` leaves, joined by ``,``, MD5."""
    leaves: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                step = '"' + _leaf_encode(k) + '"'
                walk(v, f"{path}+{step}" if path else step)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}+{i}" if path else str(i))
        else:
            if value is True:
                text = "true"
            elif value is False:
                text = "false"
            elif value is None:
                text = "null"
            elif isinstance(value, str):
                text = '"' + _leaf_encode(value) + '"'
            else:
                text = json.dumps(value)
            leaves.append(f"{path}={text}")

    walk({k: v for k, v in doc.items() if k != "checksum"}, "")
    canonical = ",".join(sorted(leaves, key=lambda s: s.encode("utf-8")))
    return hashlib.md5(canonical.encode("utf-8"), usedforsecurity=False).hexdigest()


# --------------------------------------------------------------------------------------------
# an independent replay of the JSON commits (digest §6), used to write checkpoints
# --------------------------------------------------------------------------------------------


def dv_id(dv: Mapping[str, Any] | None) -> str | None:
    if not dv:
        return None
    base = str(dv["storageType"]) + str(dv["pathOrInlineDv"])
    return base if dv.get("offset") is None else f"{base}@{dv['offset']}"


@dataclass
class LogState:
    """The reconciled state at one version."""

    version: int
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    adds: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    tombstones: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    txns: dict[str, dict[str, Any]] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)

    def live_domains(self) -> dict[str, str]:
        return {k: v["configuration"] for k, v in self.domains.items() if not v.get("removed")}


def read_actions(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def replay(root: Path, version: int) -> LogState:
    """Replays ``0.json … version.json`` in ascending order (all must exist)."""
    state = LogState(version)
    for v in range(version + 1):
        for action in read_actions(root / LOG_DIR / f"{v:020d}.json"):
            if "protocol" in action:
                state.protocol = action["protocol"]
            elif "metaData" in action:
                state.metadata = action["metaData"]
            elif "txn" in action:
                state.txns[action["txn"]["appId"]] = action["txn"]
            elif "domainMetadata" in action:
                state.domains[action["domainMetadata"]["domain"]] = action["domainMetadata"]
            elif "add" in action:
                a = action["add"]
                key = (unquote(a["path"]), dv_id(a.get("deletionVector")))
                state.adds[key] = a
                state.tombstones.pop(key, None)
            elif "remove" in action:
                r = action["remove"]
                key = (unquote(r["path"]), dv_id(r.get("deletionVector")))
                state.adds.pop(key, None)
                state.tombstones[key] = r
    return state


# --------------------------------------------------------------------------------------------
# the builder
# --------------------------------------------------------------------------------------------


class TableKit:
    """Writes one Delta table under ``root`` by hand."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.log.mkdir(parents=True, exist_ok=True)
        self.partition_by: tuple[str, ...] = ()

    @property
    def uri(self) -> str:
        return str(self.root)

    @property
    def log(self) -> Path:
        return self.root / LOG_DIR

    def commit_path(self, version: int) -> Path:
        return self.log / f"{version:020d}.json"

    def checkpoint_path(
        self, version: int, part: int | None = None, parts: int | None = None
    ) -> Path:
        if part is None:
            return self.log / f"{version:020d}.checkpoint.parquet"
        return self.log / f"{version:020d}.checkpoint.{part:010d}.{parts:010d}.parquet"

    def versions(self) -> list[int]:
        out = []
        for p in self.log.iterdir():
            name = p.name
            if len(name) == 25 and name.endswith(".json") and name[:20].isdigit():
                out.append(int(name[:20]))
        return sorted(out)

    def next_version(self) -> int:
        vs = self.versions()
        return vs[-1] + 1 if vs else 0

    # -- commits ------------------------------------------------------------------------------
    def create(
        self,
        schema: pa.Schema,
        *,
        partition_by: Sequence[str] = (),
        configuration: Mapping[str, str] | None = None,
        protocol: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
        actions: Sequence[Mapping[str, Any]] = (),
        mtime_ms: int | None = None,
    ) -> int:
        """Writes commit 0 with protocol, metaData and any extra actions."""
        self.partition_by = tuple(partition_by)
        first = [
            dict(protocol or protocol_action()),
            metadata_action(schema, partition_by, configuration),
            *actions,
        ]
        return self.commit(
            first,
            info=info if info is not None else commit_info("CREATE TABLE"),
            mtime_ms=mtime_ms,
        )

    def commit(
        self,
        actions: Sequence[Mapping[str, Any]],
        *,
        info: Mapping[str, Any] | None = None,
        version: int | None = None,
        mtime_ms: int | None = None,
    ) -> int:
        """Writes the next commit (``info`` first when given); returns its version."""
        v = self.next_version() if version is None else version
        lines = [json.dumps(a) for a in ([info] if info is not None else []) + list(actions)]
        return self.write_commit_text(v, "\n".join(lines) + "\n", mtime_ms=mtime_ms)

    def write_commit_text(self, version: int, text: str, *, mtime_ms: int | None = None) -> int:
        path = self.commit_path(version)
        path.write_text(text)
        if mtime_ms is not None:
            self.set_mtime(version, mtime_ms)
        return version

    def set_mtime(self, version: int, mtime_ms: int) -> None:
        """Sets the commit file's modification time (and so its commit timestamp, §16)."""
        ns = mtime_ms * 1_000_000
        os.utime(self.commit_path(version), ns=(ns, ns))

    # -- data files ---------------------------------------------------------------------------
    def write_parquet(
        self,
        data: pa.Table,
        *,
        partition_values: Mapping[str, Any] | None = None,
        name: str | None = None,
        stats: bool = True,
        row_group_size: int | None = None,
    ) -> dict[str, Any]:
        """Writes the data columns of ``data`` as one Parquet file; returns its ``add``.

        ``partition_values`` maps partition columns to Python values (None: null); the file
        goes under Hive-style directories and ``add.path`` is the URI-encoded relative path.
        """
        values = dict(partition_values or {})
        dirs = [
            f"{hive_escape(k)}={HIVE_NULL if v is None or v == '' else hive_escape(partition_string(v) or '')}"
            for k, v in values.items()
        ]
        fname = name or f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        rel = "/".join([*dirs, fname])
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        body = data.drop_columns([c for c in values if c in data.column_names])
        pq.write_table(body, target, row_group_size=row_group_size)
        add: dict[str, Any] = {
            "path": uri_encode(rel),
            "partitionValues": {k: partition_string(v) for k, v in values.items()},
            "size": target.stat().st_size,
            "modificationTime": int(target.stat().st_mtime * 1000),
            "dataChange": True,
        }
        if stats:
            add["stats"] = json.dumps(file_stats(body))
        return {"add": add}

    # -- deletion vectors ---------------------------------------------------------------------
    def write_dv(self, rows: Iterable[int]) -> dict[str, Any]:
        """Writes a new DV file holding ``rows``; returns the ``u`` descriptor."""
        rows = sorted(set(rows))
        payload = dv_payload(rows)
        u = uuid.uuid4()
        record = (
            b"\x01"
            + struct.pack(">I", len(payload))
            + payload
            + struct.pack(">I", zlib.crc32(payload) & 0xFFFFFFFF)
        )
        (self.root / f"deletion_vector_{u}.bin").write_bytes(record)
        return {
            "storageType": "u",
            "pathOrInlineDv": z85_encode(u.bytes),
            "offset": 1,
            "sizeInBytes": len(payload),
            "cardinality": len(rows),
        }

    # -- checkpoints --------------------------------------------------------------------------
    def checkpoint_rows(self, version: int) -> list[dict[str, Any]]:
        state = replay(self.root, version)
        rows: list[dict[str, Any]] = []
        assert state.protocol is not None and state.metadata is not None
        rows.append({"protocol": state.protocol})
        rows.append({"metaData": state.metadata})
        rows.extend({"txn": t} for t in state.txns.values())
        rows.extend({"domainMetadata": d} for d in state.domains.values() if not d.get("removed"))
        for a in state.adds.values():
            rows.append({"add": {**a, "dataChange": False}})
        for r in state.tombstones.values():
            rows.append({"remove": {**r, "dataChange": False}})
        return rows

    def checkpoint(
        self, version: int | None = None, *, parts: int = 1, hint: bool = True
    ) -> list[Path]:
        """Writes a V1 checkpoint of ``version`` (classic when ``parts == 1``)."""
        v = self.versions()[-1] if version is None else version
        rows = self.checkpoint_rows(v)
        written = []
        if parts == 1:
            path = self.checkpoint_path(v)
            pq.write_table(checkpoint_table(rows), path)
            written.append(path)
        else:
            chunks: list[list[dict[str, Any]]] = [[] for _ in range(parts)]
            # non-file actions in the first part, file actions spread by path hash
            for row in rows:
                action = row.get("add") or row.get("remove")
                i = 0 if action is None else zlib.crc32(unquote(action["path"]).encode()) % parts
                chunks[i].append(row)
            for i, chunk in enumerate(chunks, start=1):
                path = self.checkpoint_path(v, i, parts)
                pq.write_table(checkpoint_table(chunk), path)
                written.append(path)
        if hint:
            self.write_last_checkpoint(v, size=len(rows), parts=parts if parts > 1 else None)
        return written

    def write_last_checkpoint(
        self,
        version: int,
        *,
        size: int = -1,
        parts: int | None = None,
        checksum: str | None = "valid",
    ) -> Path:
        """Writes ``_last_checkpoint``; ``checksum`` is "valid", None, or a literal value."""
        doc: dict[str, Any] = {"version": version, "size": size}
        if parts is not None:
            doc["parts"] = parts
        if checksum == "valid":
            doc["checksum"] = last_checkpoint_checksum(doc)
        elif checksum is not None:
            doc["checksum"] = checksum
        path = self.log / "_last_checkpoint"
        path.write_text(json.dumps(doc))
        return path


def sorted_rows(table: pa.Table, key: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows as dicts, sorted (None sorts first) by ``key`` (default: all columns)."""
    rows = table.to_pylist()
    cols = list(key or table.column_names)

    def k(row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple((row[c] is not None, row[c] if row[c] is not None else 0) for c in cols)

    return sorted(rows, key=k)


def read_engines(uri: str, version: int | None = None, **kw: Any) -> dict[str, pa.Table]:
    """The table at ``version`` (latest by default) as lakequery's Arrow, DuckDB and Polars
    engines read it; ``kw`` goes to :class:`lakequery.DeltaTable` (``storage_options``)."""
    import duckdb

    import lakequery as lq

    scan = lq.DeltaTable(uri, **kw).snapshot(version=version).scan()
    con = duckdb.connect()
    try:
        return {
            "arrow": scan.to_arrow(),
            "duckdb": scan.to_duckdb(con).to_arrow_table(),
            "polars": scan.to_polars().collect().to_arrow(),
        }
    finally:
        con.close()


def copy_conformance_table(name: str, dest_dir: Path | str) -> Path:
    """A writable copy of a conformance table under ``dest_dir`` (never write to the
    shared set). A missing table fails the test: the conformance set is required."""
    import shutil
    import stat

    source = conformance_table(name)
    assert source.exists(), (
        f"conformance table {name} missing at {source}: clone the repo beside shared/ or "
        f"set {CONFORMANCE_ENV}"
    )
    target = Path(dest_dir) / name
    shutil.copytree(source, target)
    for dirpath, _, filenames in os.walk(target):
        os.chmod(dirpath, stat.S_IRWXU)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), stat.S_IRUSR | stat.S_IWUSR)
    return target
