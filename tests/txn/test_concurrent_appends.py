"""Several writer processes append to one table at the same time (local and S3).

Each writer appends distinct ids; afterwards the log must hold exactly one commit per
write, at contiguous versions, and the table every row exactly once. At least one write
must have lost a race (``attempts > 1``), which proves the writers really collided.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from txnkit import (
    assert_no_duplicates,
    check_log,
    deltalake_ids,
    finish_all,
    ids_table,
    lq_ids,
    open_table_storage,
    run_together,
)

import lakequery as lq

ROWS = 5
#: (writers, appends each): S3 writes on moto cost ~1 s each on 2 cores, so fewer there.
SIZES = {"local": (5, 3), "s3": (3, 2)}


@pytest.fixture(params=["local", "s3"])
def target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[str, dict[str, Any] | None, tuple[int, int]]:
    if request.param == "local":
        return str(tmp_path / "table"), None, SIZES["local"]
    uri: str = request.getfixturevalue("s3_table_uri")
    opts: dict[str, Any] = request.getfixturevalue("s3_storage_options")
    return uri, opts, SIZES["s3"]


def test_processes_append_concurrently(
    target: tuple[str, dict[str, Any] | None, tuple[int, int]], tmp_path: Path
) -> None:
    uri, opts, (writers, appends) = target
    lq.write(uri, ids_table(99, 0, ROWS), storage_options=opts)
    jobs = [
        {"job": "append", "uri": uri, "storage_options": opts, "writer": w}
        | {"appends": appends, "rows": ROWS}
        for w in range(writers)
    ]
    workers = run_together(jobs, tmp_path / "go")
    finish_all(workers)

    log = check_log(open_table_storage(uri, opts))
    writes = writers * appends
    assert log.versions == list(range(writes + 1))
    reported = [r for w in workers for r in w.records]
    assert len(reported) == writes
    assert sorted(r["version"] for r in reported) == list(range(1, writes + 1))
    txn_ids = [c[0]["commitInfo"]["txnId"] for c in log.commits]
    assert len(set(txn_ids)) == len(txn_ids)
    retries = sum(r["attempts"] - 1 for r in reported)
    assert retries >= 1, "no writer ever lost a race: the test did not race"

    expected = sorted(
        i
        for w in [99, *range(writers)]
        for s in range(1 if w == 99 else appends)
        for i in ids_table(w, s, ROWS).column("id").to_pylist()
    )
    ids = lq_ids(uri, opts)
    assert_no_duplicates(ids)
    assert ids == expected
    assert deltalake_ids(uri, opts) == expected
    # every reported write is one commit adding exactly that write's rows
    for w in workers:
        for r in w.records:
            adds = [a["add"] for a in log.commits[r["version"]] if "add" in a]
            assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == ROWS
