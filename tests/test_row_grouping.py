"""row_grouping.group_rows: rows grouped by their values, groups in order of first
appearance, rows in order within each group, for group counts on both sides of the code
widths its sort narrows to (256 and 65,536 groups)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakequery.row_grouping import group_rows


def _expected(keys: list[tuple[object, ...]]) -> list[list[int]]:
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    return list(groups.values())


@pytest.mark.parametrize("distinct", [1, 255, 256, 257, 65_535, 65_536, 70_000])
def test_groups_match_a_dictionary_of_rows(distinct: int) -> None:
    rng = np.random.default_rng(distinct)
    n = max(3 * distinct, 1000)
    values = rng.integers(0, distinct, n)
    values[:distinct] = rng.permutation(distinct)  # every value present
    col = pa.array(values)
    got = group_rows([col])
    want = _expected([(int(v),) for v in values])
    assert got.num_groups == len(want) == distinct
    assert [got.rows(g).tolist() for g in range(got.num_groups)] == want
    assert [got.value(0, g).as_py() for g in range(got.num_groups)] == [
        int(values[rows[0]]) for rows in want
    ]


def test_two_columns_and_nulls() -> None:
    a = pa.array(["x", None, "x", "y", None, "x"])
    b = pa.array([1, 2, 1, 1, 2, None])
    got = group_rows([a, b])
    want = _expected(list(zip(a.to_pylist(), b.to_pylist(), strict=True)))
    assert [got.rows(g).tolist() for g in range(got.num_groups)] == want
    assert [(got.value(0, g).as_py(), got.value(1, g).as_py()) for g in range(3)] == [
        ("x", 1),
        (None, 2),
        ("y", 1),
    ]


def test_no_rows() -> None:
    got = group_rows([pa.array([], pa.int64())])
    assert got.num_groups == 0
