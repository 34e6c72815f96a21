"""lakequery.arrow_kernels calls each kernel as pyarrow.compute's function of the same name
would: same inputs, option arguments given positionally, by keyword or as ``options=``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakequery import arrow_kernels as kernels

S = pa.array(["a/b", "c", None, "a/../d", "%2E/x", ""])
N = pa.array([3, None, -1, 7, 0, 2], pa.int64())
B = pa.array([True, False, None, True, False, True])
B2 = pa.array([False, False, True, None, True, True])
CHUNKED = pa.chunked_array([["x", "y/z"], [None, "y/z"]])
STRUCT = pa.array([{"k": "u", "n": 1}, None, {"k": None, "n": 3}])
MAP = pa.array([[("t", "1")], [], None], pa.map_(pa.string(), pa.string()))
LISTS = pa.array([[1, 2, 3], [], None, [4]], pa.list_(pa.int64()))
TABLE = pa.table({"s": S, "i": N})

#: (kernel, positional arguments, keyword arguments)
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("and_", (B, B2), {}),
    ("or_", (B, B2), {}),
    ("and_kleene", (B, B2), {}),
    ("invert", (B,), {}),
    ("is_valid", (S,), {}),
    ("is_null", (S,), {}),
    ("is_null", (pa.array([1.0, float("nan"), None]),), {"nan_is_null": True}),
    ("equal", (N, pa.scalar(3, pa.int64())), {}),
    ("not_equal", (S, S), {}),
    ("less", (N, pa.scalar(1, pa.int64())), {}),
    ("greater", (N, N), {}),
    ("less_equal", (N, pa.scalar(2, pa.int64())), {}),
    ("if_else", (B, S, pa.scalar("no")), {}),
    ("add", (N, N), {}),
    ("add_checked", (N, pa.scalar(1, pa.int64())), {}),
    ("multiply", (N, pa.scalar(3, pa.int64())), {}),
    ("multiply_checked", (N, N), {}),
    ("is_nan", (pa.array([1.0, float("nan"), None]),), {}),
    ("min_max", (N,), {}),
    ("count_distinct", (S,), {"mode": "all"}),
    ("strftime", (pa.array([0, None], pa.timestamp("us", "UTC")),), {"format": "%Y-%m-%dT%H"}),
    ("dictionary_encode", (S,), {"null_encoding": "encode"}),
    ("run_end_decode", (pa.RunEndEncodedArray.from_arrays([2, 3], ["x", None]),), {}),
    ("any", (B,), {}),
    ("any", (pa.array([None, None], pa.bool_()),), {"skip_nulls": False, "min_count": 0}),
    ("all", (B,), {}),
    ("min", (N,), {}),
    ("max", (N,), {}),
    ("max", (pa.array([], pa.int64()),), {"min_count": 0}),
    ("sum", (N,), {}),
    ("sum", (pa.array([], pa.int64()),), {"min_count": 0}),
    ("match_substring", (S, "/"), {}),
    ("match_substring", (S,), {"pattern": "A", "ignore_case": True}),
    ("match_substring_regex", (S, "^$|/$"), {}),
    ("starts_with", (S, "a"), {}),
    ("replace_substring", (S, "%2E", "."), {}),
    ("replace_substring_regex", (S,), {"pattern": "^a", "replacement": "z"}),
    ("extract_regex", (S, r"(?P<head>[a-z])/(?P<tail>.*)"), {}),
    ("utf8_slice_codeunits", (S, 0, -1), {}),
    ("utf8_replace_slice", (S,), {"start": 0, "stop": 0, "replacement": "root/"}),
    ("utf8_lower", (pa.array(["AbC", None]),), {}),
    ("split_pattern", (S, "/"), {"max_splits": 1, "reverse": True}),
    ("binary_length", (S,), {}),
    ("binary_join_element_wise", (S, S, "-"), {}),
    ("binary_join_element_wise", (S, S, "-"), {"null_handling": "replace"}),
    ("struct_field", (STRUCT, "n"), {}),
    ("map_lookup", (MAP, pa.scalar("t"), "first"), {}),
    ("list_slice", (LISTS, 0, 1), {}),
    ("list_flatten", (LISTS,), {}),
    ("is_in", (S, pa.array(["c", "a/b"])), {}),
    ("index_in", (S,), {"value_set": pa.array(["c", "a/b"])}),
    ("indices_nonzero", (B,), {}),
    ("unique", (CHUNKED,), {}),
    ("drop_null", (S,), {}),
    ("filter", (S, B), {}),
    ("filter", (S, B), {"null_selection_behavior": "emit_null"}),
    ("filter", (TABLE, B), {}),
    ("filter", (CHUNKED, pa.chunked_array([[True, False], [True, True]])), {}),
    ("take", (TABLE, pa.array([2, 0], pa.int64())), {}),
    ("take", (S, pa.array([5, None], pa.int64())), {}),
    ("sort_indices", (TABLE,), {"sort_keys": [("i", "ascending"), ("s", "descending")]}),
    ("sort_indices", (N,), {}),
    ("cast", (N, pa.float64()), {}),
    ("cast", (pa.array([300], pa.int64()), pa.int8()), {"safe": False}),
    ("fill_null", (N, 0), {}),
    ("fill_null", (N, pa.scalar(5, pa.int32())), {}),
    ("index", (S, "c"), {}),
    ("index", (S, "absent"), {}),
]


@pytest.mark.parametrize(
    ("name", "args", "kwargs"), CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CALLS)]
)
def test_each_kernel_is_pyarrow_computes_function(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    got = getattr(kernels, name)(*args, **kwargs)
    want = getattr(pc, name)(*args, **kwargs)
    assert type(got) is type(want)
    assert got.equals(want)


def test_options_can_be_given_as_an_instance_or_a_dict() -> None:
    want = pc.match_substring(S, "A", ignore_case=True)
    options = pc.MatchSubstringOptions("A", ignore_case=True)
    assert kernels.match_substring(S, options=options).equals(want)
    assert kernels.match_substring(S, options={"pattern": "A", "ignore_case": True}).equals(want)
    assert kernels.cast(N, options=pc.CastOptions.safe(pa.float64())).equals(
        pc.cast(N, pa.float64())
    )


def test_wrong_calls_fail_as_in_pyarrow_compute() -> None:
    with pytest.raises(TypeError, match="positional"):
        kernels.and_(B)
    with pytest.raises(TypeError, match="options"):
        kernels.match_substring(S, "a", options=pc.MatchSubstringOptions("b"))
    with pytest.raises(TypeError, match="options"):
        kernels.invert(B, True)  # a kernel without options
    with pytest.raises(ValueError, match="not both"):
        kernels.cast(N, pa.float64(), options=pc.CastOptions.safe(pa.float64()))
    with pytest.raises(pa.ArrowInvalid):
        kernels.cast(pa.array([300], pa.int64()), pa.int8())  # safe by default


def test_expressions_class_is_pyarrows() -> None:
    assert kernels.Expression is pc.Expression
    assert isinstance(pc.field("x") > 1, kernels.Expression)


@pytest.mark.parametrize("data", [TABLE, TABLE.to_batches()[0]], ids=["table", "batch"])
def test_cast_columns_is_the_cast_method(data: Any) -> None:
    schema = pa.schema([("s", pa.large_string()), ("i", pa.float64())])
    got = kernels.cast_columns(data, schema)
    want = data.cast(schema)
    assert type(got) is type(want) and got.equals(want)
    with pytest.raises(ValueError, match="do not match"):
        kernels.cast_columns(data, pa.schema([("i", pa.float64()), ("s", pa.string())]))
    with pytest.raises(ValueError):
        data.cast(pa.schema([("i", pa.float64()), ("s", pa.string())]))
