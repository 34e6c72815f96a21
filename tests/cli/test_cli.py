"""The `lakequery` command line driven as a subprocess, its JSON checked against the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakequery as lq


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "lakequery.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def run_json(*args: str) -> Any:
    return json.loads(run("--json", *args).stdout)


@pytest.fixture
def table(tmp_path: Path) -> str:
    uri = str(tmp_path / "events")
    data = pa.table(
        {
            "id": pa.array(range(40), pa.int64()),
            "g": [i % 4 for i in range(40)],
            "kind": [["click", "view", "buy"][i % 3] for i in range(40)],
        }
    )
    for part in range(4):
        lq.write(
            uri,
            data.slice(part * 10, 10),
            mode="append",
            partition_by=["g"],
            configuration={"delta.enableDeletionVectors": "true"},
        )
    return uri


def test_describe_matches_the_api(table: str) -> None:
    out = run_json("describe", table)
    snap = lq.DeltaTable(table).snapshot()
    assert out["version"] == snap.version == 3
    assert out["num_files"] == snap.num_files
    assert out["num_records"] == 40
    assert out["partition_columns"] == ["g"]
    assert "deletionVectors" in out["table_features"]
    detail = lq.DeltaTable(table).detail()
    assert out["size_in_bytes"] == detail.size_in_bytes and out["id"] == detail.id
    assert out["properties"]["delta.enableDeletionVectors"] == "true"
    assert [f["name"] for f in out["schema"]] == ["id", "g", "kind"]
    old = run_json("describe", table, "--version", "1")
    assert old["version"] == 1 and old["num_records"] == 20
    assert out["deletion_vector_share"] == 0.0
    lq.DeltaTable(table).delete("id >= 4")  # files left with a few rows keep a DV
    after = run_json("describe", table)
    hidden = after["rows_deleted_by_deletion_vectors"]
    assert after["num_records"] == 4 and hidden > after["num_records"]
    # the share of the rows the files hold (it was hidden / live, above 1 here)
    assert after["deletion_vector_share"] == pytest.approx(hidden / (hidden + 4))


def test_history_and_time_travel(table: str) -> None:
    out = run_json("history", table, "--limit", "2")
    api = lq.DeltaTable(table).history(limit=2)
    assert [e["version"] for e in out] == [e.version for e in api] == [3, 2]
    assert {e["operation"] for e in out} == {"WRITE"}


def test_files_shows_what_pruning_keeps(table: str) -> None:
    out = run_json("files", table, "--filter", "g = 2")
    plan = lq.DeltaTable(table).snapshot().scan(filter="g = 2").plan()
    assert out["kept_files"] == plan.num_files >= 1
    assert out["total_files"] == plan.total_files
    assert {f["g"] for f in out["files"]} == {2}
    assert all(json.loads(f["stats"])["numRecords"] == f["num_records"] for f in out["files"])
    human = run("files", table, "--filter", "g = 2").stdout
    assert f"{plan.num_files} of {plan.total_files} files kept by the filter" in human


def test_schema_head_and_sql(table: str, tmp_path: Path) -> None:
    schema = run_json("schema", table)
    assert [(f["name"], f["partition"]) for f in schema] == [
        ("id", False),
        ("g", True),
        ("kind", False),
    ]
    rows = run_json("head", table, "-n", "3", "--columns", "id,kind", "--filter", "id >= 30")
    assert len(rows) == 3 and all(r["id"] >= 30 and set(r) == {"id", "kind"} for r in rows)
    other = str(tmp_path / "kinds")
    lq.write(other, pa.table({"kind": ["click", "view", "buy"], "weight": [1, 2, 3]}))
    out = run_json(
        "sql",
        "SELECT sum(weight) AS w FROM e JOIN k USING (kind)",
        "--table",
        f"e={table}",
        "-t",
        f"k={other}",
    )
    expected = sum(
        {"click": 1, "view": 2, "buy": 3}[["click", "view", "buy"][i % 3]] for i in range(40)
    )
    assert out == [{"w": expected}]
    old = run_json("sql", "SELECT count(*) AS n FROM e", "-t", f"e={table}", "--version", "1")
    assert old == [{"n": 20}]


def test_write_from_csv_then_dml(tmp_path: Path) -> None:
    csv = tmp_path / "in.csv"
    csv.write_text("id,name\n1,a\n2,b\n3,c\n")
    uri = str(tmp_path / "t")
    result = run_json("write", uri, str(csv), "--property", "delta.enableDeletionVectors=true")
    assert result["version"] == 0 and result["num_rows"] == 3
    again = run("write", uri, str(csv), check=False)
    assert again.returncode == 1 and "TableAlreadyExistsError" in again.stderr
    assert run_json("write", uri, str(csv), "--mode", "append")["version"] == 1
    deleted = run_json("delete", uri, "--where", "id = 2")
    assert deleted["num_deleted_rows"] == 2 and deleted["num_deletion_vectors_added"] >= 1
    updated = run_json("update", uri, "--set", "name='z'", "--where", "id = 3")
    assert updated["num_updated_rows"] == 2
    got = lq.DeltaTable(uri).snapshot().scan().to_arrow().sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "name": "a"},
        {"id": 1, "name": "a"},
        {"id": 3, "name": "z"},
        {"id": 3, "name": "z"},
    ]


def test_maintenance_commands(table: str) -> None:
    optimized = run_json("optimize", table)
    assert optimized["files_removed"] >= 2 and optimized["version"] == 4
    dry = run_json("vacuum", table, "--retention-hours", "200")
    assert dry["dry_run"] is True and dry["files_deleted"] == 0
    refused = run("vacuum", table, "--retention-hours", "0", check=False)
    assert refused.returncode == 1 and "RetentionError" in refused.stderr
    restored = run_json("restore", table, "--version", "1")
    assert restored["restored_version"] == 1 and restored["version"] == 5
    assert lq.DeltaTable(table).snapshot().num_records() == 20
    cp = run_json("checkpoint", table)
    assert cp["version"] == 5 and Path(cp["path"].removeprefix("file://")).exists()


def test_changes_and_stream(tmp_path: Path) -> None:
    uri = str(tmp_path / "cdf")
    lq.write(uri, pa.table({"x": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"})
    lq.DeltaTable(uri).delete("x = 1")
    changes = run_json("changes", uri, "--from-version", "0")
    assert sorted((r["x"], r["_change_type"], r["_commit_version"]) for r in changes) == [
        (1, "delete", 1),
        (1, "insert", 0),
        (2, "insert", 0),
    ]
    lines = [json.loads(x) for x in run("--json", "stream", uri).stdout.splitlines()]
    assert [r["x"] for r in lines if "x" in r] == [2]
    offset = json.dumps(lines[-1]["offset"])
    lq.write(uri, pa.table({"x": [7]}), mode="append")
    resumed = [
        json.loads(x) for x in run("--json", "stream", uri, "--offset", offset).stdout.splitlines()
    ]
    assert [r["x"] for r in resumed if "x" in r] == [7]
    # the whole {"offset": ...} line the command printed resumes as well
    line = json.dumps(lines[-1])
    again = [
        json.loads(x) for x in run("--json", "stream", uri, "--offset", line).stdout.splitlines()
    ]
    assert [r["x"] for r in again if "x" in r] == [7]


def test_convert_a_parquet_folder(tmp_path: Path) -> None:
    import pyarrow.dataset as ds

    folder = tmp_path / "pq"
    data = pa.table({"x": [1.5, 2.5, 3.5], "g": [1, 1, 2]})
    ds.write_dataset(data, folder, format="parquet", partitioning=["g"], partitioning_flavor="hive")
    out = run_json("convert", str(folder), "--partition-by", "g")
    assert out["partition_columns"] == ["g"] and out["num_files"] == 2
    got = lq.DeltaTable(str(folder)).snapshot().scan().to_arrow().sort_by("x")
    assert got.column("x").to_pylist() == [1.5, 2.5, 3.5] and got.column("g").to_pylist() == [
        1,
        1,
        2,
    ]
    again = run("convert", str(folder), check=False)
    assert again.returncode == 1 and len(again.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["describe", "{missing}"], 1, "TableNotFoundError"),
        (["history", "{missing}"], 1, "TableNotFoundError"),
        (["files", "{table}", "--filter", "nope = 1"], 1, "PredicateError"),
        (["schema", "{table}", "--version", "99"], 1, "VersionNotFoundError"),
        (["head", "{table}", "--columns", "nope"], 1, "nope"),
        (["sql", "SELECT 1", "-t", "no-equals"], 2, "KEY=VALUE"),
        (["changes", "{table}", "--from-version", "0"], 1, "ChangeDataFeedError"),
        (["stream", "{missing}"], 1, "TableNotFoundError"),
        (["write", "{table}", "{table}/x.txt"], 2, "--format"),
        (["delete", "{table}"], 2, "--where"),
        (["update", "{table}", "--set", "nope=1"], 1, "nope"),
        (["optimize", "{table}", "--zorder-by", "nope"], 1, "nope"),
        (["vacuum", "{table}", "--retention-hours", "0"], 1, "RetentionError"),
        (["restore", "{table}"], 2, "--version"),
        (["restore", "{table}", "--version", "99"], 1, "Error"),
        (["checkpoint", "{missing}"], 1, "TableNotFoundError"),
        (["convert", "{missing}"], 1, "Error"),
        (["--storage-option", "oops", "describe", "{table}"], 2, "KEY=VALUE"),
        (["head", "{table}", "-n", "-3"], 2, "-3"),
        (["history", "{table}", "--limit", "-1"], 2, "-1"),
        # DuckDB's errors are the user's SQL or input file: one line too
        (["sql", "SELECT * FROM nosuch", "-t", "t={table}"], 1, "CatalogException"),
        (["sql", "SELEC 1", "-t", "t={table}"], 1, "ParserException"),
        (["write", "{table}", "{missing}/none.csv"], 1, "IOException"),
    ],
)
def test_errors_are_one_line_with_exit_codes(
    table: str, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    argv = [a.format(table=table, missing=str(tmp_path / "missing")) for a in args]
    proc = run(*argv, check=False)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    if code == 1:
        assert len(proc.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    proc = run("--debug", "describe", str(tmp_path / "missing"), check=False)
    assert proc.returncode == 1 and "Traceback" in proc.stderr


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("lakequery")
    assert script.exists(), "pip install -e . creates the lakequery console script"
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and lq.__version__ in proc.stdout


def test_no_control_characters_without_a_terminal(table: str) -> None:
    proc = run("optimize", table)
    for text in (proc.stdout, proc.stderr):
        assert "\x1b" not in text and "\r" not in text
    assert "files_removed" in proc.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_progress_drawn_on_a_terminal(table: str) -> None:
    import pty

    leader, follower = pty.openpty()
    env = dict(os.environ, COLUMNS="120", TERM="xterm", LAKEQUERY_PROGRESS_DELAY="0")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakequery.cli", "optimize", table],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(leader)
    drawn = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0
    assert "OPTIMIZE" in drawn and "files" in drawn and "\x1b[" in drawn
    assert proc.stdout is not None and "\x1b" not in proc.stdout.read().decode()


def test_flags_that_lift_the_documented_refusals(table: str) -> None:
    """The errors name the API's arguments; the commands have the matching flags."""
    refused = run("vacuum", table, "--retention-hours", "0", check=False)
    assert refused.returncode == 1 and "RetentionError" in refused.stderr
    dry = run_json("vacuum", table, "--retention-hours", "0", "--no-enforce-retention")
    assert dry is not None
    lq.DeltaTable(table).delete("g = 1")  # whole files removed
    lq.write(table, pa.table({"id": [99], "g": [1], "kind": ["x"]}), mode="append")
    stopped = run("--json", "stream", table, "--from-version", "4", check=False)
    assert stopped.returncode == 1 and "ignore_deletes" in stopped.stderr
    lines = run("--json", "stream", table, "--from-version", "4", "--ignore-deletes").stdout
    assert [json.loads(x)["id"] for x in lines.splitlines() if '"id"' in x] == [99]
    skipped = run("--json", "stream", table, "--from-version", "4", "--skip-change-commits")
    assert [json.loads(x)["id"] for x in skipped.stdout.splitlines() if '"id"' in x] == [99]


