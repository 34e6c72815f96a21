"""Symbolic links on local disk (issue 18, item 4): a table's own file, DV file, log file,
``_delta_log`` or partition directory that is a link out of the table root is refused
with :class:`~lakequery.InvalidPathError` naming the link, by every engine; links that stay
inside the root are followed; writers never write through a link out of the root and
VACUUM never deletes outside it. The rule: :mod:`lakequery.storage.local_links`.

Every link here points at the very bytes the table had (the file was moved out and linked
back), so following it would return the right rows: refusing is the only thing that shows
the check ran.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakequery as lq
from lakequery.log_update import forget

ENGINES: dict[str, Callable[[lq.Scan], pa.Table]] = {
    "arrow": lambda s: s.to_arrow(),
    "duckdb": lambda s: s.to_duckdb().to_arrow_table(),
    "polars": lambda s: s.to_polars().collect().to_arrow(),
}
#: the table's file (relative to the root) each kind of link replaces
KINDS = (
    "data file",
    "DV file",
    "commit",
    "checkpoint",
    "_last_checkpoint",
    "_delta_log",
    "partition directory",
)


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def build(root: Path) -> list[int]:
    """A table partitioned by ``p`` with on-disk DVs, a checkpoint and a commit after it;
    returns its ids."""
    n = 2000
    data = pa.table({"id": pa.array(range(n), pa.int64()), "p": [i % 2 for i in range(n)]})
    uri = str(root)
    lq.write(uri, data, partition_by=["p"], configuration={"delta.enableDeletionVectors": "true"})
    lq.DeltaTable(uri).delete("id % 5 = 0")  # 200 positions per file: a DV file, not inline
    lq.DeltaTable(uri).checkpoint()
    lq.write(uri, data.slice(0, 10).set_column(0, "id", pa.array(range(n, n + 10))), mode="append")
    return [i for i in range(n + 10) if i >= n or i % 5]


def target_of(root: Path, kind: str) -> Path:
    log = root / "_delta_log"
    match kind:
        case "data file":
            return next((root / "p=0").glob("*.parquet"))
        case "DV file":
            return next(root.glob("deletion_vector_*.bin"))
        case "commit":
            return log / f"{2:020d}.json"
        case "checkpoint":
            return next(log.glob("*.checkpoint.parquet"))
        case "_last_checkpoint":
            return log / "_last_checkpoint"
        case "_delta_log":
            return log
        case "partition directory":
            return root / "p=1"
    raise AssertionError(kind)


def link_out(path: Path, outside: Path, *, relative: bool = False) -> Path:
    """Moves ``path`` into ``outside`` and links it back; returns the moved copy."""
    outside.mkdir(parents=True, exist_ok=True)
    moved = outside / path.name
    shutil.move(path, moved)
    target = os.path.relpath(moved, path.parent) if relative else str(moved)
    path.symlink_to(target, target_is_directory=moved.is_dir())
    return moved


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    root = tmp_path_factory.mktemp("links") / "t"
    return root, build(root)


def copy_of(genuine: tuple[Path, list[int]], tmp_path: Path) -> Path:
    root = tmp_path / "t"
    shutil.copytree(genuine[0], root, symlinks=True)
    return root


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("kind", KINDS)
def test_link_out_of_the_root_is_refused(
    genuine: tuple[Path, list[int]], tmp_path: Path, kind: str, engine: str, relative: bool
) -> None:
    root = copy_of(genuine, tmp_path)  # a new location: no snapshot of it is cached
    link = target_of(root, kind)
    moved = link_out(link, tmp_path / "outside", relative=relative)
    with pytest.raises(
        lq.InvalidPathError, match="symbolic link leads out of the table root"
    ) as info:
        ENGINES[engine](lq.DeltaTable(str(root)).snapshot().scan())
    assert info.value.path == str(link)
    assert str(moved) in str(info.value)  # and where it leads
    # put back as a plain file: the table reads again (the refusal was the link's)
    link.unlink()
    shutil.move(moved, link)
    assert ids(ENGINES[engine](lq.DeltaTable(str(root)).snapshot().scan())) == genuine[1]


@pytest.mark.parametrize("kind", ["data file", "DV file", "partition directory", "_delta_log"])
def test_links_inside_the_root_are_followed(
    genuine: tuple[Path, list[int]], tmp_path: Path, kind: str
) -> None:
    """A link to another place inside the root is followed (and a root reached through
    a link is the root: links are judged against the resolved root)."""
    root = copy_of(genuine, tmp_path)
    link_out(target_of(root, kind), root / "_kept", relative=True)
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    for uri in (root, alias):
        scan = lq.DeltaTable(str(uri)).snapshot().scan()
        for engine in ENGINES.values():
            assert ids(engine(scan)) == genuine[1]
    lq.write(str(alias), pa.table({"id": [-1], "p": [0]}), mode="append")
    assert ids(lq.DeltaTable(str(root)).snapshot().scan().to_arrow()) == [-1, *genuine[1]]


@pytest.fixture(params=["short", "long"])
def lists(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The directories of a table's files found as Python strings (a short list) or by
    Arrow kernels (a long one: every list counts as long here)."""
    if request.param == "long":
        monkeypatch.setattr("lakequery.arrow_kernels.FEW_ROWS", 0)
    return str(request.param)


