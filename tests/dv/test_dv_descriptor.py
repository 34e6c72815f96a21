"""The ``deletionVector`` descriptor and its derived values (digest §11.2, §11.3)."""

from __future__ import annotations

import json
import uuid

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import given, settings

from lakequery.dv import z85
from lakequery.dv.descriptor import (
    EMPTY_DV_SIZE,
    Descriptor,
    check_descriptors,
    new_uuid_path,
)
from lakequery.errors import DeletionVectorError

INLINE_B = "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
INLINE_B_BYTES = bytes.fromhex(
    "D1D33964 0100000000000000 00000000 3A300000 01000000 00000500 10000000"
    " 0300 0400 0700 0B00 1200 1D00"
)
UUID_D2 = "d2c639aa-8816-431a-aaf6-d3fe2512ff61"
UUID_61 = "61d16c75-6994-46b7-a15b-8b538852e50e"


# --- unique ids ------------------------------------------------------------------------------


def test_unique_id_with_offset_digest_example() -> None:
    d = Descriptor.from_dict(
        {
            "storageType": "u",
            "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
            "offset": 4,
            "sizeInBytes": 36,
            "cardinality": 2,
        }
    )
    assert d.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"


@pytest.mark.parametrize("offset_field", [{}, {"offset": None}])
def test_unique_id_without_offset(offset_field: dict[str, object]) -> None:
    d = Descriptor.from_dict(
        {
            "storageType": "u",
            "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
            "sizeInBytes": 36,
            "cardinality": 2,
            **offset_field,
        }
    )
    assert d.offset is None
    assert d.unique_id == "uab^-aqEH.-t@S}K{vb[*k^"
    assert "offset" not in d.to_dict()


def test_unique_id_of_inline_dv() -> None:
    d = Descriptor.from_dict(
        {"storageType": "i", "pathOrInlineDv": INLINE_B, "sizeInBytes": 44, "cardinality": 6}
    )
    assert d.unique_id == "i" + INLINE_B
    assert d.is_inline


def test_offset_zero_is_kept_in_the_unique_id() -> None:
    d = Descriptor("u", "vBn[lx{q8@P<9BNH/isA", 0, 36, 2)
    assert d.unique_id == "uvBn[lx{q8@P<9BNH/isA@0"
    assert d.to_dict()["offset"] == 0


def test_unique_ids_differ_by_offset_in_the_same_file() -> None:
    ids = {Descriptor("u", "vBn[lx{q8@P<9BNH/isA", o, 36, 2).unique_id for o in (1, 45, 89)}
    assert len(ids) == 3


@settings(max_examples=100, deadline=None)
@given(
    storage_type=st.sampled_from("uip"),
    path=st.text(min_size=1, max_size=40),
    offset=st.none() | st.integers(0, 2**31 - 1),
    size=st.integers(0, 2**31 - 1),
    card=st.integers(0, 2**62),
)
def test_dict_round_trip_through_json(
    storage_type: str, path: str, offset: int | None, size: int, card: int
) -> None:
    d = Descriptor(storage_type, path, offset, size, card)
    again = Descriptor.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again == d
    assert again.unique_id == d.unique_id


# --- absolute paths ----------------------------------------------------------------------------


def test_absolute_path_with_prefix_digest_example() -> None:
    d = Descriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 1, 36, 2)
    expected = f"s3://mytable/ab/deletion_vector_{UUID_D2}.bin"
    assert d.absolute_path("s3://mytable/") == expected
    assert d.absolute_path("s3://mytable") == expected


def test_absolute_path_without_prefix_digest_example() -> None:
    d = Descriptor("u", "vBn[lx{q8@P<9BNH/isA", 1, 36, 2)
    assert d.absolute_path("/data/t") == f"/data/t/deletion_vector_{UUID_61}.bin"
    assert d.absolute_path("/data/t/") == f"/data/t/deletion_vector_{UUID_61}.bin"


def test_absolute_path_with_multi_character_prefix() -> None:
    u = uuid.UUID(UUID_61)
    d = Descriptor("u", new_uuid_path(u, "x7q"), 1, 36, 2)
    assert d.path_or_inline_dv == "x7qvBn[lx{q8@P<9BNH/isA"
    assert d.absolute_path("memory://t") == f"memory://t/x7q/deletion_vector_{UUID_61}.bin"


@settings(max_examples=100, deadline=None)
@given(raw=st.binary(min_size=16, max_size=16), prefix=st.text("abcdefghij0123456789", max_size=4))
def test_new_uuid_path_round_trips_through_absolute_path(raw: bytes, prefix: str) -> None:
    u = uuid.UUID(bytes=raw)
    d = Descriptor("u", new_uuid_path(u, prefix), 1, 10, 1)
    assert len(d.path_or_inline_dv) == 20 + len(prefix)
    seg = f"{prefix}/" if prefix else ""
    assert d.absolute_path("/r") == f"/r/{seg}deletion_vector_{u}.bin"


