"""Hostile inputs: mutated commits, checkpoints, ``_last_checkpoint``, DV files and DV
descriptors, partition values and paths.

The promise under test (issue 18): every input gives the correct rows or a
:class:`~lakequery.LakeQueryError` subclass, never wrong rows, another exception or a
hang. "Correct" has two oracles. A mutation that a reader could not tell from a genuine
table (a flipped digit in a statistic, another partition value) has no single right
answer from the bytes alone, so there the rows must equal the rows the independent
reader, ``deltalake``, returns for the same bytes when it reads them; where the format
carries a checksum or a count (DV files' CRC, DV cardinality, ``_last_checkpoint``'s
size and checksum, commit numbering) the rows must be the table's true rows or an error.

Seeds are fixed (``derandomize``): the same cases run every time. ``LAKEQUERY_SOAK=1``
runs ten times as many.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakequery as lq

EXAMPLES = 40 * (10 if os.environ.get("LAKEQUERY_SOAK") else 1)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: counted per parser, printed by the figures test for RELIABILITY.md
CASES: dict[str, int] = {}
HANG_SECONDS = 30


class Hang(Exception):
    pass


@contextmanager
def no_hang() -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"a read took longer than {HANG_SECONDS}s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(HANG_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    cols = sorted(table.column_names)
    return sorted(
        zip(*(table.column(c).to_pylist() for c in cols), strict=True),
        key=repr,
    )


def lakequery_rows(root: Path) -> list[tuple[Any, ...]] | lq.LakeQueryError:
    """The rows lakequery reads (DuckDB and Arrow engines agree), or its error."""
    try:
        with no_hang():
            scan = lq.DeltaTable(str(root)).snapshot().scan()
            via_arrow = rows_of(scan.to_arrow())
            via_duckdb = rows_of(scan.to_duckdb().to_arrow_table())
    except lq.LakeQueryError as exc:
        return exc
    assert via_arrow == via_duckdb, "engines disagree on the same snapshot"
    return via_arrow


def deltalake_rows(root: Path) -> list[tuple[Any, ...]] | None:
    """The rows the independent reader reads, or None when it refuses or fails."""
    import deltalake

    try:
        with no_hang():
            dt = deltalake.DeltaTable(str(root))
            # QueryBuilder applies deletion vectors (the dataset API refuses them)
            query = deltalake.QueryBuilder().register("t", dt)
            return rows_of(pa.table(query.execute("SELECT * FROM t")))
    except Hang:
        raise
    except Exception:
        return None


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[Any, ...]]]:
    """A table with partitions (int, string), stats, DVs, a checkpoint at version 2
    and one commit after it; and its true rows."""
    import datetime as dt

    root = tmp_path_factory.mktemp("hostile") / "t"
    uri = str(root)
    n = 3000  # DVs over ~1000-row files are big enough to be written to a file, not inline
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "p": [i % 3 for i in range(n)],
            "s": [["a", "b c", "d/e"][i % 3] for i in range(n)],
            "d": [dt.date(2026, 1, 1 + i % 2) for i in range(n)],
            "v": [float(i) / 7 for i in range(n)],
        }
    )
    config = {"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "1000"}
    lq.write(uri, data.slice(0, 1500), partition_by=["p", "s"], configuration=config)
    lq.write(uri, data.slice(1500, 1000), mode="append")
    lq.DeltaTable(uri).delete("id % 5 = 0 AND id < 2400 OR id = 2")  # file DVs and inline
    lq.DeltaTable(uri).checkpoint()
    lq.write(uri, data.slice(2500, 500), mode="append")
    truth = lakequery_rows(root)
    assert not isinstance(truth, lq.LakeQueryError)
    assert len(truth) == 3000 - 480 - 1
    assert deltalake_rows(root) == truth
    return root, truth


def fresh_copy(root: Path, name: str) -> Path:
    target = root.parent / "cases" / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(root, target)
    return target


def check(
    case: Path,
    truth: list[tuple[Any, ...]],
    parser: str,
    *,
    checked: bool,
) -> None:
    """The contract. ``checked``: the format can detect this mutation, so the only
    acceptable outcomes are the true rows or a LakeQueryError."""
    CASES[parser] = CASES.get(parser, 0) + 1
    got = lakequery_rows(case)
    if isinstance(got, lq.LakeQueryError):
        assert str(got), "an error must say what failed"
        return
    if got == truth:
        return
    assert not checked, f"{parser}: wrong rows from a mutation the format detects"
    reference = deltalake_rows(case)
    if reference is not None:
        reference = empty_partition_strings_as_null(reference)
    assert reference is not None and got == reference, (
        f"{parser}: lakequery returned rows that differ from the table's and deltalake "
        f"{'refused the input' if reference is None else 'read other rows'}"
    )


#: Position of the string partition column ``s`` in :func:`rows_of`'s sorted columns.
_S_COLUMN = sorted(["id", "p", "s", "d", "v"]).index("s")


def empty_partition_strings_as_null(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``deltalake``'s rows with an empty string partition value read as NULL, as the
    protocol says (digest: "an empty string means null" for partition values) and
    lakequery reads it; deltalake keeps the empty string."""
    fixed = [
        tuple(None if i == _S_COLUMN and v == "" else v for i, v in enumerate(row)) for row in rows
    ]
    return sorted(fixed, key=repr)


