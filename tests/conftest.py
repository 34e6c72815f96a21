"""Shared fixtures: a real moto S3 server on loopback, per-test table locations and one
local Spark session for every test that needs Spark.

All S3 traffic goes to the moto server on 127.0.0.1. The environment is pinned at import
so that botocore never looks for credentials on the network (instance metadata) and no
proxy is used.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
for _var in (
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
):
    os.environ.pop(_var, None)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

S3_REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """Start a real moto S3 server on a free 127.0.0.1 port; yield its endpoint URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    assert host == "127.0.0.1"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_storage_options(moto_server: str) -> dict[str, Any]:
    """s3fs storage options pointing at the moto server."""
    return {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": moto_server,
        "client_kwargs": {"region_name": S3_REGION},
    }


@pytest.fixture
def s3_table_uri(moto_server: str) -> str:
    """A fresh bucket on the moto server; returns ``s3://<bucket>/tables/t``."""
    import boto3

    bucket = f"lq-{uuid.uuid4().hex[:20]}"
    client = boto3.client(
        "s3",
        endpoint_url=moto_server,
        region_name=S3_REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=bucket)
    return f"s3://{bucket}/tables/t"


@pytest.fixture
def memory_table_uri() -> Iterator[str]:
    """A fresh ``memory://`` location, removed from the process-global store afterwards."""
    from fsspec.implementations.memory import MemoryFileSystem

    name = f"lq-{uuid.uuid4().hex}"
    yield f"memory://{name}"
    fs = MemoryFileSystem()
    if fs.exists(f"/{name}"):
        fs.rm(f"/{name}", recursive=True)


@pytest.fixture
def log_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts loads of a log segment while the test runs: each ``LogReader.load`` appends
    its number of commit files (the test may ``clear()`` the list between steps)."""
    from lakequery.log_reader import LogReader

    loads: list[int] = []
    original = LogReader.load

    def counting(self: LogReader, checkpoint: Any, commits: Any, **kw: Any) -> None:
        loads.append(len(commits))
        original(self, checkpoint, commits, **kw)

    monkeypatch.setattr(LogReader, "load", counting)
    return loads


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One real local Spark session (``local[2]``, loopback only, no UI, Arrow on).

    Python workers run this interpreter, so they import this checkout's lakequery.
    """
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # never bind to another interface
    session = (
        SparkSession.builder.master("local[2]")
        .appName("lakequery-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
