"""Fixtures of the reliability suite: the fault proxy in front of the moto server and
fresh S3 tables reached through it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fault_proxy import FaultProxy, running_proxy


@pytest.fixture(scope="session")
def fault_proxy(moto_server: str) -> Iterator[FaultProxy]:
    """One fault proxy in front of the session's moto server (quiet between tests)."""
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    with running_proxy(moto_server) as proxy:
        yield proxy


@dataclass
class ProxiedTable:
    """An empty S3 table location reached through the proxy."""

    uri: str
    options: dict[str, Any]
    proxy: FaultProxy

    def with_retries(self, retries: int) -> dict[str, Any]:
        return {**self.options, "lakequery.retries": retries}


@pytest.fixture
def proxied(fault_proxy: FaultProxy, moto_server: str) -> Iterator[ProxiedTable]:
    """A fresh bucket; storage options whose endpoint is the proxy (no faults yet)."""
    import boto3

    bucket = f"lqf-{uuid.uuid4().hex[:20]}"
    boto3.client(
        "s3",
        endpoint_url=moto_server,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).create_bucket(Bucket=bucket)
    fault_proxy.quiet()
    options = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": fault_proxy.url,
        "client_kwargs": {"region_name": "us-east-1"},
    }
    yield ProxiedTable(f"s3://{bucket}/t", options, fault_proxy)
    fault_proxy.quiet()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With ``LAKEQUERY_RELIABILITY_REPORT=path``, write the run's figures there (JSON)."""
    import json
    import os

    from reliability_figures import FIGURES

    target = os.environ.get("LAKEQUERY_RELIABILITY_REPORT")
    if target and FIGURES:
        with open(target, "w") as fh:
            json.dump(FIGURES, fh, indent=1, sort_keys=True)
