"""The _last_checkpoint hint (digest §2.5)."""

from __future__ import annotations

import json

import pytest
from tablekit import conformance_dir

from lakequery.protocol.last_checkpoint import checkpoint_checksum, parse_last_checkpoint

CONFORMANCE = conformance_dir() / "tables"


def test_digest_test_vector() -> None:
    doc = json.loads(
        '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", '
        '[1, 2], {"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
    )
    assert checkpoint_checksum(doc) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_real_hints_with_checksums_validate() -> None:
    hints = sorted(CONFORMANCE.glob("*/_delta_log/_last_checkpoint"))
    assert hints, f"no conformance tables under {CONFORMANCE}"
    checked = 0
    for path in hints:
        raw = path.read_bytes()
        if not raw.strip():
            assert parse_last_checkpoint(raw) is None
            continue
        doc = json.loads(raw)
        parsed = parse_last_checkpoint(raw)
        assert parsed is not None, path
        assert parsed.version == doc["version"]
        checked += "checksum" in doc
    assert checked >= 3


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b'{"version": 10, "si',
        b'{"version": 10, "version": 11}',
        b'{"size": 3}',
        b'{"version": -1}',
        b'{"version": "10"}',
        b'{"version": 10, "size": 3, "checksum": "00000000000000000000000000000000"}',
        b"[1, 2]",
    ],
)
def test_untrustworthy_hints_are_dropped(raw: bytes) -> None:
    assert parse_last_checkpoint(raw) is None


def test_good_checksum_accepted() -> None:
    doc = {"version": 7, "size": 4, "parts": 2}
    doc_with = dict(doc, checksum=checkpoint_checksum(doc))
    parsed = parse_last_checkpoint(json.dumps(doc_with).encode())
    assert parsed is not None and (parsed.version, parsed.size, parsed.parts) == (7, 4, 2)