def log_files(root: Path, suffix: str) -> list[Path]:
    return sorted(p for p in (root / "_delta_log").iterdir() if p.name.endswith(suffix))


# --------------------------------------------------------------------------------------
# byte-level mutations
# --------------------------------------------------------------------------------------

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 64)),
)


def mutate_bytes(data: bytes, how: tuple[str, int, int]) -> bytes:
    kind, at, arg = how
    if not data:
        return data
    i = at % len(data)
    if kind == "flip":
        return data[:i] + bytes([data[i] ^ arg]) + data[i + 1 :]
    if kind == "truncate":
        return data[:i]
    if kind == "insert":
        return data[:i] + bytes([arg]) + data[i:]
    return data[:i] + data[i + arg :]


@FUZZ
@given(how=mutation, which=st.integers(0, 10))
def test_commit_json_bytes(genuine: tuple[Path, Any], how: Any, which: int) -> None:
    root, truth = genuine
    case = fresh_copy(root, "commit-bytes")
    commits = log_files(case, ".json")
    target = commits[which % len(commits)]
    target.write_bytes(mutate_bytes(target.read_bytes(), how))
    check(case, truth, "commit JSON (bytes)", checked=False)


@FUZZ
@given(how=mutation)
def test_checkpoint_parquet_bytes(genuine: tuple[Path, Any], how: Any) -> None:
    root, truth = genuine
    case = fresh_copy(root, "checkpoint-bytes")
    (target,) = log_files(case, ".checkpoint.parquet")
    target.write_bytes(mutate_bytes(target.read_bytes(), how))
    check(case, truth, "checkpoint Parquet (bytes)", checked=False)


@FUZZ
@given(how=mutation)
def test_last_checkpoint_bytes(genuine: tuple[Path, Any], how: Any) -> None:
    root, truth = genuine
    case = fresh_copy(root, "last-checkpoint")
    target = case / "_delta_log" / "_last_checkpoint"
    target.write_bytes(mutate_bytes(target.read_bytes(), how))
    # the hint only points at a checkpoint; any reading of it must give the true rows
    check(case, truth, "_last_checkpoint", checked=True)


def dv_files(root: Path) -> list[Path]:
    return sorted(root.rglob("deletion_vector_*.bin"))


@FUZZ
@given(how=mutation)
def test_dv_file_bytes(genuine: tuple[Path, Any], how: Any) -> None:
    root, truth = genuine
    case = fresh_copy(root, "dv-bytes")
    files = dv_files(case)
    assert files, "the genuine table has an on-disk DV"
    target = files[0]
    before = target.read_bytes()
    after = mutate_bytes(before, how)
    target.write_bytes(after)
    # every DV byte is covered by the size in the descriptor, the CRC or the cardinality
    check(case, truth, "DV file", checked=True)


# --------------------------------------------------------------------------------------
# structure-aware mutations of actions
# --------------------------------------------------------------------------------------

json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)


def edit_actions(
    root: Path, pick: int, edit: Callable[[dict[str, Any]], None], *, kind: str = "add"
) -> bool:
    """Applies ``edit`` to the ``pick``-th action of ``kind`` in the commits after the
    checkpoint (where the reader sees them as JSON)."""
    found: list[tuple[Path, int]] = []
    commits = log_files(root, ".json")
    parsed = {p: [json.loads(x) for x in p.read_text().splitlines() if x.strip()] for p in commits}
    for path, actions in parsed.items():
        found += [(path, i) for i, a in enumerate(actions) if kind in a]
    if not found:
        return False
    path, index = found[pick % len(found)]
    edit(parsed[path][index][kind])
    path.write_text("\n".join(json.dumps(a) for a in parsed[path]) + "\n")
    return True


