"""Clustering keys: numba kernels against their reference twins, order preservation for
every supported column type, and the curves' defining properties."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

from lakequery.commands.zorder import KeyBuilder, KeySampler, raw_keys
from lakequery.errors import SchemaError
from udfs.zorder import (
    hilbert_index,
    hilbert_index_reference,
    interleave_bits,
    interleave_bits_reference,
    quantile_boundaries,
    rank_keys,
    rank_keys_reference,
    raw_key_binary_reference,
    raw_key_float64_reference,
    raw_key_int64_reference,
    raw_keys_binary,
    raw_keys_float64,
    raw_keys_int64,
    row_numbers,
    sort_keys,
    tag_row_numbers,
)

i64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(i64, max_size=50))
def test_raw_int64_matches_reference(values: list[int]) -> None:
    got = raw_keys_int64(np.array(values, dtype=np.int64)).tolist()
    assert got == [raw_key_int64_reference(v) for v in values]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=50))
def test_raw_float64_matches_reference(values: list[float]) -> None:
    got = raw_keys_float64(np.array(values, dtype=np.float64)).tolist()
    assert got == [raw_key_float64_reference(v) for v in values]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.binary(max_size=12), max_size=40))
def test_raw_binary_matches_reference(values: list[bytes]) -> None:
    arr = pa.array(values, pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[: len(values) + 1]
    data_buf = arr.buffers()[2]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    got = raw_keys_binary(offsets, data).tolist()
    assert got == [raw_key_binary_reference(v) for v in values]


@settings(max_examples=200, deadline=None)
@given(
    raw=st.lists(st.integers(0, 2**64 - 1), max_size=40),
    sample=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=60),
    bits=st.integers(1, 64),
    limit=st.integers(1, 40),
    data=st.data(),
)
def test_rank_keys_match_reference(
    raw: list[int], sample: list[int], bits: int, limit: int, data: Any
) -> None:
    valid = data.draw(st.lists(st.booleans(), min_size=len(raw), max_size=len(raw)))
    bounds = quantile_boundaries(np.array(sample, dtype=np.uint64), limit)
    assert bounds.tolist() == sorted(set(bounds.tolist()))
    assert bounds.size <= limit
    got = rank_keys(
        np.array(raw, dtype=np.uint64), np.array(valid, dtype=np.bool_), bounds, bits
    ).tolist()
    want = rank_keys_reference(raw, valid, bounds.tolist(), bits)
    assert got == want
    assert all(k < 2**bits for k in got)


@settings(max_examples=200, deadline=None)
@given(
    step_bits=st.integers(0, 56),
    count=st.integers(9, 300),
    base=st.integers(0, 2**62),
    data=st.data(),
)
def test_rank_keys_match_reference_on_crowded_buckets(
    step_bits: int, count: int, base: int, data: Any
) -> None:
    # Many boundaries a few ``2**step_bits`` apart plus one far outlier put more than
    # HEAVY boundaries into one bucket of the first table: the kernel's second table
    # (sub-buckets) answers those searches.
    crowd = [base + k * (1 << step_bits) for k in range(count)]
    bounds = np.unique(np.array([v for v in crowd if v < 2**64 - 1] + [2**64 - 1], np.uint64))
    near = st.integers(max(0, base - 4), min(2**64 - 1, base + (count + 2) * (1 << step_bits)))
    raw = data.draw(st.lists(st.one_of(near, st.integers(0, 2**64 - 1)), max_size=60))
    valid = [True] * len(raw)
    bits = data.draw(st.integers(1, 64))
    got = rank_keys(np.array(raw, dtype=np.uint64), np.ones(len(raw), np.bool_), bounds, bits)
    assert got.tolist() == rank_keys_reference(raw, valid, bounds.tolist(), bits)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=300))
def test_tagged_sort_orders_rows_by_key_prefix_then_row(keys: list[int]) -> None:
    tagged = np.array(keys, dtype=np.uint64)
    bits = tag_row_numbers(tagged)
    assert 2**bits >= len(keys)
    sort_keys(tagged)
    order = row_numbers(tagged, bits).tolist()
    want = sorted(range(len(keys)), key=lambda i: (keys[i] >> bits, i))
    assert order == want


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(
        st.one_of(
            st.integers(0, 2**64 - 1),
            st.integers(0, 255),  # keys that differ in the low byte only
            st.integers(0, 255).map(lambda b: b << 56),  # ... in the top byte only
            st.sampled_from([0, 2**64 - 1, 2**63]),
        ),
        max_size=400,
    )
)
def test_sort_keys_sorts_like_numpy(keys: list[int]) -> None:
    got = np.array(keys, dtype=np.uint64)
    sort_keys(got)
    assert got.tolist() == sorted(keys)


def test_sort_keys_large_and_refusals() -> None:
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**63, 300_000, dtype=np.int64).astype(np.uint64) * np.uint64(2)
    keys[::7] = np.uint64(42)  # many equal keys
    want = np.sort(keys)
    sort_keys(keys)
    assert np.array_equal(keys, want)
    with pytest.raises(ValueError, match="contiguous 1-d uint64"):
        sort_keys(np.array([3, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="contiguous 1-d uint64"):
        sort_keys(np.arange(10, dtype=np.uint64)[::2])


@settings(max_examples=200, deadline=None)
@given(data=st.data(), dims=st.integers(1, 6))
def test_curves_match_reference(data: Any, dims: int) -> None:
    bits = data.draw(st.integers(1, 64 // dims))
    points = data.draw(
        st.lists(st.lists(st.integers(0, 2**bits - 1), min_size=dims, max_size=dims), max_size=20)
    )
    keys = np.array(points, dtype=np.uint64).reshape(len(points), dims).T.copy()
    if not points:
        keys = np.zeros((dims, 0), dtype=np.uint64)
    assert interleave_bits(keys, bits).tolist() == [
        interleave_bits_reference(p, bits) for p in points
    ]
    assert hilbert_index(keys, bits).tolist() == [hilbert_index_reference(p, bits) for p in points]
    # written over the first column's keys (what KeyBuilder.combine does): same keys
    for curve, reference in ((interleave_bits, interleave_bits_reference),
                             (hilbert_index, hilbert_index_reference)):  # fmt: skip
        scratch = keys.copy()
        assert curve(scratch, bits, out=scratch[0]).tolist() == [reference(p, bits) for p in points]


@pytest.mark.parametrize(("dims", "bits"), [(2, 1), (2, 3), (3, 2), (4, 2)])
def test_hilbert_is_a_continuous_bijection(dims: int, bits: int) -> None:
    side = 2**bits
    grid = np.stack(
        np.meshgrid(*[np.arange(side, dtype=np.uint64)] * dims, indexing="ij"), 0
    ).reshape(dims, -1)
    h = hilbert_index(grid, bits)
    assert sorted(h.tolist()) == list(range(side**dims))  # a bijection onto 0..n-1
    order = grid[:, np.argsort(h)].astype(np.int64)
    steps = np.abs(np.diff(order, axis=1)).sum(axis=0)
    assert set(steps.tolist()) == {1}  # consecutive cells are neighbours
    z = interleave_bits(grid, bits)
    assert sorted(z.tolist()) == list(range(side**dims))


# --- order preservation per column type -----------------------------------------------------

_UTC = dt.timezone.utc
TYPED = {
    "int8": (st.integers(-128, 127), pa.int8()),
    "int32": (st.integers(-(2**31), 2**31 - 1), pa.int32()),
    "int64": (i64, pa.int64()),
    "float32": (st.floats(width=32, allow_nan=False), pa.float32()),
    "float64": (st.floats(allow_nan=False), pa.float64()),
    "decimal": (
        st.decimals(min_value=-(10**8), max_value=10**8, places=2, allow_nan=False),
        pa.decimal128(12, 2),
    ),
    "date": (st.dates(), pa.date32()),
    "timestamp": (
        st.datetimes(
            min_value=dt.datetime(1900, 1, 1),
            max_value=dt.datetime(2200, 1, 1),
            timezones=st.just(_UTC),
        ),
        pa.timestamp("us", "UTC"),
    ),
    "timestamp_ntz": (
        st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)),
        pa.timestamp("us"),
    ),
    "string": (st.text(max_size=10), pa.string()),
    "binary": (st.binary(max_size=10), pa.binary()),
    "boolean": (st.booleans(), pa.bool_()),
}


def _sort_key(v: Any) -> Any:
    if isinstance(v, str):
        return v.encode()  # Arrow/Parquet order strings by their UTF-8 bytes
    if isinstance(v, float):
        return (v, math.copysign(1, v))  # -0.0 just below 0.0
    return v


@pytest.mark.parametrize("kind", sorted(TYPED))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_keys_preserve_order(kind: str, data: Any) -> None:
    strategy, typ = TYPED[kind]
    values = data.draw(st.lists(st.one_of(strategy, st.none()), min_size=1, max_size=40))
    arr = pa.array(values, typ)
    raw, valid = raw_keys(arr)
    assert valid.tolist() == [v is not None for v in values]
    # a chunked column (some chunks without nulls) is keyed chunk by chunk, into ``out``
    cut = data.draw(st.integers(0, len(values)))
    chunked = pa.chunked_array([arr.slice(0, cut), arr.slice(cut)], typ)
    out = np.full(len(values), 7, dtype=np.uint64)
    raw_c, valid_c = raw_keys(chunked, out=out)
    assert raw_c is out
    assert raw_c.tolist() == raw.tolist() and valid_c.tolist() == valid.tolist()
    present = sorted(
        (
            (_sort_key(v), int(k))
            for v, k, ok in zip(values, raw.tolist(), valid, strict=True)
            if ok
        ),
        key=lambda t: t[0],
    )
    ks = [k for _, k in present]
    assert ks == sorted(ks), f"raw keys of {kind} do not follow the values"
    # the final per-column key too, with nulls first
    sampler = KeySampler(["c"])
    sampler.add(pa.table({"c": arr}))
    final = sampler.builder().keys(pa.table({"c": arr})).tolist()
    by_value = sorted(
        (
            (v is not None, _sort_key(v) if v is not None else 0, f)
            for v, f in zip(values, final, strict=True)
        ),
        key=lambda t: (t[0], t[1]),
    )
    fs = [f for *_, f in by_value]
    assert fs == sorted(fs)


def test_narrow_ranges_spread_over_the_key_bits() -> None:
    # two columns spanning tiny ranges of int64 and double still use the high key bits
    t = pa.table({"a": np.arange(1000, 1100, dtype=np.int64), "b": np.linspace(0.5, 0.5001, 100)})
    sampler = KeySampler(["a", "b"])
    sampler.add(t)
    keys = sampler.builder().keys(t)
    assert int(keys.max()) > 2**62  # reaches the top bits
    assert len(set(keys.tolist())) == 100


def test_unsupported_types_are_refused() -> None:
    with pytest.raises(SchemaError):
        raw_keys(pa.array([[1]], pa.list_(pa.int64())))
    with pytest.raises(ValueError):
        KeyBuilder([], [], "zorder")
    with pytest.raises(ValueError):
        KeyBuilder(["a"], [np.zeros(0, np.uint64)], "peano")  # type: ignore[arg-type]


def test_decimal_and_dictionary_inputs() -> None:
    dec = pa.array([decimal.Decimal("-1.50"), decimal.Decimal("2.25")], pa.decimal128(5, 2))
    raw, _ = raw_keys(dec)
    assert raw[0] < raw[1]
    d = pa.array(["b", "a", "b"]).dictionary_encode()
    raw, _ = raw_keys(d)
    assert raw[1] < raw[0] == raw[2]
