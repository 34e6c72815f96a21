"""Every failure is a specific lakequery error that names the file, version or feature."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tablekit import TableKit, conformance_table, protocol_action

import lakequery as lq

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
DV_TABLE = conformance_table("dat_deletion_vectors")
DV_DATA_FILE = "part-00000-2a439866-587c-43d5-91fb-dd8e1b3c8ef4-c000.snappy.parquet"
DV_FILE = "deletion_vector_8aebe228-b96c-4831-b0b6-22882eb9a3d3.bin"


def data(n0: int, n: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(n0, n0 + n), pa.int64()), "v": [str(i) for i in range(n)]}
    )


def small_table(root: Path, versions: int = 3) -> TableKit:
    kit = TableKit(root)
    kit.create(SCHEMA)
    for v in range(1, versions):
        kit.commit([kit.write_parquet(data(10 * v, 2))])
    return kit


ENGINES: dict[str, Callable[[lq.Scan], object]] = {
    "arrow": lambda s: s.to_arrow(),
    "arrow_reader": lambda s: s.to_arrow_reader().read_all(),
    "duckdb": lambda s: s.to_duckdb().to_arrow_table(),
    "polars": lambda s: s.to_polars().collect(),
}


# ---------------------------------------------------------------------------------------------
# no table
# ---------------------------------------------------------------------------------------------


def test_missing_table_directory(tmp_path: Path) -> None:
    where = tmp_path / "does-not-exist"
    with pytest.raises(lq.TableNotFoundError) as info:
        lq.DeltaTable(str(where)).snapshot()
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, lq.LakeQueryError)
    assert str(where) in str(info.value)


def test_directory_without_delta_log(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x.parquet").write_bytes(b"PAR1")
    with pytest.raises(lq.TableNotFoundError):
        lq.DeltaTable(str(tmp_path / "t")).snapshot()


def test_empty_delta_log(tmp_path: Path) -> None:
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    table = lq.DeltaTable(str(tmp_path / "t"))
    with pytest.raises(lq.TableNotFoundError) as info:
        table.snapshot()
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(lq.TableNotFoundError):
        table.history()


def test_delta_log_with_only_stray_files(tmp_path: Path) -> None:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / ".00000000000000000000.json.crc").write_bytes(b"crc")
    (log / "_last_checkpoint").write_text('{"version": 3, "size": 4}')
    (log / "00000000000000000000.json.tmp").write_text("{}")
    with pytest.raises(lq.TableNotFoundError):
        lq.DeltaTable(str(tmp_path / "t")).snapshot()


# ---------------------------------------------------------------------------------------------
# broken logs
# ---------------------------------------------------------------------------------------------


def test_commit_gap_names_the_missing_commit(tmp_path: Path) -> None:
    kit = small_table(tmp_path / "t", versions=4)
    kit.commit_path(2).unlink()
    table = lq.DeltaTable(kit.uri)
    with pytest.raises(lq.CorruptLogError) as info:
        table.snapshot()
    assert "00000000000000000002.json" in str(info.value)
    with pytest.raises(lq.CorruptLogError) as info:
        table.snapshot(version=3)
    assert "00000000000000000002.json" in str(info.value)
    # versions before the gap are intact
    assert table.snapshot(version=1).version == 1
    assert table.snapshot(version=1).scan().to_arrow().num_rows == 2


@pytest.mark.parametrize(
    "content",
    [
        "truncated-line",
        "not-json",
        "binary-garbage",
        "truncated-middle-line",
    ],
)
def test_garbled_commit_names_the_file(tmp_path: Path, content: str) -> None:
    kit = small_table(tmp_path / "t", versions=2)
    add = json.dumps(kit.write_parquet(data(100, 1)))
    text = {
        "truncated-line": add[: len(add) // 2],
        "not-json": "this is not a delta commit\n",
        "binary-garbage": "\x00\x01\x02{\x7f",
        "truncated-middle-line": add[: len(add) // 2] + "\n" + add + "\n",
    }[content]
    kit.write_commit_text(2, text)
    table = lq.DeltaTable(kit.uri)
    with pytest.raises(lq.CorruptLogError) as info:
        table.snapshot()
    assert "00000000000000000002.json" in str(info.value)
    assert info.value.path.endswith("00000000000000000002.json")
    assert table.snapshot(version=1).version == 1


def test_log_without_protocol_is_corrupt(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA)
    lines = kit.commit_path(0).read_text().splitlines()
    kit.write_commit_text(0, "\n".join(x for x in lines if '"protocol"' not in x) + "\n")
    with pytest.raises(lq.CorruptLogError):
        lq.DeltaTable(kit.uri).snapshot()


# ---------------------------------------------------------------------------------------------
# protocol
# ---------------------------------------------------------------------------------------------


def test_unknown_reader_feature_is_named(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(
        SCHEMA,
        protocol=protocol_action(
            3, 7, ["deletionVectors", "quantumEntanglement"], ["quantumEntanglement"]
        ),
    )
    with pytest.raises(lq.UnsupportedFeatureError) as info:
        lq.DeltaTable(kit.uri).snapshot()
    assert info.value.feature == "quantumEntanglement"
    assert "quantumEntanglement" in str(info.value)
    assert isinstance(info.value, NotImplementedError)


def test_protocol_upgrade_to_unknown_feature_blocks_only_later_versions(tmp_path: Path) -> None:
    kit = small_table(tmp_path / "t", versions=2)
    kit.commit([protocol_action(3, 7, ["quantumEntanglement"], ["quantumEntanglement"])])
    table = lq.DeltaTable(kit.uri)
    with pytest.raises(lq.UnsupportedFeatureError, match="quantumEntanglement"):
        table.snapshot()
    assert table.snapshot(version=1).scan().to_arrow().num_rows == 2


def test_unknown_reader_version_is_refused(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA, protocol=protocol_action(4, 7, [], []))
    with pytest.raises(lq.UnsupportedFeatureError, match="4"):
        lq.DeltaTable(kit.uri).snapshot()


def test_unknown_writer_only_feature_does_not_block_reads(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA, protocol=protocol_action(3, 7, [], ["someFutureWriterFeature"]))
    kit.commit([kit.write_parquet(data(0, 3))])
    assert lq.DeltaTable(kit.uri).snapshot().scan().to_arrow().num_rows == 3


# ---------------------------------------------------------------------------------------------
# predicates and columns
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flt",
    ["nope > 1", "id > 1 AND nope = 'x'", "NOT (missing IS NULL)", "id >", "id = = 3", "(id > 1"],
)
def test_bad_filter_raises_predicate_error(tmp_path: Path, flt: str) -> None:
    kit = small_table(tmp_path / "t")
    snap = lq.DeltaTable(kit.uri).snapshot()
    with pytest.raises(lq.PredicateError) as info:
        snap.scan(filter=flt).to_arrow()
    assert isinstance(info.value, ValueError)


def test_unknown_column_in_filter_is_named(tmp_path: Path) -> None:
    kit = small_table(tmp_path / "t")
    snap = lq.DeltaTable(kit.uri).snapshot()
    with pytest.raises(lq.PredicateError, match="nope"):
        snap.scan(filter="nope > 1")


def test_unknown_selected_column(tmp_path: Path) -> None:
    kit = small_table(tmp_path / "t")
    snap = lq.DeltaTable(kit.uri).snapshot()
    with pytest.raises(lq.PredicateError, match="nope"):
        snap.scan(columns=["id", "nope"]).to_arrow()


# ---------------------------------------------------------------------------------------------
# paths escaping the table root (absolute locations on the same storage are read: digest
# §4.3, shallow clones; see lakequery/protocol/file_locations.py for the rule)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("../x.parquet", "segment leaves the table root"),
        ("a/../../x.parquet", "segment leaves the table root"),
        ("%2E%2E/x.parquet", "segment leaves the table root"),
        ("ROOT/../x.parquet", "segment leaves the table root"),  # absolute, through ..
        ("file://ROOT/../x.parquet", "segment leaves the table root"),
        ("s3://other-bucket/x.parquet", "must be on the same storage"),
        ("http://host/x.parquet", "must be on the same storage"),
        ("file://otherhost/x.parquet", "must be on the same storage"),
        ("memory://elsewhere/x.parquet", "must be on the same storage"),
    ],
)
def test_path_escaping_the_root_is_refused(tmp_path: Path, bad: str, reason: str) -> None:
    kit = small_table(tmp_path / "t", versions=2)
    # the escape would land on a real Parquet file: refusing is the only thing that stops it
    (tmp_path / "x.parquet").write_bytes(next((tmp_path / "t").glob("*.parquet")).read_bytes())
    bad = bad.replace("ROOT", str(tmp_path / "t"))
    add = kit.write_parquet(data(50, 1))
    add["add"]["path"] = bad
    kit.commit([add])
    table = lq.DeltaTable(kit.uri)
    with pytest.raises(lq.InvalidPathError, match=reason) as info:
        table.snapshot().scan().to_arrow()
    assert isinstance(info.value, ValueError)
    assert info.value.path.endswith("x.parquet")
    assert table.snapshot(version=1).scan().to_arrow().num_rows == 2


@pytest.mark.parametrize(
    "spelling", ["{p}", "file://{p}", "file:{p}", "file://localhost{p}", "SIBLING"]
)
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_absolute_path_outside_the_root_is_read(tmp_path: Path, spelling: str, engine: str) -> None:
    kit = small_table(tmp_path / "t", versions=2)
    add = kit.write_parquet(data(50, 3))
    inside = tmp_path / "t" / add["add"]["path"]
    # SIBLING shares the root as a string prefix, but is another directory
    outside = tmp_path / ("t2" if spelling == "SIBLING" else "elsewhere") / "x y.parquet"
    outside.parent.mkdir()
    inside.rename(outside)
    add["add"]["path"] = spelling.replace("SIBLING", "{p}").format(p=outside).replace(" ", "%20")
    kit.commit([add])
    snap = lq.DeltaTable(kit.uri).snapshot()
    got = pa.table(ENGINES[engine](snap.scan()))
    assert sorted(got.column("id").to_pylist()) == [10, 11, 50, 51, 52]
    key = [p for p in snap.files().column("path").to_pylist() if "x y" in p]
    assert key == [spelling.replace("SIBLING", "{p}").format(p=outside)]


# ---------------------------------------------------------------------------------------------
# versions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 100, -1])
def test_version_out_of_range(tmp_path: Path, version: int) -> None:
    kit = small_table(tmp_path / "t", versions=3)
    with pytest.raises(lq.VersionNotFoundError) as info:
        lq.DeltaTable(kit.uri).snapshot(version=version)
    assert isinstance(info.value, LookupError)
    assert str(version) in str(info.value)


# ---------------------------------------------------------------------------------------------
# storage: a data file that vanished
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_missing_data_file_is_a_storage_error(tmp_path: Path, engine: str) -> None:
    kit = small_table(tmp_path / "t", versions=3)
    victim = sorted((tmp_path / "t").glob("*.parquet"))[0]
    victim.unlink()
    scan = lq.DeltaTable(kit.uri).snapshot().scan()
    with pytest.raises(lq.StorageError) as info:
        ENGINES[engine](scan)
    assert isinstance(info.value, FileNotFoundError)
    assert victim.name in str(info.value)


# ---------------------------------------------------------------------------------------------
# deletion vectors (a real Spark table: v2 has a DV deleting 4 of 5 rows)
# ---------------------------------------------------------------------------------------------


def _writable_copy(dst: Path) -> Path:
    shutil.copytree(DV_TABLE, dst)
    for dirpath, _, filenames in os.walk(dst):
        os.chmod(dirpath, stat.S_IRWXU)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), stat.S_IRUSR | stat.S_IWUSR)
    return dst


def _flip(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))


def _corrupt(root: Path, how: str) -> None:
    dv = root / DV_FILE
    if how == "crc":
        _flip(dv, len(dv.read_bytes()) - 2)  # inside the trailing CRC-32
    elif how == "payload":
        _flip(dv, 20)  # inside the bitmap: the CRC no longer matches
    elif how == "cardinality":
        commit = root / "_delta_log" / "00000000000000000002.json"
        commit.write_text(commit.read_text().replace('"cardinality":4', '"cardinality":3'))
    elif how == "size":
        commit = root / "_delta_log" / "00000000000000000002.json"
        commit.write_text(commit.read_text().replace('"sizeInBytes":40', '"sizeInBytes":36'))
    elif how == "missing":
        dv.unlink()
    elif how == "truncated":
        dv.write_bytes(dv.read_bytes()[:20])
    else:  # pragma: no cover
        raise AssertionError(how)


def test_dv_table_copy_reads_before_corruption(tmp_path: Path) -> None:
    root = _writable_copy(tmp_path / "dv")
    snap = lq.DeltaTable(str(root)).snapshot()
    for engine, read in ENGINES.items():
        result = read(snap.scan())
        n = result.num_rows if hasattr(result, "num_rows") else result.height
        assert n == 1, engine


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("how", ["crc", "payload", "cardinality", "size", "missing", "truncated"])
def test_bad_deletion_vector_names_the_data_file(tmp_path: Path, how: str, engine: str) -> None:
    root = _writable_copy(tmp_path / f"dv-{how}-{engine}")
    _corrupt(root, how)
    table = lq.DeltaTable(str(root))
    with pytest.raises(lq.DeletionVectorError) as info:
        ENGINES[engine](table.snapshot().scan())
    assert DV_DATA_FILE in str(info.value)
    assert DV_DATA_FILE in info.value.data_file
    # the version before the DELETE has no DV and still reads
    assert table.snapshot(version=1).scan().to_arrow().num_rows == 5


def test_errors_pickle_with_their_fields() -> None:
    import pickle

    import lakequery as lq

    err = lq.SchemaMismatchError("a", "long", "string", "detail")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is lq.SchemaMismatchError
    assert (back.column, back.expected, back.found) == ("a", "long", "string")
    assert str(back) == str(err)
    conflict = lq.ConcurrentAppendError("memory://t", 3, 4, "why")
    again = pickle.loads(pickle.dumps(conflict))
    assert isinstance(again, lq.CommitConflictError)
    assert (again.read_version, again.winning_version, str(again)) == (3, 4, str(conflict))


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_missing_data_file_on_s3_names_the_file(
    s3_table_uri: str, s3_storage_options: dict[str, Any], engine: str
) -> None:
    import pyarrow as pa
    import s3fs

    for part in range(2):
        lq.write(
            s3_table_uri,
            pa.table({"x": [part, part + 10]}),
            mode="append",
            storage_options=s3_storage_options,
        )
    fs = s3fs.S3FileSystem(
        key=s3_storage_options["key"],
        secret=s3_storage_options["secret"],
        endpoint_url=s3_storage_options["endpoint_url"],
        client_kwargs=s3_storage_options["client_kwargs"],
    )
    victim = sorted(p for p in fs.find(s3_table_uri[5:]) if p.endswith(".parquet"))[0]
    fs.rm(victim)
    scan = lq.DeltaTable(s3_table_uri, storage_options=s3_storage_options).snapshot().scan()
    # The Arrow engines read inside lakequery: a StorageError. DuckDB relations and Polars
    # LazyFrames run in the caller's code, where object stores open files lazily: unless
    # planning read that file's footer (then a StorageError), the engine's own not-found
    # error names the file (ARCHITECTURE.md, "Storage").
    import duckdb

    expected: tuple[type[Exception], ...] = {
        "duckdb": (lq.StorageError, duckdb.IOException),
        "polars": (lq.StorageError, FileNotFoundError),
    }.get(engine, (lq.StorageError,))
    with pytest.raises(expected) as info:
        ENGINES[engine](scan)
    assert isinstance(info.value, (FileNotFoundError, duckdb.IOException))
    assert victim.rsplit("/", 1)[-1] in str(info.value)


def test_a_corrupt_commit_on_s3_is_named_by_its_public_location(
    s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    """DuckDB names objects by lakequery's private protocol (``lqs3<digest>://``); the
    error shows the ``s3://`` location the user knows."""
    import pyarrow as pa
    import s3fs

    lq.write(s3_table_uri, pa.table({"x": [1]}), storage_options=s3_storage_options)
    fs = s3fs.S3FileSystem(
        key=s3_storage_options["key"],
        secret=s3_storage_options["secret"],
        endpoint_url=s3_storage_options["endpoint_url"],
        client_kwargs=s3_storage_options["client_kwargs"],
    )
    fs.pipe(s3_table_uri[5:] + "/_delta_log/00000000000000000001.json", b'{"add": {nope\n')
    with pytest.raises(lq.CorruptLogError) as info:
        lq.DeltaTable(s3_table_uri, storage_options=s3_storage_options).snapshot()
    assert "00000000000000000001.json" in str(info.value)
    assert "lqs3" not in str(info.value)


def test_a_column_listed_twice(tmp_path: Path) -> None:
    # the engines disagreed: DuckDB returned it twice, pyarrow and Polars raised their own
    kit = small_table(tmp_path / "t")
    snap = lq.DeltaTable(kit.uri).snapshot()
    with pytest.raises(lq.PredicateError, match="invalid column 'id': listed twice"):
        snap.scan(columns=["id", "ID"])
