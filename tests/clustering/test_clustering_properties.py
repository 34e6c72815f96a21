"""Random command sequences on a clustered table (appends, DELETE, UPDATE, OPTIMIZE,
``full=True``, changing the clustering columns): the rows always equal a model of the
table, the domain always names the current columns, and after every OPTIMIZE each live
file without a large deletion vector is clustered by the current columns, so a second
OPTIMIZE has nothing to do. ``deltalake`` reads the final table."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
from clusterkit import dl_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakequery as lq
from lakequery.clustering.alter import set_clustering_columns
from lakequery.clustering.domain import clustering_columns

SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
COLUMN_SETS = (["a"], ["b", "a"], ["s"], [])

commands = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 60)),
        st.tuples(st.just("delete"), st.integers(0, 9)),
        st.tuples(st.just("update"), st.integers(0, 9)),
        st.tuples(st.just("optimize"), st.booleans()),
        st.tuples(st.just("cluster_by"), st.integers(0, len(COLUMN_SETS) - 1)),
    ),
    min_size=1,
    max_size=8,
)


def rows_of(uri: str) -> Counter[tuple[Any, ...]]:
    t = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    return Counter(zip(*(t.column(c).to_pylist() for c in ("a", "b", "s")), strict=True))


def batch(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "a": pa.array([(start + i) * 7 % 101 for i in range(n)], pa.int64()),
            "b": pa.array([float((start + i) % 10) for i in range(n)]),
            "s": pa.array([f"s{(start + i) % 13:02d}" for i in range(n)]),
        }
    )


def clustered_by_current(uri: str, columns: list[str]) -> None:
    """Every live file without a deletion vector carries the current columns' tag."""
    files = lq.DeltaTable(uri).snapshot().files()
    for tags, dv, provider in zip(
        files.column("tags").to_pylist(),
        files.column("deletion_vector").to_pylist(),
        files.column("clustering_provider").to_pylist(),
        strict=True,
    ):
        if dv is None:
            assert provider == "liquid"
            assert json.loads(dict(tags)["ZCUBE_ZORDER_BY"]) == columns


@SETTINGS
@given(steps=commands)
def test_random_commands_keep_rows_and_clustering(steps: list[tuple[str, Any]]) -> None:
    uri = tempfile.mkdtemp(prefix="lq-cluster-prop-") + "/t"
    lq.write(uri, batch(0, 20), cluster_by=["a"])
    model: Counter[tuple[Any, ...]] = Counter(
        zip(*(batch(0, 20).column(c).to_pylist() for c in ("a", "b", "s")), strict=True)
    )
    columns = ["a"]
    written = 20
    dt = lq.DeltaTable(uri)
    for op, arg in steps:
        if op == "append":
            data = batch(written, arg)
            written += arg
            lq.write(uri, data, mode="append")
            model.update(zip(*(data.column(c).to_pylist() for c in ("a", "b", "s")), strict=True))
        elif op == "delete":
            dt.delete(f"b = {float(arg)}")
            model = Counter({r: n for r, n in model.items() if r[1] != float(arg)})
        elif op == "update":
            dt.update(f"b = {float(arg)}", set={"s": "'upd'"})
            new: Counter[tuple[Any, ...]] = Counter()
            for r, n in model.items():
                new[(r[0], r[1], "upd") if r[1] == float(arg) else r] += n
            model = new
        elif op == "optimize":
            m = dt.optimize(target_file_size=4096, full=arg)
            if columns:
                assert m.curve == "hilbert" or not m.committed
                clustered_by_current(uri, columns)
                assert not dt.optimize(target_file_size=4096).committed
        else:
            columns = list(COLUMN_SETS[arg])
            set_clustering_columns(uri, columns)
        assert clustering_columns(lq.DeltaTable(uri).snapshot()) == columns
        assert rows_of(uri) == model
    got = dl_table(uri)
    theirs = Counter(zip(*(got.column(c).to_pylist() for c in ("a", "b", "s")), strict=True))
    assert theirs == model
