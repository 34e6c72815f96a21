"""Synthetic Delta logs *without data files*, for snapshot-load (log replay) benchmarks.

Two layouts are produced:

* ``json``: ``N`` live files spread over ~1000 JSON commits. Version 0 holds protocol (1, 2) +
  metaData; every commit has a ``commitInfo`` first, ``add`` actions with two partition columns
  (``date``, ``region``), size, modificationTime, dataChange and JSON stats for five columns, and
  (from version 1 on) ``remove`` actions for files added by earlier commits (default: 20% of all
  added files get removed later), so replay has reconciliation work to do. Every 10th commit also
  carries a ``txn`` action.
* ``checkpoint``: the same kind of history, but the log starts with a classic single-file V1
  checkpoint Parquet at version ``V`` (digest §7.3 layout, several row groups, tombstones included),
  followed by ~20 JSON commits and a ``_last_checkpoint`` hint (with checksum, digest §2.5).

Everything is vectorised with numpy/polars/pyarrow: JSON lines are built with
``polars.concat_str`` and each commit file is written straight from the
Arrow data buffer, so 500k-file logs take seconds, not minutes.

CLI::

    python -m benchmarks.synth_log --kind json --files 200000 --out benchmarks/data/logs/json_200k
    python -m benchmarks.synth_log --kind checkpoint --files 500000 --out /tmp/ckpt_500k --check

``--self-check`` builds small logs of every layout in a temp dir and validates them;
``--check`` validates the generated log with the ``deltalake`` package (live-file count and path
set at the latest version, plus live-file count at an intermediate version for JSON logs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

T0_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z: timestamp of version 0
COMMIT_INTERVAL_MS = 60_000  # one commit per minute
DATE0_DAYS = 19_723  # 2024-01-01 as days since the epoch
N_DAYS = 365
REGIONS = ["us-east", "us-west", "eu-central", "eu-west", "ap-south", "ap-northeast"]
PARTITION_COLUMNS = ["date", "region"]
TABLE_ID = "5d1f7c4e-2b9a-4c1e-9a53-6f0c0b6f2d11"
TXN_APP_ID = "lakequery-bench-stream"
TXN_EVERY = 10

# Non-partition columns with stats: name -> Delta type
STATS_COLUMNS = {
    "id": "long",
    "value": "double",
    "name": "string",
    "ts": "timestamp",
    "qty": "integer",
}
SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in [*STATS_COLUMNS.items(), ("date", "date"), ("region", "string")]
    ],
}

PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
METADATA: dict[str, Any] = {
    "id": TABLE_ID,
    "name": None,
    "description": None,
    "format": {"provider": "parquet", "options": {}},
    "schemaString": json.dumps(SCHEMA, separators=(",", ":")),
    "partitionColumns": PARTITION_COLUMNS,
    "configuration": {},
    "createdTime": T0_MS,
}

STR = pa.string()
MAP_SS = pa.map_(pa.string(), pa.string())
DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)


# --------------------------------------------------------------------------------------------
# History model (pure numpy)
# --------------------------------------------------------------------------------------------


@dataclass
class History:
    """Per-file attributes of every file ever added; index = file id."""

    n_commits: int
    c_add: np.ndarray  # version that added the file
    c_rm: np.ndarray  # version that removed it, -1 if still live at the end
    date_idx: np.ndarray
    region_idx: np.ndarray
    size: np.ndarray
    mtime: np.ndarray
    num_records: np.ndarray
    id_min: np.ndarray
    value_min: np.ndarray
    value_max: np.ndarray
    value_nulls: np.ndarray
    name_min: np.ndarray
    name_max: np.ndarray
    name_nulls: np.ndarray
    ts_min: np.ndarray  # seconds since epoch
    ts_max: np.ndarray
    qty_min: np.ndarray
    qty_max: np.ndarray
    uuid_hex: pl.Series  # 32 hex chars per file

    @property
    def n_files(self) -> int:
        return len(self.c_add)

    def live_mask(self, version: int) -> np.ndarray:
        removed = (self.c_rm >= 0) & (self.c_rm <= version)
        return (self.c_add <= version) & ~removed

    def n_live(self, version: int) -> int:
        return int(self.live_mask(version).sum())


def make_history(n_live: int, n_commits: int, remove_frac: float = 0.2, seed: int = 0) -> History:
    """Spread ``n_live / (1 - remove_frac)`` adds evenly over ``n_commits`` versions and remove
    ``remove_frac`` of them in a later commit, so exactly ``n_live`` files are live at the end."""
    if n_commits < 2:
        raise ValueError("need at least 2 commits")
    if not 0 <= remove_frac < 1:
        raise ValueError("remove_frac must be in [0, 1)")
    rng = np.random.default_rng(seed)
    n_total = round(n_live / (1.0 - remove_frac))
    n_remove = n_total - n_live
    c_add = (np.arange(n_total, dtype=np.int64) * n_commits) // n_total
    candidates = np.flatnonzero(c_add < n_commits - 1)
    if n_remove > len(candidates):
        raise ValueError("too many removes for this history")
    c_rm = np.full(n_total, -1, dtype=np.int64)
    victims = rng.choice(candidates, size=n_remove, replace=False)
    c_rm[victims] = rng.integers(c_add[victims] + 1, n_commits)

    # Time-based ingest: later commits write later dates (with a little jitter).
    date_idx = np.clip(c_add * N_DAYS // n_commits + rng.integers(-2, 3, n_total), 0, N_DAYS - 1)
    region_idx = rng.integers(0, len(REGIONS), n_total)
    size = rng.integers(1 << 20, 128 << 20, n_total)
    mtime = T0_MS + c_add * COMMIT_INTERVAL_MS - rng.integers(1_000, 50_000, n_total)
    num_records = rng.integers(10_000, 1_000_000, n_total)
    id_min = np.concatenate([[0], np.cumsum(num_records)[:-1]])
    value_min = np.round(rng.uniform(-1000.0, 0.0, n_total), 3)
    value_max = np.round(rng.uniform(0.0, 1000.0, n_total), 3)
    value_nulls = rng.integers(0, 3, n_total) * rng.integers(0, 100, n_total)
    name_a = rng.integers(0, 50_000, n_total)
    name_min = name_a
    name_max = name_a + rng.integers(1, 50_000, n_total)
    name_nulls = rng.integers(0, 2, n_total) * rng.integers(0, 1000, n_total)
    day_s = (DATE0_DAYS + date_idx) * 86_400
    ts_min = day_s + rng.integers(0, 43_200, n_total)
    ts_max = ts_min + rng.integers(60, 43_199, n_total)
    qty_min = rng.integers(0, 100, n_total)
    qty_max = qty_min + rng.integers(0, 10_000, n_total)
    hexes = np.frombuffer(rng.bytes(16 * n_total).hex().encode("ascii"), dtype="S32")
    uuid_hex = pl.Series(hexes).cast(pl.String)
    return History(
        n_commits=n_commits,
        c_add=c_add,
        c_rm=c_rm,
        date_idx=date_idx,
        region_idx=region_idx,
        size=size,
        mtime=mtime,
        num_records=num_records,
        id_min=id_min,
        value_min=value_min,
        value_max=value_max,
        value_nulls=value_nulls,
        name_min=name_min,
        name_max=name_max,
        name_nulls=name_nulls,
        ts_min=ts_min,
        ts_max=ts_max,
        qty_min=qty_min,
        qty_max=qty_max,
        uuid_hex=uuid_hex,
    )


# --------------------------------------------------------------------------------------------
# Vectorised string building
# --------------------------------------------------------------------------------------------


def _cat(*parts: pl.Series | str) -> pl.Series:
    """Element-wise concatenation of string Series and literal strings (``polars.concat_str``;
    ~5x faster than ``pc.binary_join_element_wise`` with scalar pieces)."""
    exprs = [pl.lit(p, dtype=pl.String) if isinstance(p, str) else pl.lit(p) for p in parts]
    return pl.select(pl.concat_str(exprs).alias("s")).to_series()


def _s(a: np.ndarray) -> pl.Series:
    return pl.Series(a).cast(pl.String)


def _pad(a: np.ndarray, width: int) -> pl.Series:
    return _s(a).str.pad_start(width, "0")


def _arrow(s: pl.Series) -> pa.Array:
    """Series -> contiguous pa.string() array (checkpoint columns)."""
    arr = s.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.cast(STR)


def _name(a: np.ndarray) -> pl.Series:
    return _cat("name_", _pad(a, 6))


def _ts(a: np.ndarray) -> pl.Series:
    """ISO-8601 UTC with ms for epoch seconds (much faster than ``pc.strftime``)."""
    day = pl.Series((a // 86_400).astype(np.int32)).cast(pl.Date).cast(pl.String)
    sod = a % 86_400
    return _cat(
        day,
        "T",
        _pad(sod // 3600, 2),
        ":",
        _pad(sod // 60 % 60, 2),
        ":",
        _pad(sod % 60, 2),
        ".000Z",
    )


def _date_strings(h: History, idx: np.ndarray) -> pl.Series:
    return pl.Series((DATE0_DAYS + h.date_idx[idx]).astype(np.int32)).cast(pl.Date).cast(pl.String)


def _region_strings(h: History, idx: np.ndarray) -> pl.Series:
    return pl.Series(REGIONS, dtype=pl.String).gather(h.region_idx[idx])


def file_paths(h: History, idx: np.ndarray) -> pl.Series:
    hx = h.uuid_hex.gather(idx)
    sl = [hx.str.slice(a, n) for a, n in ((0, 8), (8, 4), (12, 4), (16, 4), (20, 12))]
    task = _pad(idx % 1000, 5)
    return _cat(
        "date=",
        _date_strings(h, idx),
        "/region=",
        _region_strings(h, idx),
        "/part-",
        task,
        "-",
        sl[0],
        "-",
        sl[1],
        "-",
        sl[2],
        "-",
        sl[3],
        "-",
        sl[4],
        ".c000.snappy.parquet",
    )


def stats_json(h: History, idx: np.ndarray, quote: str = '"') -> pl.Series:
    """The stats JSON string. ``quote='\\\\"'`` yields it already escaped for embedding."""
    q = quote
    ts_min, ts_max = _ts(h.ts_min[idx]), _ts(h.ts_max[idx])
    return _cat(
        f"{{{q}numRecords{q}:",
        _s(h.num_records[idx]),
        f",{q}minValues{q}:{{{q}id{q}:",
        _s(h.id_min[idx]),
        f",{q}value{q}:",
        _s(h.value_min[idx]),
        f",{q}name{q}:{q}",
        _name(h.name_min[idx]),
        f"{q},{q}ts{q}:{q}",
        ts_min,
        f"{q},{q}qty{q}:",
        _s(h.qty_min[idx]),
        f"}},{q}maxValues{q}:{{{q}id{q}:",
        _s(h.id_min[idx] + h.num_records[idx] - 1),
        f",{q}value{q}:",
        _s(h.value_max[idx]),
        f",{q}name{q}:{q}",
        _name(h.name_max[idx]),
        f"{q},{q}ts{q}:{q}",
        ts_max,
        f"{q},{q}qty{q}:",
        _s(h.qty_max[idx]),
        f"}},{q}nullCount{q}:{{{q}id{q}:0,{q}value{q}:",
        _s(h.value_nulls[idx]),
        f",{q}name{q}:",
        _s(h.name_nulls[idx]),
        f",{q}ts{q}:0,{q}qty{q}:0}}}}",
    )


def _partition_json(h: History, idx: np.ndarray) -> pl.Series:
    return _cat('{"date":"', _date_strings(h, idx), '","region":"', _region_strings(h, idx), '"}')


def add_lines(h: History, idx: np.ndarray) -> pl.Series:
    return _cat(
        '{"add":{"path":"',
        file_paths(h, idx),
        '","partitionValues":',
        _partition_json(h, idx),
        ',"size":',
        _s(h.size[idx]),
        ',"modificationTime":',
        _s(h.mtime[idx]),
        ',"dataChange":true,"stats":"',
        stats_json(h, idx, quote='\\"'),
        '"}}\n',
    )


def remove_lines(h: History, idx: np.ndarray) -> pl.Series:
    return _cat(
        '{"remove":{"path":"',
        file_paths(h, idx),
        '","deletionTimestamp":',
        _s(T0_MS + h.c_rm[idx] * COMMIT_INTERVAL_MS),
        ',"dataChange":true,"extendedFileMetadata":true,"partitionValues":',
        _partition_json(h, idx),
        ',"size":',
        _s(h.size[idx]),
        "}}\n",
    )


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _commit_header(v: int, n_adds: int, n_removes: int, rows: int) -> str:
    ts = T0_MS + v * COMMIT_INTERVAL_MS
    op = "WRITE" if n_removes == 0 else "MERGE"
    info: dict[str, Any] = {
        "timestamp": ts,
        "operation": op,
        "operationParameters": (
            {"mode": "Append", "partitionBy": _dumps(PARTITION_COLUMNS)}
            if op == "WRITE"
            else {"predicate": '["(id = source.id)"]'}
        ),
        "isolationLevel": "Serializable",
        "isBlindAppend": op == "WRITE",
        "operationMetrics": {
            "numFiles": str(n_adds),
            "numRemovedFiles": str(n_removes),
            "numOutputRows": str(rows),
        },
        "engineInfo": "lakequery-benchmarks-synth/0.1",
        "txnId": str(uuid.UUID(int=v + 1)),
    }
    if v > 0:
        info["readVersion"] = v - 1
    lines = [_dumps({"commitInfo": info})]
    if v == 0:
        lines.append(_dumps({"protocol": PROTOCOL}))
        lines.append(_dumps({"metaData": METADATA}))
    if v > 0 and v % TXN_EVERY == 0:
        lines.append(_dumps({"txn": {"appId": TXN_APP_ID, "version": v, "lastUpdated": ts}}))
    return "\n".join(lines) + "\n"


def write_commits(h: History, log_dir: Path, v_lo: int, v_hi: int) -> int:
    """Write JSON commits ``v_lo..v_hi`` (inclusive). Returns the number of file actions."""
    adds = np.flatnonzero((h.c_add >= v_lo) & (h.c_add <= v_hi))
    rms = np.flatnonzero((h.c_rm >= v_lo) & (h.c_rm <= v_hi))
    lines_pl = pl.concat([remove_lines(h, rms), add_lines(h, adds)])
    commit = np.concatenate([h.c_rm[rms], h.c_add[adds]])
    kind = np.concatenate([np.zeros(len(rms), np.int8), np.ones(len(adds), np.int8)])
    order = np.lexsort((kind, commit))  # per commit: removes, then adds
    lines = lines_pl.gather(order).to_arrow()
    del lines_pl
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    lines = lines.cast(pa.large_string())  # contiguous data buffer + int64 offsets
    commit = commit[order]
    kind = kind[order]
    rows = np.concatenate([h.num_records[rms], h.num_records[adds]])[order]

    _validity, offsets_buf, data_buf = lines.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[
        lines.offset : lines.offset + len(lines) + 1
    ]
    data = memoryview(data_buf)
    versions = np.arange(v_lo, v_hi + 1)
    starts = np.searchsorted(commit, versions, side="left")
    ends = np.searchsorted(commit, versions, side="right")
    for v, s, e in zip(versions.tolist(), starts.tolist(), ends.tolist(), strict=True):
        n_rm = int((kind[s:e] == 0).sum())
        header = _commit_header(v, e - s - n_rm, n_rm, int(rows[s:e][kind[s:e] == 1].sum()))
        with open(log_dir / f"{v:020d}.json", "wb") as f:
            f.write(header.encode())
            f.write(data[offsets[s] : offsets[e]])
    return len(lines)


# --------------------------------------------------------------------------------------------
# Checkpoint (digest §7.3)
# --------------------------------------------------------------------------------------------


def _map_array(keys: list[str], columns: list[pa.Array]) -> pa.Array:
    """map<string,string> with the same keys in every row."""
    n = len(columns[0]) if columns else 0
    k = len(keys)
    offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
    key_arr = pa.array(keys, type=STR).take(pa.array(np.tile(np.arange(k), n)))
    if k:
        order = (np.arange(n)[:, None] + np.arange(k)[None, :] * n).ravel()
        items = pa.concat_arrays([c.cast(STR) for c in columns]).take(pa.array(order))
    else:
        items = pa.array([], type=STR)
    return pa.MapArray.from_arrays(offsets, key_arr, items)


def _struct(fields: list[tuple[str, pa.Array]]) -> pa.StructArray:
    return pa.StructArray.from_arrays([a for _, a in fields], names=[n for n, _ in fields])


def _stats_parsed(h: History, idx: np.ndarray) -> pa.StructArray:
    def ts(a: np.ndarray) -> pa.Array:
        return pa.array(a * 1_000_000, type=pa.timestamp("us", tz="UTC"))

    def nm(a: np.ndarray) -> pa.Array:
        return _arrow(_name(a))

    mins = _struct(
        [
            ("id", pa.array(h.id_min[idx])),
            ("value", pa.array(h.value_min[idx])),
            ("name", nm(h.name_min[idx])),
            ("ts", ts(h.ts_min[idx])),
            ("qty", pa.array(h.qty_min[idx].astype(np.int32))),
        ]
    )
    maxs = _struct(
        [
            ("id", pa.array(h.id_min[idx] + h.num_records[idx] - 1)),
            ("value", pa.array(h.value_max[idx])),
            ("name", nm(h.name_max[idx])),
            ("ts", ts(h.ts_max[idx])),
            ("qty", pa.array(h.qty_max[idx].astype(np.int32))),
        ]
    )
    zeros = pa.array(np.zeros(len(idx), dtype=np.int64))
    nulls = _struct(
        [
            ("id", zeros),
            ("value", pa.array(h.value_nulls[idx])),
            ("name", pa.array(h.name_nulls[idx])),
            ("ts", zeros),
            ("qty", zeros),
        ]
    )
    return _struct(
        [
            ("numRecords", pa.array(h.num_records[idx])),
            ("minValues", mins),
            ("maxValues", maxs),
            ("nullCount", nulls),
        ]
    )


def _checkpoint_rows(h: History, version: int, stats_parsed: bool) -> tuple[Any, int, int]:
    """Returns ``(rows(lo, hi) -> pa.Table, n_rows, n_live_adds)`` for the checkpoint at
    ``version``. Row layout: protocol, metaData, [txn], live adds, tombstones."""
    live = np.flatnonzero(h.live_mask(version))
    tomb = np.flatnonzero((h.c_rm >= 0) & (h.c_rm <= version))
    n_live, n_tomb = len(live), len(tomb)

    def pv(idx: np.ndarray) -> pa.Array:
        cols = [_arrow(_date_strings(h, idx)), _arrow(_region_strings(h, idx))]
        return _map_array(PARTITION_COLUMNS, cols)

    add_fields: list[tuple[str, pa.Array]] = [
        ("path", _arrow(file_paths(h, live))),
        ("partitionValues", pv(live)),
        ("size", pa.array(h.size[live])),
        ("modificationTime", pa.array(h.mtime[live])),
        ("dataChange", pa.array(np.zeros(n_live, dtype=bool))),
        ("stats", _arrow(stats_json(h, live))),
        ("tags", pa.nulls(n_live, MAP_SS)),
        ("deletionVector", pa.nulls(n_live, DV_TYPE)),
        ("baseRowId", pa.nulls(n_live, pa.int64())),
        ("defaultRowCommitVersion", pa.nulls(n_live, pa.int64())),
        ("clusteringProvider", pa.nulls(n_live, STR)),
    ]
    if stats_parsed:
        days = pa.array((DATE0_DAYS + h.date_idx[live]).astype(np.int32), type=pa.date32())
        add_fields.append(
            (
                "partitionValues_parsed",
                _struct([("date", days), ("region", _arrow(_region_strings(h, live)))]),
            )
        )
        add_fields.append(("stats_parsed", _stats_parsed(h, live)))
    add = _struct(add_fields)

    remove = _struct(
        [
            ("path", _arrow(file_paths(h, tomb))),
            ("deletionTimestamp", pa.array(T0_MS + h.c_rm[tomb] * COMMIT_INTERVAL_MS)),
            ("dataChange", pa.array(np.zeros(n_tomb, dtype=bool))),
            ("extendedFileMetadata", pa.array(np.ones(n_tomb, dtype=bool))),
            ("partitionValues", pv(tomb)),
            ("size", pa.array(h.size[tomb])),
            ("deletionVector", pa.nulls(n_tomb, DV_TYPE)),
            ("baseRowId", pa.nulls(n_tomb, pa.int64())),
            ("defaultRowCommitVersion", pa.nulls(n_tomb, pa.int64())),
        ]
    )

    last_txn = (version // TXN_EVERY) * TXN_EVERY
    txn_rows: list[dict[str, Any]] = []
    if last_txn > 0:
        txn_rows.append(
            {
                "appId": TXN_APP_ID,
                "version": last_txn,
                "lastUpdated": T0_MS + last_txn * COMMIT_INTERVAL_MS,
            }
        )
    txn_type = pa.struct([("appId", STR), ("version", pa.int64()), ("lastUpdated", pa.int64())])
    meta_type = pa.struct(
        [
            ("id", STR),
            ("name", STR),
            ("description", STR),
            ("format", pa.struct([("provider", STR), ("options", MAP_SS)])),
            ("schemaString", STR),
            ("partitionColumns", pa.list_(STR)),
            ("configuration", MAP_SS),
            ("createdTime", pa.int64()),
        ]
    )
    proto_type = pa.struct(
        [
            ("minReaderVersion", pa.int32()),
            ("minWriterVersion", pa.int32()),
            ("readerFeatures", pa.list_(STR)),
            ("writerFeatures", pa.list_(STR)),
        ]
    )
    meta_py = dict(METADATA)
    meta_py["format"] = {"provider": "parquet", "options": []}
    meta_py["configuration"] = []
    n_head = 2 + len(txn_rows)
    n_rows = n_head + n_live + n_tomb

    head_nulls: list[dict[str, Any] | None] = [None] * n_head
    proto_head = [dict(PROTOCOL, readerFeatures=None, writerFeatures=None), None] + [None] * len(
        txn_rows
    )
    meta_head = [None, meta_py] + [None] * len(txn_rows)
    txn_head = [None, None, *txn_rows]
    # Each column as segments over the row space [head | adds | removes]; None = all null.
    columns: dict[str, tuple[pa.DataType, list[pa.Array | None]]] = {
        "txn": (txn_type, [pa.array(txn_head, type=txn_type), None, None]),
        "add": (add.type, [pa.array(head_nulls, type=add.type), add, None]),
        "remove": (remove.type, [pa.array(head_nulls, type=remove.type), None, remove]),
        "metaData": (meta_type, [pa.array(meta_head, type=meta_type), None, None]),
        "protocol": (proto_type, [pa.array(proto_head, type=proto_type), None, None]),
    }
    bounds = [0, n_head, n_head + n_live, n_rows]
    schema = pa.schema([(name, typ) for name, (typ, _) in columns.items()])

    def rows(lo: int, hi: int) -> pa.Table:
        """Rows ``[lo, hi)`` as a table; slices are zero-copy except at segment borders."""
        cols = []
        for typ, segs in columns.values():
            parts = []
            for i, seg in enumerate(segs):
                a, b = max(lo, bounds[i]), min(hi, bounds[i + 1])
                if a < b:
                    n = b - a
                    parts.append(pa.nulls(n, typ) if seg is None else seg.slice(a - bounds[i], n))
            cols.append(parts[0] if len(parts) == 1 else pa.concat_arrays(parts))
        return pa.Table.from_arrays(cols, schema=schema)

    return rows, n_rows, n_live


def _pct(s: str) -> str:
    safe = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    return "".join(chr(b) if b in safe else f"%{b:02X}" for b in s.encode())


def last_checkpoint_checksum(obj: dict[str, Any]) -> str:
    """MD5 of the canonicalised ``_last_checkpoint`` JSON (digest §2.5)."""
    pairs: list[str] = []

    def walk(node: Any, path: list[str]) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, [*path, f'"{_pct(k)}"'])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, [*path, str(i)])
        elif isinstance(node, str):
            pairs.append("+".join(path) + f'="{_pct(node)}"')
        else:
            pairs.append("+".join(path) + "=" + json.dumps(node))

    walk({k: v for k, v in obj.items() if k != "checksum"}, [])
    return hashlib.md5(",".join(sorted(pairs)).encode()).hexdigest()


def write_checkpoint(
    h: History,
    log_dir: Path,
    version: int,
    stats_parsed: bool = False,
    row_group_size: int = 50_000,
) -> dict[str, Any]:
    rows, n_rows, n_live = _checkpoint_rows(h, version, stats_parsed)
    final = log_dir / f"{version:020d}.checkpoint.parquet"
    tmp = log_dir / f".{version:020d}.checkpoint.parquet.tmp"
    first = rows(0, 1)
    with pq.ParquetWriter(tmp, first.schema, compression="snappy") as w:
        for lo in range(0, n_rows, row_group_size):
            w.write_table(rows(lo, min(n_rows, lo + row_group_size)), row_group_size=row_group_size)
    tmp.rename(final)
    hint: dict[str, Any] = {
        "version": version,
        "size": n_rows,
        "sizeInBytes": final.stat().st_size,
        "numOfAddFiles": n_live,
    }
    hint["checksum"] = last_checkpoint_checksum(hint)
    (log_dir / "_last_checkpoint").write_text(_dumps(hint))
    return {
        "checkpoint_rows": n_rows,
        "checkpoint_row_groups": pq.ParquetFile(final).num_row_groups,
        "checkpoint_bytes": hint["sizeInBytes"],
    }


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def manifest_path(out: Path) -> Path:
    return out.parent / f"{out.name}.manifest.json"


def generate(
    out: Path,
    kind: str,
    n_live: int,
    n_commits: int = 1000,
    remove_frac: float = 0.2,
    post_commits: int = 20,
    full_history: bool = False,
    stats_parsed: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Generate a synthetic log at ``out`` and write ``<out>.manifest.json``.

    For ``kind='json'`` the log has versions ``0..n_commits-1``; for ``kind='checkpoint'`` a
    checkpoint at ``V = n_commits`` followed by ``post_commits`` JSON commits (versions ``V..V+k``
    are written, plus ``0..V-1`` when ``full_history``). ``n_live`` files are live at the end.
    """
    t0 = time.perf_counter()
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    log_dir = out / "_delta_log"
    log_dir.mkdir(parents=True)
    manifest_path(out).unlink(missing_ok=True)
    info: dict[str, Any] = {
        "kind": kind,
        "path": str(out),
        "seed": seed,
        "remove_frac": remove_frac,
    }
    if kind == "json":
        h = make_history(n_live, n_commits, remove_frac, seed)
        n_actions = write_commits(h, log_dir, 0, n_commits - 1)
        latest = n_commits - 1
        info["checkpoint_version"] = None
    elif kind == "checkpoint":
        ckpt_v = n_commits
        latest = ckpt_v + post_commits
        h = make_history(n_live, latest + 1, remove_frac, seed)
        first = 0 if full_history else ckpt_v
        n_actions = write_commits(h, log_dir, first, latest)
        info.update(write_checkpoint(h, log_dir, ckpt_v, stats_parsed=stats_parsed))
        info["checkpoint_version"] = ckpt_v
        info["live_at_checkpoint"] = h.n_live(ckpt_v)
        info["json_commits_written"] = latest - first + 1
    else:
        raise ValueError(f"unknown kind {kind!r}")
    mid = latest // 2
    info.update(
        {
            "history_commits": h.n_commits,
            "latest_version": latest,
            "live_files": h.n_live(latest),
            "total_adds": h.n_files,
            "total_removes": int((h.c_rm >= 0).sum()),
            "json_file_actions": n_actions,
            "mid_version": mid,
            "live_at_mid_version": h.n_live(mid),
            "log_bytes": sum(p.stat().st_size for p in log_dir.iterdir()),
            "gen_seconds": round(time.perf_counter() - t0, 2),
        }
    )
    assert info["live_files"] == n_live
    manifest_path(out).write_text(json.dumps(info, indent=2))
    return info