def test_sql_output_keeps_every_column_and_value(tmp_path: Path) -> None:
    """Repeated column names stay apart in JSON; NaN and infinities are JSON strings;
    floats print in full; a date Python cannot hold prints as text; tables may be
    named like the function's own parameters."""
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1, 2], "x": ["a", "b"]}))
    joined = run_json(
        "sql", "SELECT a.id, b.id, a.x FROM a JOIN b ON a.id = b.id - 1", "-t", f"a={uri}",
        "-t", f"b={uri}",
    )  # fmt: skip
    assert joined == [{"id": 1, "id_1": 2, "x": "a"}]
    floats = run_json("sql", "SELECT 'nan'::DOUBLE AS n, 'inf'::DOUBLE AS i, 0.5::DOUBLE AS h")
    assert floats == [{"n": "NaN", "i": "Infinity", "h": 0.5}]
    shown = run("sql", "SELECT 1234567.89::DOUBLE AS amount, DATE '9999-12-31' + 1 AS d").stdout
    assert "1234567.89" in shown and "10000-01-01" in shown
    assert "0.1 " in run("sql", "SELECT 0.1::FLOAT AS f").stdout  # not 0.10000000149011612
    nested = run_json("sql", "SELECT {'d': DATE '9999-12-31' + 1} AS s, [DATE '1-01-01'] AS l")
    assert nested == [{"s": {"d": "10000-01-01"}, "l": ["0001-01-01"]}]
    for name in ("con", "query"):
        assert run_json("sql", f"SELECT count(*) AS n FROM {name}", "-t", f"{name}={uri}") == [
            {"n": 2}
        ]