@pytest.mark.parametrize(
    ("encoded", "decoded"),
    [
        (
            "s3://bucket/dvs/deletion_vector_1.bin",
            "s3://bucket/dvs/deletion_vector_1.bin",
        ),
        (
            "file:///data/dv%20dir/deletion_vector_x.bin",
            "/data/dv dir/deletion_vector_x.bin",  # a local file URI in storage form
        ),
        ("s3a://b/deletion_vector_z.bin", "s3://b/deletion_vector_z.bin"),
        (
            "s3://b/a%253Ab/deletion_vector_y.bin",
            "s3://b/a%3Ab/deletion_vector_y.bin",
        ),
    ],
)
def test_absolute_path_of_p_is_the_uri_decoded(encoded: str, decoded: str) -> None:
    d = Descriptor("p", encoded, 1, 36, 2)
    assert d.absolute_path("/some/other/root") == decoded
    assert d.unique_id == f"p{encoded}@1"


def test_inline_and_unknown_types_have_no_file() -> None:
    with pytest.raises(ValueError):
        Descriptor("i", INLINE_B, None, 44, 6).absolute_path("/t")
    with pytest.raises(ValueError):
        Descriptor("r", "some/relative/path.bin", 1, 44, 6).absolute_path("/t")


def test_u_path_shorter_than_a_uuid_is_rejected() -> None:
    with pytest.raises(ValueError):
        Descriptor("u", "abc", 1, 36, 2).absolute_path("/t")


# --- inline bytes -----------------------------------------------------------------------------


def test_inline_bytes_conforming_example() -> None:
    d = Descriptor("i", INLINE_B, None, 44, 6)
    assert d.inline_bytes() == INLINE_B_BYTES


def test_inline_bytes_legacy_example() -> None:
    d = Descriptor("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", None, 40, 6)
    assert d.inline_bytes() == bytes.fromhex(
        "6439D3D0 00000001 0000001C 3A300000 01000000 00000500 10000000 03000400 07000B00 12001D00"
    )


def test_inline_bytes_drop_z85_padding() -> None:
    # 38 payload bytes are padded to 40 before encoding; sizeInBytes keeps 38
    raw = bytes(range(1, 39))
    d = Descriptor("i", z85.encode(raw, pad=True), None, 38, 1)
    assert d.inline_bytes() == raw


def test_inline_bytes_of_a_file_dv_is_an_error() -> None:
    with pytest.raises(ValueError):
        Descriptor("u", "vBn[lx{q8@P<9BNH/isA", 1, 36, 2).inline_bytes()


# --- the replay's check of live descriptors ---------------------------------------------------

_DV_STRUCT = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
_small = st.one_of(st.none(), st.integers(-2, 2), st.sampled_from([12, 13, 40]))
_descriptor = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "storageType": st.sampled_from([None, "u", "i", "p", "x", "uu", "i\n"]),
            "pathOrInlineDv": st.sampled_from([None, "ab", ""]),
            "offset": _small,
            "sizeInBytes": _small,
            "cardinality": _small,
        }
    ),
)


def _first_rule_broken(d: dict[str, object] | None) -> bool:
    """The rules of ``check_descriptors``, one descriptor at a time, in plain Python."""
    if d is None or all(v is None for v in d.values()):
        return False  # no descriptor
    kind, size, card, offset = d["storageType"], d["sizeInBytes"], d["cardinality"], d["offset"]
    return bool(
        kind not in ("u", "i", "p")
        or d["pathOrInlineDv"] is None
        or size is None
        or card is None
        or int(size) < 0  # type: ignore[call-overload]
        or int(card) < 0  # type: ignore[call-overload]
        or (offset is not None and int(offset) < 0)  # type: ignore[call-overload]
        or (kind == "i" and offset is not None)
        or (card == 0 and int(size) > EMPTY_DV_SIZE)  # type: ignore[call-overload]
    )


_GOOD = {
    "storageType": "u",
    "pathOrInlineDv": "ab",
    "offset": 1,
    "sizeInBytes": 40,
    "cardinality": 2,
}
#: one descriptor per rule, each breaking only that rule, plus the edge cases that pass
_CASES = [
    {"storageType": None},
    {"storageType": "x"},
    {"storageType": "i\n"},
    {"pathOrInlineDv": None},
    {"sizeInBytes": None},
    {"sizeInBytes": -1},
    {"cardinality": None},
    {"cardinality": -1},
    {"offset": -1},
    {"storageType": "i", "offset": 0},
    {"cardinality": 0, "sizeInBytes": 13},
    {"cardinality": 0, "sizeInBytes": 12},
    {"storageType": "i", "offset": None},
    {"offset": None},
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_descriptor, st.sampled_from([_GOOD | c for c in _CASES])), max_size=6))
def test_check_descriptors_refuses_exactly_the_malformed(
    dvs: list[dict[str, object] | None],
) -> None:
    """The quick pass that spares most tables pyarrow's scalar conversions (and its pandas
    import) must never let a descriptor through that the full rules refuse."""
    files = pa.table(
        {
            "path": pa.array([f"f{i}" for i in range(len(dvs))], pa.string()),
            "deletion_vector": pa.array(dvs, _DV_STRUCT),
        }
    )
    bad = [i for i, d in enumerate(dvs) if _first_rule_broken(d)]
    if bad:
        with pytest.raises(DeletionVectorError, match="malformed descriptor"):
            check_descriptors(files)
    else:
        check_descriptors(files)
