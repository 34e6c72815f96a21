"""The ``_last_checkpoint`` hint: parsing and checksum (digest §2.5).

The hint is only an optimisation. :func:`parse_last_checkpoint` returns None for anything
it cannot trust (bad JSON, duplicate keys, missing version, checksum mismatch), and the
caller then lists the log from the start.

Example:
    >>> parse_last_checkpoint(b'{"version": 10, "size": 13}').version
    10
    >>> parse_last_checkpoint(b'{"version": 10, "si') is None
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class LastCheckpoint(NamedTuple):
    """The fields of the hint lakequery uses."""

    version: int
    size: int | None
    parts: int | None
    raw: dict[str, Any]


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _encode(text: str) -> str:
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in text.encode("utf-8"))


def _leaf_text(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return '"' + _encode(value) + '"'
    return json.dumps(value)


def _leaves(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, child in value.items():
            step = '"' + _encode(key) + '"'
            yield from _leaves(child, f"{path}+{step}" if path else step)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _leaves(child, f"{path}+{i}" if path else str(i))
    else:
        yield f"{path}={_leaf_text(value)}"


def checkpoint_checksum(document: dict[str, Any]) -> str:
    """MD5 of the canonical form of a ``_last_checkpoint`` document (``checksum`` dropped)."""
    body = {k: v for k, v in document.items() if k != "checksum"}
    canonical = ",".join(sorted(_leaves(body, ""), key=lambda s: s.encode("utf-8")))
    return _md5(canonical.encode("utf-8"))


def _md5(data: bytes) -> str:
    """MD5 hex digest, through CPython's built-in ``_md5`` where present: importing it
    takes ~0.1 ms, ``hashlib`` ~3.4 ms (it loads OpenSSL), and every fresh read of a
    table with a checkpoint checks this checksum."""
    try:
        from _md5 import md5  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # a build without the built-in hashes (e.g. for FIPS)
        from hashlib import md5
    return md5(data, usedforsecurity=False).hexdigest()  # type: ignore[no-any-return,unused-ignore]


def parse_last_checkpoint(data: bytes) -> LastCheckpoint | None:
    """Parses the hint, or returns None when it cannot be trusted."""
    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates)
        if not isinstance(doc, dict):
            return None
        version = doc["version"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            return None
    except (ValueError, KeyError, UnicodeDecodeError, RecursionError):  # nesting too deep
        return None
    expected = doc.get("checksum")
    try:
        if isinstance(expected, str) and checkpoint_checksum(doc) != expected:
            return None
    except RecursionError:  # nested just below json's limit: too deep for the checksum
        return None
    size = doc.get("size")
    parts = doc.get("parts")
    return LastCheckpoint(
        version,
        size if isinstance(size, int) else None,
        parts if isinstance(parts, int) else None,
        doc,
    )