def test_vacuum_retention_beyond_the_epoch_keeps_everything(table: str) -> None:
    for hours in ("inf", "1e20"):
        assert run_json("vacuum", table, "--retention-hours", hours)["files"] == []
    bad = run("vacuum", table, "--retention-hours", "nan", check=False)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


def test_ctrl_c_ends_a_followed_stream_with_the_interrupt_status(tmp_path: Path) -> None:
    import signal

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"x": [1]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakequery.cli", "--json", "stream", uri, "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline()) == {"x": 1}  # the stream is running
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err
    bad = run("stream", uri, "--offset", "garbage", check=False)
    assert bad.returncode != 0 and repr(uri) in bad.stderr  # names the table


def test_head_prints_timestamps_whatever_the_machines_zone(tmp_path: Path) -> None:
    # head went through a DuckDB relation in the process's zone: New York printed
    # 03:00:00-04:00 where stream, changes and history print UTC
    import datetime as dt

    uri = str(tmp_path / "t")
    stamp = dt.datetime(2024, 3, 10, 7, 0, tzinfo=dt.timezone.utc)
    lq.write(uri, pa.table({"id": [0], "ts": pa.array([stamp], pa.timestamp("us", "UTC"))}))
    outputs = []
    for zone in ("UTC", "America/New_York"):
        proc = subprocess.run(
            [sys.executable, "-m", "lakequery.cli", "--json", "head", uri],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TZ": zone},
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(json.loads(proc.stdout))
    assert outputs[0] == outputs[1] == [{"id": 0, "ts": "2024-03-10T07:00:00+00:00"}]


def test_text_is_printed_as_itself(tmp_path: Path) -> None:
    """Names and values holding rich markup or emoji codes print as themselves."""
    uri = str(tmp_path / "t")
    values = ["[red]alert[/red]", "a[/]b", ":cat:", "[link=http://x]y"]
    lq.write(uri, pa.table({"id": list(range(4)), "[b]name": values}))
    out = run("head", uri).stdout
    for text in ["[b]name", *values]:
        assert text in out
    assert "[/]" in run("sql", "SELECT 'x[/]' AS v").stdout


def test_files_keeps_its_columns_beside_partition_columns_of_their_names(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"path": ["x", "y"], "size": ["S", "M"], "v": [1, 2]}),
        partition_by=["size", "path"],
    )
    out = run_json("files", uri)["files"]
    api = lq.DeltaTable(uri).snapshot().files()
    assert sorted((f["path"], f["size"]) for f in out) == sorted(
        zip(api["path"].to_pylist(), api["size"].to_pylist(), strict=True)
    )
    assert sorted((f["partition.path"], f["partition.size"]) for f in out) == [
        ("x", "S"),
        ("y", "M"),
    ]


