"""A conditional PUT whose answer was lost is resolved by reading the object back.

The proxy stores the object on the moto server and then drops the connection (or answers
500): the PUT landed, the client does not know. The commit must be reported exactly once
and the log must hold it exactly once; a genuine conflict stays a conflict; a PUT that
never landed is retried, and one that keeps failing raises ``StorageError`` naming it.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
import reliability_figures
from conftest import ProxiedTable
from fault_proxy import FaultPlan, Rule

import lakequery as lq
from lakequery.errors import StorageError
from lakequery.storage import open_storage

COMMIT_1 = r"_delta_log/0{19}1\.json$"


def _commit_versions(p: ProxiedTable) -> list[int]:
    st = open_storage(p.uri, p.options)
    names = [f.name for f in st.list_from(st.join("_delta_log"), "")]
    return sorted(int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit())


def _ids(p: ProxiedTable) -> list[int]:
    snap = lq.DeltaTable(p.uri, storage_options=p.options).snapshot()
    return sorted(snap.scan().to_arrow().column("id").to_pylist())


@pytest.mark.parametrize("fault", ["drop_after", "error500_after"])
def test_lost_commit_answer_commits_exactly_once(proxied: ProxiedTable, fault: str) -> None:
    lq.write(proxied.uri, pa.table({"id": [1, 2, 3]}), storage_options=proxied.options)
    proxied.proxy.configure(FaultPlan(rules=[Rule("PUT", COMMIT_1, fault)]))

    result = lq.write(
        proxied.uri, pa.table({"id": [4]}), mode="append", storage_options=proxied.options
    )

    assert proxied.proxy.injected == {("PUT", fault): 1}  # the fault did fire
    puts = [path for kind, path, _ in proxied.proxy.log if kind == "PUT" and "json" in path]
    assert len(puts) == 2  # the lost PUT and its retry (answered 412, then read back)
    reliability_figures.add("lost_put_answers", {fault: 1})
    proxied.proxy.quiet()
    assert result.version == 1 and result.attempts == 1
    assert _commit_versions(proxied) == [0, 1]
    assert _ids(proxied) == [1, 2, 3, 4]


def test_lost_create_answer_creates_the_table_once(proxied: ProxiedTable) -> None:
    proxied.proxy.configure(
        FaultPlan(rules=[Rule("PUT", r"_delta_log/0{20}\.json$", "drop_after")])
    )
    result = lq.write(proxied.uri, pa.table({"id": [7]}), storage_options=proxied.options)
    assert proxied.proxy.injected == {("PUT", "drop_after"): 1}
    proxied.proxy.quiet()
    assert result.version == 0
    assert _commit_versions(proxied) == [0]
    assert _ids(proxied) == [7]


def test_lost_answer_over_another_writers_object_is_a_conflict(proxied: ProxiedTable) -> None:
    st = open_storage(proxied.uri, proxied.options)
    path = st.join("_delta_log", f"{5:020d}.json")
    assert st.put_if_absent(path, b'{"commitInfo":{"txnId":"theirs"}}\n')
    proxied.proxy.configure(FaultPlan(rules=[Rule("PUT", r"0{19}5\.json$", "drop_after")]))
    assert st.put_if_absent(path, b'{"commitInfo":{"txnId":"ours"}}\n') is False
    assert proxied.proxy.injected == {("PUT", "drop_after"): 1}
    assert st.read(path) == b'{"commitInfo":{"txnId":"theirs"}}\n'


def test_put_that_never_landed_is_retried(proxied: ProxiedTable) -> None:
    st = open_storage(proxied.uri, proxied.options)
    path = st.join("_delta_log", f"{3:020d}.json")
    proxied.proxy.configure(FaultPlan(rules=[Rule("PUT", r"\.json$", "drop_before", count=2)]))
    assert st.put_if_absent(path, b"ours\n") is True
    assert proxied.proxy.injected == {("PUT", "drop_before"): 2}
    assert st.read(path) == b"ours\n"
    assert st.put_if_absent(path, b"ours\n") is True  # equal bytes read back: it is ours
    assert st.put_if_absent(path, b"other\n") is False


def test_put_failing_on_every_attempt_names_the_object(proxied: ProxiedTable) -> None:
    st = open_storage(proxied.uri, proxied.with_retries(1))
    path = st.join("_delta_log", f"{4:020d}.json")
    proxied.proxy.configure(FaultPlan(rules=[Rule("PUT", r"\.json$", "error503", count=99)]))
    with pytest.raises(StorageError) as info:
        st.put_if_absent(path, b"x\n")
    assert info.value.operation == "put_if_absent" and info.value.uri == path
    assert proxied.proxy.injected == {("PUT", "error503"): 2}  # 1 + lakequery.retries
    proxied.proxy.quiet()
    assert not st.exists(path)


def test_unknown_outcome_is_reported_as_such(proxied: ProxiedTable) -> None:
    st = open_storage(proxied.uri, proxied.with_retries(0))
    path = st.join("_delta_log", f"{6:020d}.json")
    proxied.proxy.configure(
        FaultPlan(
            rules=[
                Rule("PUT", r"\.json$", "error500_after"),
                Rule("GET", r"\.json$", "error500", count=99),
            ]
        )
    )
    with pytest.raises(StorageError, match="outcome unknown") as info:
        st.put_if_absent(path, b"x\n")
    assert info.value.uri == path
    proxied.proxy.quiet()
    assert st.read(path) == b"x\n"  # it had landed: the error says it may have


def test_commit_answered_500_after_landing_is_not_committed_twice(
    proxied: ProxiedTable,
) -> None:
    """With retries off, the read-back alone decides: the commit is ours, reported once."""
    opts = proxied.with_retries(0)
    lq.write(proxied.uri, pa.table({"id": [1]}), storage_options=opts)
    proxied.proxy.configure(FaultPlan(rules=[Rule("PUT", COMMIT_1, "error500_after")]))
    result = lq.write(proxied.uri, pa.table({"id": [2]}), mode="append", storage_options=opts)
    proxied.proxy.quiet()
    assert result.version == 1
    assert _commit_versions(proxied) == [0, 1]
    st = open_storage(proxied.uri, opts)
    commit = [json.loads(line) for line in st.read(st.join("_delta_log", f"{1:020d}.json")).split()]
    assert sum("add" in a for a in commit) == 1
    assert _ids(proxied) == [1, 2]


def test_invalid_retry_option_is_refused() -> None:
    with pytest.raises(StorageError, match=r"lakequery\.retries"):
        open_storage("s3://bucket/t", {"lakequery.retries": "many"})
