"""What lakequery retries on S3, and how often (no store needed: real botocore errors)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from lakequery.errors import StorageError
from lakequery.storage import open_storage
from lakequery.storage.retry import DEFAULT_RETRIES, is_transient, retries_from_options


def _client_error(status: int, code: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "GetObject",
    )


@pytest.mark.parametrize(
    ("status", "code", "transient"),
    [
        (500, "InternalError", True),
        (503, "ServiceUnavailable", True),
        (503, "SlowDown", True),
        (400, "RequestTimeout", True),
        (403, "AccessDenied", False),
        (404, "NoSuchKey", False),
        (412, "PreconditionFailed", False),
        (409, "ConditionalRequestConflict", False),
    ],
)
def test_client_errors(status: int, code: str, transient: bool) -> None:
    assert is_transient(_client_error(status, code)) is transient


def test_network_errors_are_transient_and_others_not() -> None:
    assert is_transient(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert is_transient(ConnectionResetError("reset"))
    assert not is_transient(ValueError("bad"))
    # s3fs's translated final error is not retried again (the cause is not looked at)
    translated = OSError("Service Unavailable")
    translated.__cause__ = _client_error(503, "ServiceUnavailable")
    assert not is_transient(translated)


def test_one_retry_loop_configured_from_the_option() -> None:
    st = open_storage("s3://bucket/t", {"anon": True, "lakequery.retries": 2})
    assert st.fs.retries == 3
    assert st.fs.config_kwargs["retries"] == {"total_max_attempts": 1}  # botocore: 1 attempt
    assert "lakequery.retries" not in st.fs.kwargs  # not passed on to the client
    assert st.options == {"anon": True, "lakequery.retries": 2}  # but kept for writers
    assert open_storage("s3://bucket/t", {"anon": True}).fs.retries == 1 + DEFAULT_RETRIES


@pytest.mark.parametrize("value", ["many", -1, 99])
def test_bad_retry_options_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"lakequery\.retries"):
        retries_from_options({"lakequery.retries": value})
    with pytest.raises(StorageError, match=r"lakequery\.retries"):
        open_storage("s3://bucket/t", {"lakequery.retries": value})
