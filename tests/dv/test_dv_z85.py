"""Z85 with Delta's padding rule (digest §11.4), against the digest's vectors and an
independent, plain-Python encoder written from the digest text."""

from __future__ import annotations

import string
import struct
import uuid

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from lakequery.dv import z85

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
BAD_CHARS = sorted(set(string.printable) - set(ALPHABET))


def reference_encode(data: bytes) -> str:
    """Digest §11.4, one big-endian word at a time."""
    assert len(data) % 4 == 0
    out = []
    for i in range(0, len(data), 4):
        (v,) = struct.unpack(">I", data[i : i + 4])
        out.append(
            "".join(ALPHABET[(v // 85**k) % 85] for k in (4, 3, 2, 1, 0)),
        )
    return "".join(out)


# --- digest vectors ---------------------------------------------------------------------------


def test_alphabet_is_the_digest_alphabet() -> None:
    assert z85.ALPHABET == ALPHABET
    assert len(set(ALPHABET)) == 85


def test_hello_world_vector() -> None:
    raw = bytes.fromhex("864FD26FB559F75B")
    assert z85.encode(raw) == "HelloWorld"
    assert z85.decode("HelloWorld") == raw


def test_padded_vector() -> None:
    raw = bytes.fromhex("0102030405")
    assert z85.encode(raw, pad=True) == "0rJua1POJ5"
    assert z85.decode("0rJua1POJ5", 5) == raw
    # without the size the zero padding is visible
    assert z85.decode("0rJua1POJ5") == raw + b"\x00\x00\x00"


def test_uuid_vector() -> None:
    u = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    assert z85.encode(u.bytes) == "^-aqEH.-t@S}K{vb[*k^"
    assert uuid.UUID(bytes=z85.decode("^-aqEH.-t@S}K{vb[*k^")) == u


def test_second_uuid_vector_from_the_real_dv() -> None:
    # digest §11.3 / §11.9(c): vBn[lx{q8@P<9BNH/isA names 61d16c75-...
    u = uuid.UUID(bytes=z85.decode("vBn[lx{q8@P<9BNH/isA"))
    assert str(u) == "61d16c75-6994-46b7-a15b-8b538852e50e"


def test_word_limits() -> None:
    assert z85.encode(b"\x00\x00\x00\x00") == "00000"
    assert z85.encode(b"\xff\xff\xff\xff") == "%nSc0"
    assert z85.decode("%nSc0") == b"\xff\xff\xff\xff"
    assert z85.encode(b"") == ""
    assert z85.decode("") == b""


# --- round trips --------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200).map(lambda b: b[: len(b) - len(b) % 4]))
def test_round_trip_multiple_of_four(data: bytes) -> None:
    text = z85.encode(data)
    assert len(text) == len(data) // 4 * 5
    assert text == reference_encode(data)
    assert set(text) <= set(ALPHABET)
    assert z85.decode(text) == data


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_round_trip_with_padding_and_size(data: bytes) -> None:
    text = z85.encode(data, pad=True)
    padded = data + b"\x00" * (-len(data) % 4)
    assert len(text) == len(padded) // 4 * 5
    assert text == reference_encode(padded)
    assert z85.decode(text, len(data)) == data
    if len(data) % 4:
        with pytest.raises(ValueError):
            z85.encode(data)
    else:
        assert z85.encode(data) == text


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=20).map(lambda s: s[: len(s) - len(s) % 5]))
def test_decode_encode_round_trip_of_valid_text(text: str) -> None:
    words = [text[i : i + 5] for i in range(0, len(text), 5)]
    overflow = any(
        sum(ALPHABET.index(c) * 85 ** (4 - k) for k, c in enumerate(w)) > 0xFFFFFFFF for w in words
    )
    if overflow:
        with pytest.raises(ValueError):
            z85.decode(text)
    else:
        assert z85.encode(z85.decode(text)) == text


# --- rejection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_CHARS)
def test_rejects_characters_outside_the_alphabet(bad: str) -> None:
    for pos in range(5):
        text = "HelloWorld"[:pos] + bad + "HelloWorld"[pos + 1 :]
        with pytest.raises(ValueError):
            z85.decode(text)


@pytest.mark.parametrize("text", ["Hellö", "Hell\u00a0", "\u20ac1234", "Hell\x00World"])
def test_rejects_non_ascii_and_control_characters(text: str) -> None:
    with pytest.raises(ValueError):
        z85.decode(text)


@pytest.mark.parametrize("text", ["H", "Hell", "HelloW", "HelloWorl", "HelloWorld0"])
def test_rejects_lengths_that_are_not_multiples_of_five(text: str) -> None:
    with pytest.raises(ValueError, match="multiple of 5"):
        z85.decode(text)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 9])
def test_encode_rejects_lengths_that_are_not_multiples_of_four(n: int) -> None:
    with pytest.raises(ValueError, match="multiple of 4"):
        z85.encode(bytes(range(n)))


@pytest.mark.parametrize("text", ["%nSc1", "#####", "00000%nSc1", "$0000"])
def test_rejects_groups_that_overflow_32_bits(text: str) -> None:
    with pytest.raises(ValueError):
        z85.decode(text)
