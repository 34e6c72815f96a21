"""Backend-specific behaviour: URI parsing, S3 listing requests, options and errors."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from lakequery.errors import InvalidPathError, ObjectNotFoundError, StorageError
from lakequery.storage import open_storage
from lakequery.storage.s3 import S3Storage, polars_options, start_after

# --- URIs ----------------------------------------------------------------------------------------


def test_local_locations_are_absolute_os_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert open_storage("rel/table/").root == str(tmp_path / "rel" / "table")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert open_storage("~/t").root == str(tmp_path / "home" / "t")
    spaced = tmp_path / "my table"
    assert "%20" in spaced.as_uri()
    st = open_storage(spaced.as_uri())
    assert (st.root, st.protocol) == (str(spaced), "file")
    assert open_storage(f"file://localhost{tmp_path}/x").root == str(tmp_path / "x")


def test_path_objects_are_locations(tmp_path: Path) -> None:
    """``pathlib.Path`` (any path-like) opens, writes, creates and converts tables as its
    text does; it was a ``TypeError`` from the URI parser."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import lakequery as lq

    assert open_storage(tmp_path / "t").root == str(tmp_path / "t")
    data = pa.table({"x": [1, 2]})
    lq.write(tmp_path / "t", data)
    lq.write(tmp_path / "t", data, mode="append")
    assert lq.DeltaTable(tmp_path / "t").snapshot().scan().to_arrow().num_rows == 4
    assert lq.sql("SELECT count(*) FROM t", t=tmp_path / "t").fetchall() == [(4,)]
    created = lq.DeltaTable.create(tmp_path / "c", data.schema)
    assert created.snapshot().version == 0
    assert created.clone(tmp_path / "clone").snapshot().version == 0
    (tmp_path / "pq").mkdir()
    pq.write_table(data, tmp_path / "pq" / "part-0.parquet")
    lq.convert_to_delta(tmp_path / "pq")
    assert lq.DeltaTable(str(tmp_path / "pq")).snapshot().scan().to_arrow().equals(data)


@pytest.mark.parametrize("location", [b"/tmp/t", 3, None])
def test_locations_of_other_types_are_a_type_error(location: Any) -> None:
    with pytest.raises(TypeError, match="a table location is a string or a path"):
        open_storage(location)


def test_s3_and_memory_roots_are_normalised(s3_storage_options: dict[str, Any]) -> None:
    assert open_storage("s3a://bucket/a/b/", s3_storage_options).root == "s3://bucket/a/b"
    assert open_storage("s3://bucket", s3_storage_options).root == "s3://bucket"
    assert open_storage("memory:///name/t/").root == "memory://name/t"


@pytest.mark.parametrize(
    "uri",
    ["", "gs://bucket/t", "s3://", "s3:///key", "memory://", "file://otherhost/x"],
)
def test_unusable_locations_are_refused(uri: str) -> None:
    with pytest.raises(InvalidPathError):
        open_storage(uri)


# --- S3 listing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("", ""),
        ("b", "a~"),
        ("00000000000000000010.", "00000000000000000010-~"),
        ("a\x00", "a"),
        ("x\ue000", "x\ud7ff~"),  # never a (non-encodable) surrogate
    ],
)
def test_start_after_is_just_below_start(start: str, expected: str) -> None:
    after = start_after(start)
    assert after == expected
    after.encode("utf-8")
    if start:
        assert after < start
        assert after > start[:-1] or ord(start[-1]) == 0