def expected_live_paths(out: Path) -> set[str]:
    """Recompute the live path set from the manifest (same seed => same history)."""
    m = json.loads(manifest_path(out).read_text())
    h = make_history(m["live_files"], m["history_commits"], m["remove_frac"], m["seed"])
    return set(file_paths(h, np.flatnonzero(h.live_mask(m["latest_version"]))).to_list())


def check_with_deltalake(out: Path, full: bool = True) -> dict[str, Any]:
    """Validate the generated log with the deltalake package."""
    from deltalake import DeltaTable

    m = json.loads(manifest_path(out).read_text())
    t0 = time.perf_counter()
    dt = DeltaTable(str(out))
    uris = dt.file_uris()
    load_s = time.perf_counter() - t0
    res: dict[str, Any] = {
        "version": dt.version(),
        "deltalake_live_files": len(uris),
        "expected_live_files": m["live_files"],
        "deltalake_load_and_list_s": round(load_s, 2),
    }
    ok = dt.version() == m["latest_version"] and len(uris) == m["live_files"]
    actions = pa.table(dt.get_add_actions(flatten=True))
    res["add_actions_columns"] = actions.column_names
    ok = ok and actions.num_rows == m["live_files"] and "min.id" in actions.column_names
    if full:
        got = set(actions.column("path").to_pylist())
        same = got == expected_live_paths(out)
        res["path_set_matches"] = same
        ok = ok and same
    if m["checkpoint_version"] is None:
        mid = DeltaTable(str(out), version=m["mid_version"])
        n_mid = len(mid.file_uris())
        res["live_at_mid_version"] = (n_mid, m["live_at_mid_version"])
        ok = ok and n_mid == m["live_at_mid_version"]
    res["ok"] = ok
    return res


