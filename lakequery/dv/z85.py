"""Z85 (ZeroMQ base-85) with Delta's padding rule (digest §11.4).

Example:
    >>> encode(bytes.fromhex("864FD26FB559F75B"))
    'HelloWorld'
    >>> decode("HelloWorld").hex()
    '864fd26fb559f75b'
"""

from __future__ import annotations

import numpy as np

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_DECODE = np.full(256, 255, dtype=np.uint8)
_DECODE[np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)] = np.arange(85, dtype=np.uint8)
_ENCODE = np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)
_POW = np.array([85**4, 85**3, 85**2, 85, 1], dtype=np.uint64)


def encode(data: bytes, *, pad: bool = False) -> str:
    """Encodes bytes whose length is a multiple of 4 (or pads with zeros when ``pad``)."""
    if len(data) % 4:
        if not pad:
            raise ValueError(f"Z85 input length {len(data)} is not a multiple of 4")
        data = data + b"\x00" * (4 - len(data) % 4)
    words = np.frombuffer(data, dtype=">u4").astype(np.uint64)
    digits = (words[:, None] // _POW[None, :]) % 85
    return _ENCODE[digits.astype(np.uint8)].tobytes().decode("ascii")


def decode(text: str, size: int | None = None) -> bytes:
    """Decodes Z85 text; ``size`` keeps only the first bytes (Delta's padding rule)."""
    raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    if raw.size % 5:
        raise ValueError(f"Z85 input length {raw.size} is not a multiple of 5")
    values = _DECODE[raw]
    if (values == 255).any():
        raise ValueError("Z85 input holds a character outside the alphabet")
    words = (values.reshape(-1, 5).astype(np.uint64) * _POW[None, :]).sum(axis=1)
    if (words > 0xFFFFFFFF).any():
        raise ValueError("Z85 group overflows 32 bits")
    out: bytes = words.astype(">u4").tobytes()
    return out if size is None else out[:size]


def decode_tail_padded(text: str, size: int) -> bytes:
    """Decodes inline-DV text whose last group uses the "padded" Z85 variant some writers
    emit: a tail of ``k`` bytes is written as ``4 - k`` leading ``#`` (no valid group can
    start with ``#``) followed by the ``k + 1`` base-85 digits of the tail's big-endian
    value. Groups before the tail decode as usual; ``size`` bytes are kept.

    Example:
        >>> decode_tail_padded("HelloWorld##093", 10).hex()
        '864fd26fb559f75b0300'
    """
    head, tail = text[: len(text) - 5], text[len(text) - 5 :]
    pad = len(tail) - len(tail.lstrip("#"))
    if len(tail) != 5 or not 1 <= pad <= 3:
        raise ValueError("Z85 text has no padded tail group")
    value = 0
    for ch in tail[pad:]:
        digit = int(_DECODE[ord(ch)]) if ord(ch) < 256 else 255
        if digit == 255:
            raise ValueError("Z85 input holds a character outside the alphabet")
        value = value * 85 + digit
    width = 4 - pad
    if value >= 1 << (8 * width):
        raise ValueError("Z85 padded tail group overflows its bytes")
    out = (decode(head) if head else b"") + value.to_bytes(width, "big")
    return out[:size]