ADD_FIELDS = ["path", "size", "partitionValues", "stats", "modificationTime", "dataChange"]


@FUZZ
@given(
    field=st.sampled_from(ADD_FIELDS),
    value=st.one_of(json_scalar, st.dictionaries(st.text(max_size=3), json_scalar, max_size=3)),
    pick=st.integers(0, 20),
    drop=st.booleans(),
)
def test_add_action_fields(
    genuine: tuple[Path, Any], field: str, value: Any, pick: int, drop: bool
) -> None:
    root, truth = genuine
    case = fresh_copy(root, "add-fields")

    def edit(add: dict[str, Any]) -> None:
        if drop:
            add.pop(field, None)
        else:
            add[field] = value

    assert edit_actions(case, pick, edit)
    check(case, truth, "add action fields", checked=False)


partition_text = st.one_of(
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["0", "1", "2", "-1", "9999999999999999999999", "1e3", " 1", "2026-01-01"]),
)


@FUZZ
@given(column=st.sampled_from(["p", "s", "x"]), value=partition_text, pick=st.integers(0, 20))
def test_partition_values(genuine: tuple[Path, Any], column: str, value: Any, pick: int) -> None:
    root, truth = genuine
    case = fresh_copy(root, "partition-values")
    assert edit_actions(case, pick, lambda add: add["partitionValues"].__setitem__(column, value))
    if column == "s":  # a string needs no parsing: the right rows are known exactly
        check_string_partition_edit(case, truth, value)
        return
    check(case, truth, "partition values", checked=False)


def check_string_partition_edit(case: Path, truth: list[tuple[Any, ...]], value: str) -> None:
    """After one add's string partition value ``s`` was set to ``value``: the table's
    rows (ids are unique), the edited file's now with ``s`` = ``value`` (NULL for an empty
    string, the protocol's rule), or a LakeQueryError. Not deltalake's rows: it decodes
    some characters outside the BMP in partition values differently (it read U+20000,
    written as a JSON surrogate pair, as U+10000)."""
    CASES["partition values"] = CASES.get("partition values", 0) + 1
    got = lakequery_rows(case)
    if isinstance(got, lq.LakeQueryError):
        assert str(got), "an error must say what failed"
        return
    expected = None if value == "" else value
    id_column = sorted(["id", "p", "s", "d", "v"]).index("id")
    before = {row[id_column]: row for row in truth}
    after = {row[id_column]: row for row in got}
    assert after.keys() == before.keys(), "rows appeared or went missing"
    for key, row in after.items():
        old = before[key]
        assert row[:_S_COLUMN] + row[_S_COLUMN + 1 :] == old[:_S_COLUMN] + old[_S_COLUMN + 1 :]
        assert row[_S_COLUMN] in (old[_S_COLUMN], expected), (key, row, expected)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("path", "", lq.InvalidPathError),  # was PyArrow's IsADirectoryError
        ("path", "p=0/", lq.InvalidPathError),
        ("path", None, lq.CorruptLogError),  # was left out of replay: its rows missing
        ("partitionValues", None, lq.CorruptLogError),  # was read with NULL partitions
        ("p", "E", lq.CorruptLogError),  # was DuckDB's conversion error as an OSError
        ("p", "0E0", lq.CorruptLogError),  # was read as p = 0 (deltalake refuses it)
        ("p", " 1", lq.CorruptLogError),
    ],
)
def test_soak_findings(
    genuine: tuple[Path, Any], field: str, value: str | None, error: type
) -> None:
    """Cases the soak (400 per parser) found, kept at every run: a path naming no file and
    integer partition values DuckDB's cast accepts or rejects unlike the protocol."""
    root, truth = genuine
    case = fresh_copy(root, "soak-findings")
    if field in ("path", "partitionValues"):
        assert edit_actions(case, 12, lambda add: add.__setitem__(field, value))
    else:
        assert edit_actions(case, 12, lambda add: add["partitionValues"].__setitem__(field, value))
    with pytest.raises(error) as info:
        lq.DeltaTable(str(case)).snapshot().scan().to_arrow()
    assert str(case) in str(info.value) or repr(value) in str(info.value)
    check(case, truth, "soak findings", checked=False)