@pytest.mark.parametrize("files", [3, 12])
def test_flat_tables_are_checked_by_listing_and_by_lstat(
    tmp_path: Path, files: int, lists: str
) -> None:
    """Many files per directory are checked by listing it, few with one lstat each
    (``FILES_PER_LISTING``): both find the link, neither refuses a stray one, whichever
    way the files' directories are found."""
    from lakequery.storage.local_links import FILES_PER_LISTING

    assert (files >= FILES_PER_LISTING) == (files == 12)
    root = tmp_path / "t"
    for i in range(files):
        lq.write(str(root), pa.table({"id": [i]}), mode="append")
    (tmp_path / "notes.txt").write_text("outside")
    (root / "notes.txt").symlink_to(tmp_path / "notes.txt")
    link = sorted(root.glob("*.parquet"))[files // 2]
    link_out(link, tmp_path / "outside")
    # the writes left this process's state of the table cached, checked before the link
    # was made (a load checks the files it brings in, an update the ones it adds): load
    # afresh, as another process would
    forget(lq.DeltaTable(str(root)).storage)
    with pytest.raises(lq.InvalidPathError, match="leads out") as info:
        lq.DeltaTable(str(root)).snapshot()
    assert info.value.path == str(link)
    link.unlink()  # a plain file again: the stray link alone is no reason to refuse
    shutil.copy(tmp_path / "outside" / link.name, link)
    assert ids(lq.DeltaTable(str(root)).snapshot().scan().to_arrow()) == list(range(files))


@pytest.mark.parametrize("levels", [1, 2])
def test_many_partition_directories_are_checked_in_their_parents_listing(
    tmp_path: Path, levels: int, lists: str
) -> None:
    """With one file per partition directory the files get one lstat each, and the
    directories, many under one parent, are seen in that parent's listing: a directory
    linked out is refused, one linked inside is followed, a stray linked directory is left
    alone."""
    from lakequery.storage.local_links import FILES_PER_LISTING

    n = FILES_PER_LISTING + 2
    cols = {"id": pa.array(range(2 * n), pa.int64()), "q": [i % n for i in range(2 * n)]}
    if levels == 2:
        cols["p"] = [i // n for i in range(2 * n)]
    base = tmp_path / "base"
    lq.write(str(base), pa.table(cols), partition_by=["p", "q"] if levels == 2 else ["q"])
    (tmp_path / "elsewhere").mkdir()
    expected = list(range(2 * n))

    def copy(name: str) -> tuple[Path, Path]:  # a new location: no snapshot of it cached
        root = tmp_path / name
        shutil.copytree(base, root, symlinks=True)
        parent = root / "p=1" if levels == 2 else root
        (parent / "q=stray").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
        return root, parent

    root, parent = copy("inside")
    link_out(parent / "q=3", root / "_kept", relative=True)
    assert ids(lq.DeltaTable(str(root)).snapshot().scan().to_arrow()) == expected
    root, parent = copy("outside")
    moved = link_out(parent / "q=5", tmp_path / "out")
    with pytest.raises(lq.InvalidPathError, match="leads out") as info:
        lq.DeltaTable(str(root)).snapshot()
    assert info.value.path == str(parent / "q=5")
    assert str(moved) in str(info.value)


def test_a_stray_link_nothing_refers_to_is_left_alone(
    genuine: tuple[Path, list[int]], tmp_path: Path
) -> None:
    root = copy_of(genuine, tmp_path)
    (tmp_path / "notes.txt").write_text("outside")
    (root / "p=0" / "notes.txt").symlink_to(tmp_path / "notes.txt")
    assert ids(lq.DeltaTable(str(root)).snapshot().scan().to_arrow()) == genuine[1]


def test_a_stray_link_named_like_a_dv_file_counts_as_one(
    genuine: tuple[Path, list[int]], tmp_path: Path
) -> None:
    root = copy_of(genuine, tmp_path)
    stray = root / "deletion_vector_00000000-0000-0000-0000-000000000000.bin"
    stray.symlink_to(next(root.glob("deletion_vector_*.bin")))  # inside: followed
    assert ids(lq.DeltaTable(str(root)).snapshot().scan().to_arrow()) == genuine[1]
    stray.unlink()
    (tmp_path / "dv.bin").write_bytes(b"x")
    stray.symlink_to(tmp_path / "dv.bin")
    with pytest.raises(lq.InvalidPathError, match="leads out") as info:
        lq.DeltaTable(str(root)).snapshot(version=1)
    assert info.value.path == str(stray)


def test_incremental_update_refuses_a_new_file_behind_a_link(
    genuine: tuple[Path, list[int]], tmp_path: Path
) -> None:
    root = copy_of(genuine, tmp_path)
    table = lq.DeltaTable(str(root))
    snap = table.snapshot()
    lq.write(str(root), pa.table({"id": [-1], "p": [7]}), mode="append")
    link_out(root / "p=7", tmp_path / "outside")
    with pytest.raises(lq.InvalidPathError, match="leads out") as info:
        snap.update()
    assert info.value.path == str(root / "p=7")
    with pytest.raises(lq.InvalidPathError):
        table.snapshot()


def test_spark_reader_file_list_refuses_a_link(
    genuine: tuple[Path, list[int]], tmp_path: Path
) -> None:
    """The Spark reader plans its file list from the same snapshot: the refusal comes
    before any Spark job (no session is touched, so none is needed to show it)."""
    from lakequery.spark.reading import read

    root = copy_of(genuine, tmp_path)
    link_out(target_of(root, "partition directory"), tmp_path / "outside")
    spark: Any = None  # read() loads the snapshot before it uses the session
    with pytest.raises(lq.InvalidPathError, match="leads out"):
        read(spark, str(root))


# --- writers and VACUUM ----------------------------------------------------------------------


def files_under(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_append_never_writes_through_a_partition_directory_link(
    genuine: tuple[Path, list[int]], tmp_path: Path
) -> None:
    root = copy_of(genuine, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "p=5").symlink_to(outside, target_is_directory=True)  # no file of the table there
    version = lq.DeltaTable(str(root)).snapshot().version
    with pytest.raises(lq.InvalidPathError, match="leads out") as info:
        lq.write(str(root), pa.table({"id": [-1, -2], "p": [5, 0]}), mode="append")
    assert info.value.path == str(root / "p=5")
    assert list(outside.iterdir()) == []
    assert lq.DeltaTable(str(root)).snapshot().version == version
    # the same rows into real directories commit
    lq.write(str(root), pa.table({"id": [-2], "p": [0]}), mode="append")
    assert ids(lq.DeltaTable(str(root)).snapshot().scan().to_arrow()) == [-2, *genuine[1]]


@pytest.mark.parametrize(
    "command",
    ["append", "delete", "checkpoint", "optimize", "vacuum", "cleanup_log"],
)
def test_commands_on_a_linked_out_log_change_nothing_outside(
    genuine: tuple[Path, list[int]], tmp_path: Path, command: str
) -> None:
    root = copy_of(genuine, tmp_path)
    outside = tmp_path / "outside"
    link_out(root / "_delta_log", outside)
    before = files_under(outside)
    table = lq.DeltaTable(str(root))
    run: dict[str, Callable[[], object]] = {
        "append": lambda: lq.write(str(root), pa.table({"id": [-1], "p": [0]}), mode="append"),
        "delete": lambda: table.delete("id = 1"),
        "checkpoint": table.checkpoint,
        "optimize": table.optimize,
        "vacuum": lambda: table.vacuum(retention_hours=0, enforce_retention=False, dry_run=False),
        "cleanup_log": lambda: table.cleanup_log(retention_hours=0),
    }
    with pytest.raises(lq.InvalidPathError, match="leads out"):
        run[command]()
    assert files_under(outside) == before


def test_vacuum_deletes_nothing_outside_the_root(
    genuine: tuple[Path, list[int]], tmp_path: Path
) -> None:
    """Links nothing refers to (a partition directory, a data file): VACUUM neither
    follows nor deletes them, and what they point at survives. (A stray link named like
    a DV file next to the table's DV files is refused instead: the log names DV files by
    an encoded UUID, so such a link counts as one of them.)"""
    root = copy_of(genuine, tmp_path)
    outside = tmp_path / "outside"
    (outside / "p=9").mkdir(parents=True)
    donor = next((root / "p=0").glob("*.parquet"))
    shutil.copy(donor, outside / "p=9" / "part-orphan.parquet")
    shutil.copy(donor, outside / "part-file.parquet")
    (root / "p=9").symlink_to(outside / "p=9", target_is_directory=True)
    (root / "p=0" / "part-linked.parquet").symlink_to(outside / "part-file.parquet")
    before = files_under(outside)
    table = lq.DeltaTable(str(root))
    table.delete("id < 100")  # removes files: VACUUM has something of its own to delete
    result = table.vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    assert result.files_deleted > 0
    assert files_under(outside) == before
    assert all(p.is_symlink() for p in (root / "p=9", root / "p=0" / "part-linked.parquet"))
    assert ids(table.snapshot().scan().to_arrow()) == [i for i in genuine[1] if i >= 100]


# --- change data feed and DV paths -----------------------------------------------------------


def change_feed_table(tmp_path: Path) -> tuple[Path, str]:
    """A 10-row table with the change feed on, whose version 1 (an UPDATE of 3 rows)
    wrote change files under ``_change_data``."""
    root = tmp_path / "t"
    uri = str(root)
    data = pa.table({"id": pa.array(range(10), pa.int64()), "p": [0] * 10})
    lq.write(uri, data, configuration={"delta.enableChangeDataFeed": "true"})
    lq.DeltaTable(uri).update("id < 3", set={"p": "1"})
    return root, uri


def test_change_feed_refuses_change_files_behind_a_link(tmp_path: Path) -> None:
    root, uri = change_feed_table(tmp_path)
    assert (root / "_change_data").is_dir()
    assert lq.DeltaTable(uri).changes(starting_version=1).to_arrow().num_rows == 6
    link_out(root / "_change_data", tmp_path / "outside")
    with pytest.raises(lq.InvalidPathError, match="leads out") as info:
        lq.DeltaTable(uri).changes(starting_version=1).to_arrow()
    assert info.value.path == str(root / "_change_data")


def test_change_feed_refuses_a_change_file_path_with_dotdot(tmp_path: Path) -> None:
    root, uri = change_feed_table(tmp_path)
    commit = root / "_delta_log" / f"{1:020d}.json"
    lines = [json.loads(line) for line in commit.read_text().splitlines()]
    for action in lines:
        if "cdc" in action:
            name = action["cdc"]["path"].rpartition("/")[2]
            shutil.copy(root / action["cdc"]["path"], tmp_path / name)
            action["cdc"]["path"] = f"_change_data/../../{name}"
    commit.write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    with pytest.raises(lq.InvalidPathError, match="segment leaves the table root"):
        lq.DeltaTable(uri).changes(starting_version=1).to_arrow()


@pytest.mark.parametrize(
    ("storage_type", "path", "reason"),
    [
        ("p", "deletion_vector_x.bin", "whose path is relative"),
        ("p", "ROOT/../dv.bin", "through a .. segment"),
        ("p", "file://ROOT/%2E%2E/dv.bin", "through a .. segment"),
        ("p", "s3://bucket/dv.bin", "outside the table's storage"),
        ("p", "http://host/dv.bin", "outside the table's storage"),
        ("u", "../../ZZZZZZZZZZZZZZZZZZZZ", "prefix leaves the table root"),
    ],
)
def test_dv_paths_escaping_the_root_are_refused(
    genuine: tuple[Path, list[int]], tmp_path: Path, storage_type: str, path: str, reason: str
) -> None:
    root = copy_of(genuine, tmp_path)
    commit = root / "_delta_log" / f"{2:020d}.json"  # written after the checkpoint
    lines = [json.loads(line) for line in commit.read_text().splitlines()]
    add = next(a["add"] for a in lines if "add" in a)
    add["deletionVector"] = {
        "storageType": storage_type,
        "pathOrInlineDv": path.replace("ROOT", str(root)),
        "offset": 1,
        "sizeInBytes": 34,
        "cardinality": 1,
    }
    commit.write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    with pytest.raises(lq.DeletionVectorError, match=reason) as info:
        lq.DeltaTable(str(root)).snapshot().scan().to_arrow()
    assert info.value.data_file == add["path"]


def test_the_check_tells_whether_it_found_every_file(tmp_path: Path) -> None:
    """``check_relative`` is True only when each file was ``lstat``'ed and found (what
    lets the engines skip their own stat of a long list): not for a missing file, nor for
    files checked by listing their directory."""
    from lakequery.storage.local_links import FILES_PER_LISTING, LinkGuard

    for d in ("a=1", "a=2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "f.parquet").write_bytes(b"x")
    guard = LinkGuard(str(tmp_path))
    assert guard.check_relative(pa.array(["a=1/f.parquet", "a=2/f.parquet"])) is True
    assert guard.check_relative(pa.array(["a=1/f.parquet", "a=3/f.parquet"])) is False
    (tmp_path / "a=2" / "g.parquet").symlink_to(tmp_path / "a=2" / "gone.parquet")
    assert guard.check_relative(pa.array(["a=1/f.parquet", "a=2/g.parquet"])) is False
    (tmp_path / "a=2" / "gone.parquet").write_bytes(b"x")  # a link inside the root, to a file
    assert guard.check_relative(pa.array(["a=1/f.parquet", "a=2/g.parquet"])) is True
    flat = [f"f{i}.parquet" for i in range(FILES_PER_LISTING)]
    for name in flat:
        (tmp_path / name).write_bytes(b"x")
    assert guard.check_relative(pa.array(flat)) is False  # listed, not looked at one by one


_SEGMENT = st.text(st.sampled_from([*"ab=.", "é"]), min_size=0, max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)),
        max_size=12,
    ),
    st.integers(0, 3),
)
def test_short_and_long_lists_find_the_same_directories(paths: list[str | None], cut: int) -> None:
    """Python strings (a short list) and Arrow kernels (a long one) give the same
    directories and the same distinct paths, for chunked and sliced input with nulls."""
    from lakequery import arrow_kernels
    from lakequery.storage.local_links import distinct_paths, parent_directories

    arr = pa.array(paths, pa.string())
    inputs = [arr, arr.slice(min(cut, len(paths))), pa.chunked_array([arr.slice(cut), arr])]
    for files in inputs:
        short = (parent_directories(files), distinct_paths(files))
        saved = arrow_kernels.FEW_ROWS
        arrow_kernels.FEW_ROWS = -1
        try:
            long = (parent_directories(files), distinct_paths(files))
        finally:
            arrow_kernels.FEW_ROWS = saved
        assert short[0] == long[0]
        assert sorted(short[1]) == sorted(long[1]) and len(set(short[1])) == len(short[1])
        expected = {p.rpartition("/")[0] for p in files.to_pylist() if p and "/" in p}
        assert short[0] == expected