def test_s3_listing_starts_at_key_and_paginates(
    s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    st = open_storage(s3_table_uri, s3_storage_options)
    assert isinstance(st, S3Storage)
    log = st.join("_delta_log")
    early = [f"{v:020d}.json" for v in range(30)]
    late = [f"{v:020d}.json" for v in range(30, 33)]
    for name in early + late:
        st.put(f"{log}/{name}", b"{}")
    st.put(f"{log}/_sidecars/x.parquet", b"sidecar")

    requests: list[dict[str, Any]] = []
    st.fs.s3.meta.events.register(
        "before-parameter-build.s3.ListObjectsV2", lambda params, **_: requests.append(params)
    )
    st.list_page_size = 2
    assert [f.name for f in st.list_from(log, f"{30:020d}.")] == late
    # the listing started at the key: 3 names in pages of 2 (+ the sub-directory prefix)
    assert len(requests) <= 3
    assert requests[0]["StartAfter"].startswith(s3_table_uri.split("/", 3)[3] + "/_delta_log/")

    requests.clear()
    assert [f.name for f in st.list_from(log, "")] == early + late
    assert len(requests) >= 17  # paginated through 33 names in pages of 2


def test_s3_reads_issue_one_get_per_object(
    s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    st = open_storage(s3_table_uri, s3_storage_options)
    paths = [st.join("_delta_log", f"{v:020d}.json") for v in range(4)]
    for i, path in enumerate(paths):
        st.put(path, f"commit {i}".encode())
    calls: list[str] = []
    for op in ("GetObject", "HeadObject", "ListObjectsV2"):
        st.fs.s3.meta.events.register(
            f"before-parameter-build.s3.{op}", lambda op=op, **_: calls.append(op)
        )
    assert st.read(paths[0]) == b"commit 0"
    assert st.read_many(paths) == [f"commit {i}".encode() for i in range(4)]
    assert calls == ["GetObject"] * 5


# --- S3 errors ----------------------------------------------------------------------------------


def test_s3_missing_bucket(moto_server: str, s3_storage_options: dict[str, Any]) -> None:
    st = open_storage("s3://lq-no-such-bucket/t", s3_storage_options)
    path = st.join("_delta_log", "00000000000000000000.json")
    with pytest.raises(ObjectNotFoundError) as missing:
        st.read(path)
    assert missing.value.uri == path
    assert not st.exists(path)
    assert st.list_from(st.join("_delta_log"), "") == []
    with pytest.raises(StorageError) as failed:
        st.put_if_absent(path, b"{}")
    assert failed.value.uri == path
    assert failed.value.operation == "put_if_absent"


def test_a_write_to_a_missing_bucket_fails_and_creates_no_bucket(
    moto_server: str, s3_storage_options: dict[str, Any]
) -> None:
    """The writer made the data file's "directory" first, and s3fs's recursive mkdir
    creates a missing bucket: a misspelt bucket name appeared in the account."""
    import boto3
    import pyarrow as pa

    import lakequery as lq

    client = boto3.client(
        "s3",
        endpoint_url=moto_server,
        region_name=s3_storage_options["client_kwargs"]["region_name"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    name = "lq-typo-" + os.urandom(6).hex()
    for options in (
        s3_storage_options,
        {k: v for k, v in s3_storage_options.items() if k != "client_kwargs"},
    ):
        with pytest.raises(StorageError, match="bucket"):
            lq.write(f"s3://{name}/t", pa.table({"a": [1]}), storage_options=options)
        assert name not in [b["Name"] for b in client.list_buckets()["Buckets"]]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"foo": "bar"}, "foo"),
        ({"AWS_ACCESS_KEY_ID": "k"}, "AWS_ACCESS_KEY_ID"),  # deltalake's spelling
        ({"client_kwargs.region_name": "x"}, "client_kwargs.region_name"),  # a CLI -s slip
        ({"client_kwargs": "notadict"}, "client_kwargs"),
    ],
)
def test_s3_options_s3fs_would_trip_over_are_refused_at_open(
    s3_storage_options: dict[str, Any], extra: dict[str, Any], named: str
) -> None:
    """They failed at the first request, inside s3fs's session, with a bare TypeError or
    AttributeError."""
    with pytest.raises(StorageError, match=named) as failed:
        open_storage("s3://bucket/t", {**s3_storage_options, **extra})
    assert failed.value.operation == "open"
    open_storage("s3://bucket/t", {**s3_storage_options, "use_listings_cache": False})


