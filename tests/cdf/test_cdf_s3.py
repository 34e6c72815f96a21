"""The change feed of conformance tables uploaded to S3 (a moto server on loopback) is
the same as read from local disk, in every engine."""

from __future__ import annotations

from typing import Any

import pytest
from cdfkit import CONFORMANCE, rows

import lakequery as lq


@pytest.mark.parametrize(
    "name", ["kernelrs_cdf_table_with_cdc_and_dvs", "kernelrs_cdf_table_with_dv"]
)
def test_s3_matches_local(name: str, s3_table_uri: str, s3_storage_options: dict[str, Any]) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(**s3_storage_options)
    fs.put(str(CONFORMANCE / name) + "/", s3_table_uri + "/", recursive=True)
    local = lq.DeltaTable(str(CONFORMANCE / name)).changes(starting_version=0)
    remote = lq.DeltaTable(s3_table_uri, storage_options=s3_storage_options).changes(
        starting_version=0
    )
    expected = rows(local.to_arrow())
    assert rows(remote.to_arrow()) == expected
    assert rows(remote.to_duckdb()) == expected
