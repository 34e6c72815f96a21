"""The checkpoint schema tree lakequery builds from DuckDB's ``parquet_schema`` rows, which
decides how every checkpoint column is projected onto the canonical action structs: it
must call a column a struct exactly when pyarrow (which read these footers before) does,
at every depth, for the shapes Parquet writers produce (structs in structs, lists of
structs in the 3-level and the legacy 2-level form, maps, leaves)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from lakequery.log_reader import _Group, _schema_tree


def _arrow_tree(fields: Any) -> dict[str, Any]:
    return {
        f.name: (_arrow_tree(list(f.type)) if pa.types.is_struct(f.type) else None) for f in fields
    }


def _as_dict(group: _Group) -> dict[str, Any]:
    return {k: (_as_dict(v) if v is not None else None) for k, v in group.fields.items()}


def _tree_from_duckdb(path: Path) -> _Group:
    rows = (
        duckdb.connect()
        .execute(
            "SELECT name, num_children, repetition_type, converted_type, logical_type "
            f"FROM parquet_schema('{path}')"
        )
        .fetchall()
    )
    return _schema_tree(rows)


def _table() -> pa.Table:
    dv = pa.struct([("storageType", pa.string()), ("cardinality", pa.int64())])
    stats = pa.struct([("numRecords", pa.int64()), ("minValues", pa.struct([("id", pa.int64())]))])
    add = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", pa.map_(pa.string(), pa.string())),
            ("deletionVector", dv),
            ("stats_parsed", stats),
            ("tags", pa.map_(pa.string(), pa.string())),
            ("items", pa.list_(pa.struct([("a", pa.int32())]))),
            ("empty_list", pa.list_(pa.int64())),
        ]
    )
    schema = pa.schema(
        [("add", add), ("sidecar", pa.struct([("path", pa.string())])), ("v", pa.int64())]
    )
    return pa.Table.from_pylist([{"add": None, "sidecar": None, "v": 1}], schema=schema)


def test_struct_tree_matches_pyarrow_for_modern_and_legacy_lists(tmp_path: Path) -> None:
    table = _table()
    for legacy in (False, True):
        path = tmp_path / f"cp_{legacy}.parquet"
        pq.write_table(table, path, use_compliant_nested_type=not legacy)
        want = _arrow_tree(pq.ParquetFile(path).schema_arrow)
        got = _as_dict(_tree_from_duckdb(path))
        assert got == want
        assert got["add"]["deletionVector"] == {"storageType": None, "cardinality": None}
        assert got["add"]["items"] is None and got["add"]["partitionValues"] is None


def test_two_level_repeated_group_is_not_a_struct() -> None:
    # a legacy list written without any annotation: a repeated group directly in the parent
    rows = [
        ("schema", 1, "REQUIRED", None, None),
        ("add", 2, "OPTIONAL", None, None),
        ("path", None, "OPTIONAL", "UTF8", None),
        ("items", 1, "REPEATED", None, None),
        ("a", None, "OPTIONAL", None, None),
    ]
    tree = _schema_tree(rows)
    assert _as_dict(tree) == {"add": {"path": None, "items": None}}


def test_struct_tree_matches_pyarrow_on_every_conformance_checkpoint() -> None:
    """Checkpoints and sidecars written by Spark, Databricks and delta-rs (the shapes
    lakequery must project): the tree equals pyarrow's on every one of them."""
    from tablekit import conformance_dir

    files = sorted(
        p
        for p in conformance_dir().rglob("*.parquet")
        if ".checkpoint" in p.name or p.parent.name == "_sidecars"
    )
    assert len(files) >= 10, "the conformance checkpoints were not found"
    for path in files:
        want = _arrow_tree(pq.ParquetFile(path).schema_arrow)
        assert _as_dict(_tree_from_duckdb(path)) == want, path