def test_wide_rows_keep_every_name_and_value(tmp_path: Path) -> None:
    """Piped output keeps a table's natural width; nothing is folded away."""
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({f"column_{i}": [1000 + i] for i in range(60)}))
    out = run("head", uri).stdout
    assert all(f"column_{i}" in out and str(1000 + i) in out for i in range(60))


def test_a_terminal_too_narrow_for_the_columns_gets_one_field_per_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from rich.console import Console

    from lakequery.cli import output

    buffer = io.StringIO()
    monkeypatch.setattr(output, "console", lambda: Console(file=buffer, width=80))
    columns = [f"column_{i}" for i in range(30)]
    output.print_rows(columns, [[1000 + i for i in range(30)], [2000 + i for i in range(30)]])
    text = buffer.getvalue()
    assert "row 1" in text and "row 2" in text
    assert all(c in text for c in columns) and "1029" in text and "2029" in text
    buffer.truncate(0)
    output.print_rows(columns[:3], [[1, 2, 3]])  # fits: one table
    assert "row 1" not in buffer.getvalue() and "column_2" in buffer.getvalue()


def test_storage_options_of_s3fs_types(
    s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    """``-s`` values: true/false are booleans (``anon=false`` signs requests), a JSON
    object a mapping (``client_kwargs``, the only way to give a region)."""
    from lakequery.cli.context import storage_values

    assert storage_values({"anon": "False", "n": "10", "k": '{"a": 1}', "u": "x=y"}) == {
        "anon": False,
        "n": "10",
        "k": {"a": 1},
        "u": "x=y",
    }
    lq.write(s3_table_uri, pa.table({"x": [1, 2]}), storage_options=s3_storage_options)
    region = json.dumps(s3_storage_options["client_kwargs"])
    args = [
        "-s", f"key={s3_storage_options['key']}",
        "-s", f"secret={s3_storage_options['secret']}",
        "-s", f"endpoint_url={s3_storage_options['endpoint_url']}",
        "-s", "anon=false",
        "-s", f"client_kwargs={region}",
    ]  # fmt: skip
    assert run_json(*args, "describe", s3_table_uri)["num_records"] == 2
    bad = run(*args[:-2], "-s", "client_kwargs={oops", "describe", s3_table_uri, check=False)
    assert bad.returncode == 2 and "client_kwargs" in bad.stderr


def test_dates_python_cannot_hold_print_as_duckdb_prints_them(tmp_path: Path) -> None:
    import datetime as dt

    uri = str(tmp_path / "t")
    last = (dt.date(9999, 12, 31) - dt.date(1970, 1, 1)).days
    lq.write(uri, pa.table({"id": [1, 2], "d": pa.array([last + 1, 13890172], pa.date32())}))
    out = run_json("head", uri)
    assert sorted(r["d"] for r in out) == ["10000-01-01", "40000-01-01"]
    sql = "SELECT 'infinity'::DATE AS d, '-infinity'::TIMESTAMP AS t"
    assert run_json("sql", sql) == [{"d": "infinity", "t": "-infinity"}]
    assert "40000-01-01" in run("head", uri).stdout