def test_s3_unreachable_endpoint_raises_storage_error(s3_storage_options: dict[str, Any]) -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    options = {
        **s3_storage_options,
        "endpoint_url": f"http://127.0.0.1:{port}",
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2},
    }
    st = open_storage("s3://bucket/t", options)
    path = st.join("_delta_log", "00000000000000000000.json")
    for call in (
        lambda: st.read(path),
        lambda: st.exists(path),
        lambda: st.list_from(st.join("_delta_log"), ""),
        lambda: st.put_if_absent(path, b"{}"),
    ):
        with pytest.raises(StorageError) as failed:
            call()
        assert not isinstance(failed.value, ObjectNotFoundError)
        assert failed.value.uri.startswith("s3://bucket/t/_delta_log")
        assert "s3://bucket/t/_delta_log" in str(failed.value)


# --- Polars options ------------------------------------------------------------------------------


def test_polars_options_translate_s3fs_options() -> None:
    assert polars_options(
        {
            "key": "AK",
            "secret": "SK",
            "token": "TOK",
            "endpoint_url": "http://127.0.0.1:9000",
            "client_kwargs": {"region_name": "eu-west-1"},
        }
    ) == {
        "aws_access_key_id": "AK",
        "aws_secret_access_key": "SK",
        "aws_session_token": "TOK",
        "aws_endpoint_url": "http://127.0.0.1:9000",
        "aws_allow_http": "true",
        "aws_region": "eu-west-1",
    }
    https = polars_options({"client_kwargs": {"endpoint_url": "https://s3.example"}})
    assert https == {"aws_endpoint_url": "https://s3.example"}
    assert polars_options({"anon": True}) == {"aws_skip_signature": "true"}


def test_two_threads_registering_one_filesystem_on_a_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine database is shared by every thread's cursors: the check that a
    filesystem is registered and its registration are one step (two threads both passing
    the check made DuckDB refuse the second registration)."""
    import threading
    import time

    import duckdb

    from lakequery.storage import bridges

    storage = open_storage(f"memory://register-race-{uuid.uuid4().hex}")
    db = duckdb.connect()
    slow_class = bridges.bridge_class

    def slowly(*args: Any) -> Any:
        time.sleep(0.2)  # widens the window between the check and the registration
        return slow_class(*args)

    monkeypatch.setattr(bridges, "bridge_class", slowly)
    errors: list[BaseException] = []

    def register() -> None:
        try:
            storage.register_duckdb(db.cursor())
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=register) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == []


def test_roots_with_glob_characters_read_their_own_log(
    s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    """DuckDB globs every file it reads (through fsspec on S3): the log of ``x?/t`` also
    matched a sibling ``xy/t``'s commits, and ``br[1]/t``'s matched nothing."""
    import pyarrow as pa

    import lakequery as lq

    base = s3_table_uri.rsplit("/", 2)[0]
    opts = {"storage_options": s3_storage_options}
    config = {"delta.enableChangeDataFeed": "true"}
    lq.write(f"{base}/x?/t", pa.table({"id": [1, 2]}), configuration=config, **opts)
    lq.write(f"{base}/x?/t", pa.table({"id": [3]}), mode="append", **opts)
    lq.write(f"{base}/xy/t", pa.table({"id": [9], "secret": ["s"]}), **opts)
    lq.write(f"{base}/xy/t", pa.table({"id": [8], "secret": ["t"]}), mode="append", **opts)
    table = lq.DeltaTable(f"{base}/x?/t", **opts)
    snap = table.snapshot()
    assert snap.schema.names == ["id"]
    assert sorted(snap.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert len(table.history()) == 2
    changes = table.changes(starting_version=0).to_arrow()
    assert sorted(changes["id"].to_pylist()) == [1, 2, 3]
    lq.write(f"{base}/br[1]/t", pa.table({"id": [1, 2]}), **opts)
    lq.write(f"{base}/br[1]/t", pa.table({"id": [3]}), mode="append", **opts)
    bracket = lq.DeltaTable(f"{base}/br[1]/t", **opts).snapshot()
    assert bracket.version == 1
    assert sorted(bracket.scan().to_duckdb().fetchall()) == [(1,), (2,), (3,)]
