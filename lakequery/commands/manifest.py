"""Symlink manifests (``_symlink_format_manifest/``) for engines that read Delta tables as
lists of Parquet files (Presto/Trino/Athena/Redshift Spectrum ``SymlinkTextInputFormat``).

One ``manifest`` file per partition, in Hive-style directories named by the logical
partition columns (``_symlink_format_manifest/day=2026-11-01/manifest``; unpartitioned
tables get ``_symlink_format_manifest/manifest``), listing the absolute locations of the
partition's live data files, one per line. Manifests of partitions that no longer exist
are deleted. A table with deletion vectors is refused: a file list cannot express
deleted rows, so such readers would return them (purge DVs with ``optimize()`` first).

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://manifest-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    >>> r = lq.DeltaTable(uri).generate_symlink_manifest()
    >>> [m.split("_symlink_format_manifest/")[1] for m in r.manifests]
    ['p=a/manifest', 'p=b/manifest']
"""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc

from lakequery.commands.listing import list_tree
from lakequery.commands.metrics import ManifestResult
from lakequery.errors import UnsupportedFeatureError
from lakequery.log_segment import load_state
from lakequery.protocol.file_locations import file_locations
from lakequery.snapshot import Snapshot
from lakequery.storage import Storage
from lakequery.writer.partition_values import (
    directory_value,
    partition_directory,
    serialize_partition_values,
)

MANIFEST_DIR = "_symlink_format_manifest"


def generate_symlink_manifest(storage: Storage) -> ManifestResult:
    """Writes the manifests of the latest version.

    Raises:
        UnsupportedFeatureError: the table has files with deletion vectors.
    """
    snapshot = Snapshot(storage, load_state(storage, None))
    files = snapshot.files()
    dv: Any = files.column("deletion_vector").combine_chunks()
    if files.num_rows and pc.any(pc.is_valid(dv)).as_py():
        raise UnsupportedFeatureError(
            "deletionVectors",
            operation="generate symlink manifests",
            detail="manifest readers would return deleted rows; run optimize() to purge them",
        )
    specs = snapshot.partition_column_specs()
    directories: list[str]
    if specs and files.num_rows:
        parts: Any = files.column("partition_values").combine_chunks()
        columns = []
        for logical, _, t in specs:
            values = serialize_partition_values(parts.field(logical), t, logical)
            columns.append([(logical, directory_value(v, t)) for v in values])
        directories = [partition_directory(list(row)) for row in zip(*columns, strict=True)]
    else:
        directories = [""] * files.num_rows
    groups: dict[str, list[str]] = {}
    locations = file_locations(storage.root, files.column("path")).to_pylist()
    for directory, location in zip(directories, locations, strict=True):
        groups.setdefault(directory, []).append(str(location))
    written = []
    for directory in sorted(groups):
        location = storage.join(MANIFEST_DIR, directory, "manifest")
        storage.put(location, ("\n".join(sorted(groups[directory])) + "\n").encode())
        written.append(location)
    existing = list_tree(storage, MANIFEST_DIR).column("path").to_pylist()
    keep = {w[len(storage.root) + 1 :] for w in written}
    stale = [p for p in existing if p not in keep and str(p).endswith("manifest")]
    for p in stale:
        storage.delete(storage.join(str(p)))
    return ManifestResult(
        version=snapshot.version,
        manifests=tuple(written),
        files_listed=files.num_rows,
        stale_removed=len(stale),
    )


__all__ = ["MANIFEST_DIR", "generate_symlink_manifest"]
