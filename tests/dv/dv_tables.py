"""Tables for the DV writer tests: build, enable DVs, commit by hand, compute expectations
from the Parquet files themselves, and read back through every reader available."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from tablekit import LOG_DIR, LogState, dv_id, replay

import lakequery as lq

# legacy protocol versions -> the features they imply (digest §5.1, §5.2)
_WRITER_FEATURES = {
    2: ["appendOnly", "invariants"],
    3: ["checkConstraints"],
    4: ["changeDataFeed", "generatedColumns"],
    5: ["columnMapping"],
    6: ["identityColumns"],
}


def latest_version(root: Path) -> int:
    return max(int(p.name[:20]) for p in (root / LOG_DIR).glob("*.json"))


def state(root: Path) -> LogState:
    return replay(root, latest_version(root))


def live_adds(root: Path) -> dict[str, dict[str, Any]]:
    """Decoded path -> the live ``add`` body, as written in the JSON log."""
    out: dict[str, dict[str, Any]] = {}
    for (path, _), add in state(root).adds.items():
        assert path not in out, f"two live adds for {path}"
        out[path] = add
    return out


def check_commit_rules(actions: Sequence[Mapping[str, Any]]) -> None:
    """Digest §4.11: one add and one remove per path, never the same (path, dvId) in both."""
    adds = [
        (unquote(a["add"]["path"]), dv_id(a["add"].get("deletionVector")))
        for a in actions
        if "add" in a
    ]
    removes = [
        (unquote(a["remove"]["path"]), dv_id(a["remove"].get("deletionVector")))
        for a in actions
        if "remove" in a
    ]
    assert len({p for p, _ in adds}) == len(adds), "two adds for one path"
    assert len({p for p, _ in removes}) == len(removes), "two removes for one path"
    assert not set(adds) & set(removes), "add and remove with the same (path, dvId)"
    flags = {a[k]["dataChange"] for a in actions for k in ("add", "remove") if k in a}
    assert len(flags) <= 1, "mixed dataChange values"


def commit(root: Path, actions: Sequence[Mapping[str, Any]], *, operation: str = "DELETE") -> int:
    """Writes ``actions`` as the next commit (commitInfo first); returns its version."""
    check_commit_rules(actions)
    version = latest_version(root) + 1
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": operation}}
    text = "\n".join(json.dumps(a) for a in [info, *actions]) + "\n"
    with open(root / LOG_DIR / f"{version:020d}.json", "x") as fh:  # never overwrite a commit
        fh.write(text)
    return version


def enable_deletion_vectors(root: Path) -> int:
    """Upgrades the protocol to (3, 7) with deletionVectors (keeping every feature the old
    protocol implied, digest §5.2) and sets ``delta.enableDeletionVectors=true``."""
    st = state(root)
    assert st.protocol is not None and st.metadata is not None
    old = st.protocol
    writer: list[str] = list(old.get("writerFeatures") or [])
    reader: list[str] = list(old.get("readerFeatures") or [])
    if int(old["minWriterVersion"]) < 7:
        for v in range(2, int(old["minWriterVersion"]) + 1):
            writer += [f for f in _WRITER_FEATURES.get(v, []) if f not in writer]
    if int(old["minReaderVersion"]) == 2 and "columnMapping" not in reader:
        reader.append("columnMapping")
    for features in (reader, writer):
        if "deletionVectors" not in features:
            features.append("deletionVectors")
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": reader,
        "writerFeatures": writer,
    }
    meta = dict(st.metadata)
    meta["configuration"] = {
        **(meta.get("configuration") or {}),
        "delta.enableDeletionVectors": "true",
    }
    return commit(root, [{"protocol": protocol}, {"metaData": meta}], operation="SET TBLPROPERTIES")


def write_deltalake_table(root: Path, batches: Iterable[pa.Table], row_group_size: int) -> None:
    props = deltalake.WriterProperties(max_row_group_size=row_group_size)
    for batch in batches:
        deltalake.write_deltalake(str(root), batch, mode="append", writer_properties=props)


# --- expectations ---------------------------------------------------------------------------------


def file_rows(
    root: Path, add: Mapping[str, Any], partition_types: Mapping[str, pa.DataType]
) -> pa.Table:
    """The physical rows of one data file, in file order, with its partition values."""
    t = pq.read_table(root / unquote(add["path"]))
    for name, typ in partition_types.items():
        value = (add.get("partitionValues") or {}).get(name)
        t = t.append_column(name, pa.array([value] * t.num_rows, pa.string()).cast(typ))
    return t


def expected_table(
    root: Path,
    deleted: Mapping[str, Iterable[int]],
    partition_types: Mapping[str, pa.DataType] | None = None,
) -> list[tuple[Any, ...]]:
    """All rows of the live files (by decoded path) minus the given physical positions."""
    parts = dict(partition_types or {})
    out: list[pa.Table] = []
    for path, add in live_adds(root).items():
        t = file_rows(root, add, parts)
        gone = set(deleted.get(path, ()))
        keep = [i not in gone for i in range(t.num_rows)]
        out.append(t.filter(pa.array(keep, pa.bool_())))
    return normalise(pa.concat_tables(out, promote_options="permissive") if out else pa.table({}))


def normalise(t: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples over the columns in name order (string types unified)."""
    names = sorted(t.column_names)
    cols = [t.column(n).to_pylist() for n in names]
    return sorted(zip(*cols, strict=True)) if cols else []


# --- readers ------------------------------------------------------------------------------------


def read_all_ways(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The table's rows through lakequery's three engines and the two peer readers."""
    scan = lq.DeltaTable(str(root)).snapshot().scan()
    out = {
        "lakequery.to_arrow": normalise(scan.to_arrow()),
        "lakequery.to_duckdb": normalise(scan.to_duckdb().to_arrow_table()),
        "lakequery.to_polars": normalise(scan.to_polars().collect().to_arrow()),
    }
    dt = deltalake.DeltaTable(str(root))
    reader = deltalake.QueryBuilder().register("t", dt).execute("select * from t")
    out["deltalake.QueryBuilder"] = normalise(reader.read_all())
    out["polars.scan_delta"] = normalise(pl.scan_delta(str(root)).collect().to_arrow())
    return out


def assert_all_readers(root: Path, expected: list[tuple[Any, ...]]) -> None:
    got = read_all_ways(root)
    wrong = {k: len(v) for k, v in got.items() if v != expected}
    assert not wrong, f"readers disagree with the expected {len(expected)} rows: {wrong}"
