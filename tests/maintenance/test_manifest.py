"""Symlink manifests: one file list per partition, readable as plain Parquet file lists;
stale partitions dropped; refused with deletion vectors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from maint_tables import DV_CONFIG, delete_rows, normalise, sample_batch

import lakequery as lq
from lakequery.errors import UnsupportedFeatureError


def _read_manifests(root: Path) -> pa.Table:
    parts = []
    for manifest in sorted((root / "_symlink_format_manifest").rglob("manifest")):
        directory = manifest.parent.relative_to(root / "_symlink_format_manifest").as_posix()
        values = dict(kv.split("=", 1) for kv in directory.split("/")) if directory != "." else {}
        for line in manifest.read_text().splitlines():
            assert Path(line).is_absolute() and Path(line).exists()
            t = pq.read_table(line)
            for k, v in values.items():
                t = t.append_column(k, pa.array([v] * t.num_rows))
            parts.append(t)
    return pa.concat_tables(parts)


def test_manifests_list_every_live_file(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, sample_batch(0, 50, ("a", "b", "c")), partition_by=["p"])
    lq.write(uri, sample_batch(50, 50, ("a", "b", "c")), mode="append")
    r = lq.DeltaTable(uri).generate_symlink_manifest()
    assert r.files_listed == 6 and len(r.manifests) == 3 and r.stale_removed == 0
    expected = normalise(lq.DeltaTable(uri).snapshot().scan().to_arrow())
    assert normalise(_read_manifests(Path(uri))) == expected
    # a partition disappears: its manifest goes too
    lq.write(uri, sample_batch(0, 10, ("a",)), mode="overwrite")
    r = lq.DeltaTable(uri).generate_symlink_manifest()
    assert r.stale_removed == 2 and len(r.manifests) == 1
    assert normalise(_read_manifests(Path(uri))) == normalise(
        lq.DeltaTable(uri).snapshot().scan().to_arrow()
    )


def test_unpartitioned_manifest(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"x": [1, 2]}))
    r = lq.DeltaTable(uri).generate_symlink_manifest()
    assert [Path(m).relative_to(uri).as_posix() for m in r.manifests] == [
        "_symlink_format_manifest/manifest"
    ]
    assert normalise(_read_manifests(Path(uri))) == [(1,), (2,)]


def test_refused_with_deletion_vectors_until_purged(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, sample_batch(0, 40), configuration=DV_CONFIG)
    delete_rows(uri, lambda path, n: [0])
    with pytest.raises(UnsupportedFeatureError, match="deletionVectors"):
        lq.DeltaTable(uri).generate_symlink_manifest()
    lq.DeltaTable(uri).optimize(min_file_size=1 << 30)
    r = lq.DeltaTable(uri).generate_symlink_manifest()
    assert normalise(_read_manifests(Path(uri))) == normalise(
        lq.DeltaTable(uri).snapshot().scan().to_arrow()
    )
    assert r.files_listed == 1