def self_check() -> int:
    """Small logs of every layout, each validated with deltalake (count, path set, mid version)."""
    import tempfile

    cases: list[tuple[str, dict[str, Any]]] = [
        ("json", {"n_commits": 120}),
        ("checkpoint", {"n_commits": 100}),
        ("checkpoint", {"n_commits": 100, "stats_parsed": True}),
        ("checkpoint", {"n_commits": 100, "full_history": True, "remove_frac": 0.5}),
    ]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for i, (kind, kw) in enumerate(cases):
            out = Path(tmp) / f"{kind}_{i}"
            info = generate(out, kind, 5_000, **kw)
            res = check_with_deltalake(out)
            ok = ok and res["ok"]
            print(f"{kind:>10} {kw}: {info['live_files']} live, deltalake ok={res['ok']}")
    print("self-check", "passed" if ok else "FAILED")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kind", choices=["json", "checkpoint"], default="json")
    p.add_argument("--files", type=int, default=200_000, help="live files at the latest version")
    p.add_argument("--commits", type=int, default=1000, help="JSON commits / checkpoint version")
    p.add_argument("--remove-frac", type=float, default=0.2, help="fraction of adds later removed")
    p.add_argument("--post-commits", type=int, default=20, help="JSON commits after checkpoint")
    p.add_argument("--full-history", action="store_true", help="also keep commits before ckpt")
    p.add_argument("--stats-parsed", action="store_true", help="also write stats_parsed struct")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    p.add_argument("--check", action="store_true", help="validate with the deltalake package")
    p.add_argument(
        "--self-check",
        action="store_true",
        help="generate small logs of every layout in a temp dir and validate them with deltalake",
    )
    a = p.parse_args(argv)
    if a.self_check:
        return self_check()
    if a.out is None:
        p.error("--out is required (or use --self-check)")
    info = generate(
        a.out,
        a.kind,
        a.files,
        n_commits=a.commits,
        remove_frac=a.remove_frac,
        post_commits=a.post_commits,
        full_history=a.full_history,
        stats_parsed=a.stats_parsed,
        seed=a.seed,
    )
    print(json.dumps(info, indent=2))
    if a.check:
        res = check_with_deltalake(a.out)
        print(json.dumps(res, indent=2))
        return 0 if res["ok"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
