"""Credentials given in ``storage_options`` never appear in a repr, an error message or a
log line (issue 18), whatever fails."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
import pytest

import lakequery as lq

SECRET = "s3cr3t-DO-NOT-PRINT-0123456789"


@pytest.fixture
def options(s3_storage_options: dict[str, Any]) -> dict[str, Any]:
    # moto accepts any secret; the access key must stay "testing" for the bucket's owner
    return {**s3_storage_options, "secret": SECRET, "token": SECRET + "-token"}


def _texts(exc: BaseException) -> list[str]:
    out = [str(exc), repr(exc)]
    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        out += [str(cause), repr(cause)]
        cause = cause.__cause__ or cause.__context__
    return out


def test_secret_not_in_reprs_errors_or_logs(
    s3_table_uri: str, options: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="lakequery")
    lq.write(s3_table_uri, pa.table({"x": [1, 2, 3]}), storage_options=options)
    dt = lq.DeltaTable(s3_table_uri, storage_options=options)
    snap = dt.snapshot()
    shown = [repr(dt), str(dt), repr(snap), repr(snap.scan()), repr(dt.storage)]
    shown += [repr(e) for e in dt.history()]
    html = getattr(dt, "_repr_html_", None)
    if html is not None:
        shown.append(html())
    errors: list[BaseException] = []
    for action in (
        lambda: lq.DeltaTable(s3_table_uri + "-missing", storage_options=options).snapshot(),
        lambda: dt.snapshot(version=99),
        lambda: dt.snapshot().scan(filter="nope = 1"),
        lambda: lq.write(
            s3_table_uri, pa.table({"y": ["a"]}), mode="append", storage_options=options
        ),
        lambda: lq.DeltaTable("s3://no-such-bucket-lq/t", storage_options=options).snapshot(),
    ):
        with pytest.raises(lq.LakeQueryError) as info:
            action()
        errors.append(info.value)
    # a data file removed behind the table's back: the read fails naming the file
    import s3fs

    fs = s3fs.S3FileSystem(
        key=options["key"],
        secret=SECRET,
        client_kwargs=options["client_kwargs"],
        endpoint_url=options["endpoint_url"],
    )
    data_file = next(
        p for p in fs.find(s3_table_uri.removeprefix("s3://")) if p.endswith(".parquet")
    )
    fs.rm(data_file)
    with pytest.raises(lq.StorageError) as missing:
        lq.DeltaTable(s3_table_uri, storage_options=options).snapshot().scan().to_arrow()
    errors.append(missing.value)
    assert data_file.rsplit("/", 1)[-1] in str(missing.value)
    for text in shown + [t for e in errors for t in _texts(e)] + [caplog.text]:
        assert SECRET not in text