DV_FIELDS = ["storageType", "pathOrInlineDv", "offset", "sizeInBytes", "cardinality"]


@FUZZ
@given(field=st.sampled_from(DV_FIELDS), value=json_scalar, pick=st.integers(0, 20))
def test_dv_descriptor_fields(genuine: tuple[Path, Any], field: str, value: Any, pick: int) -> None:
    root, truth = genuine
    case = fresh_copy(root, "dv-descriptor")

    def edit(add: dict[str, Any]) -> None:
        add["deletionVector"][field] = value

    # the DELETE's commit is before the checkpoint: move its DV adds into a new commit
    # that re-adds the same files with the mutated descriptors
    snap = lq.DeltaTable(str(case)).snapshot()
    files = snap.files().filter(pa.compute.is_valid(snap.files().column("deletion_vector")))
    assert files.num_rows > 0
    row = files.slice(pick % files.num_rows, 1).to_pylist()[0]
    dv = {k: v for k, v in row["deletion_vector"].items() if v is not None}
    add = {
        "path": row["path"],
        "size": row["size"],
        "partitionValues": {
            k: (None if v is None else str(v)) for k, v in row["partition_values"].items()
        },
        "modificationTime": row["modification_time"],
        "dataChange": False,
        "stats": row["stats"],
        "deletionVector": dv,
    }
    edit(add)
    remove = {
        "path": row["path"],
        "deletionTimestamp": row["modification_time"],
        "dataChange": False,
        "deletionVector": dict(row["deletion_vector"]),
    }
    version = snap.version + 1
    (case / "_delta_log" / f"{version:020d}.json").write_text(
        json.dumps({"remove": remove}) + "\n" + json.dumps({"add": add}) + "\n"
    )
    # a descriptor names bytes, a size and a count: all are checked against the DV file.
    # An absent offset has a protocol meaning (the record at the file's start, digest
    # §11.2 / §19), so with the offset changed the independent reader is the oracle.
    check(case, truth, "DV descriptor", checked=field != "offset")


def test_fuzz_figures(genuine: tuple[Path, Any]) -> None:
    """Prints how many cases each parser saw (for RELIABILITY.md); runs last."""
    print("hostile-input cases per parser:", json.dumps(CASES, sort_keys=True))
    assert sum(CASES.values()) > 0 or os.environ.get("PYTEST_XDIST_WORKER") is not None


@pytest.mark.parametrize(
    ("version", "damage"),
    [
        (2, lambda a: {"remove": [a["remove"]]} if "remove" in a else a),
        (2, lambda a: {"remove": "oops"} if "remove" in a else a),
        (1, lambda a: {"add": 7} if "add" in a else a),
        (2, lambda a: [a] if "remove" in a else a),
        (1, lambda a: None if "add" in a else a),
    ],
    ids=["remove-as-list", "remove-as-text", "add-as-number", "line-as-list", "line-null"],
)
def test_a_misshapen_file_action_is_refused_not_skipped(
    tmp_path: Path, version: int, damage: Callable[[Any], Any]
) -> None:
    """The JSON parse makes a value of the wrong type NULL: a damaged ``remove`` read as
    nothing would bring its deleted rows back, a damaged ``add`` would drop its rows.
    deltalake refuses such a line, and so must lakequery (CorruptLogError naming the
    commit)."""
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1, 2]}), configuration={"delta.enableDeletionVectors": "false"})
    lq.write(uri, pa.table({"id": [3]}), mode="append")
    lq.DeltaTable(uri).delete("id = 3")  # version 2: a remove of version 1's file
    commit = Path(uri) / "_delta_log" / f"{version:020d}.json"
    lines = [json.loads(x) for x in commit.read_text().splitlines() if x.strip()]
    changed = [damage(a) for a in lines]
    assert changed != lines
    commit.write_text("\n".join(json.dumps(a) for a in changed) + "\n")
    got = lakequery_rows(Path(uri))
    assert isinstance(got, lq.CorruptLogError), got
    assert commit.name in str(got)
    # streams read the commits with the change feed's parse: refused alike
    with pytest.raises(lq.CorruptLogError, match=commit.name):
        list(lq.DeltaTable(uri).stream(starting_version=1))
