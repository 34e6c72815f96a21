"""Log file names and segment selection (digest §2.4, §3)."""

from __future__ import annotations

import pytest

from lakequery.errors import CorruptLogError, VersionNotFoundError
from lakequery.protocol.log_files import (
    build_listing,
    classify,
    earliest_version,
    select_segment,
)


def _files(*names: str, size: int = 10) -> list[tuple[str, str, int, int]]:
    return [(f"/t/_delta_log/{n}", n, size, 1000 + i) for i, n in enumerate(names)]


def c(v: int) -> str:
    return f"{v:020d}.json"


@pytest.mark.parametrize(
    ("name", "kind", "version", "fmt"),
    [
        ("00000000000000000003.json", "commit", 3, None),
        ("00000000000000000010.checkpoint.parquet", "checkpoint", 10, "classic"),
        (
            "00000000000000000010.checkpoint.0000000001.0000000002.parquet",
            "checkpoint",
            10,
            "multi",
        ),
        (
            "00000000000000000030.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
            "checkpoint",
            30,
            "uuid",
        ),
        ("00000000000000000011.00000000000000000014.compacted.json", "compacted", 11, None),
        ("00000000000000000010.crc", "crc", 10, None),
    ],
)
def test_classify_known_names(name: str, kind: str, version: int, fmt: str | None) -> None:
    got = classify(name)
    assert got is not None
    assert (got.kind, got.version, got.checkpoint_format) == (kind, version, fmt)


@pytest.mark.parametrize(
    "name",
    [
        ".00000000000000000001.json.crc",
        "_last_checkpoint",
        "00000000000000000001.json.tmp",
        "1.json",
        "00000000000000000014.00000000000000000011.compacted.json",  # y < x
        "00000000000000000010.checkpoint.0000000003.0000000002.parquet",  # part > parts
    ],
)
def test_classify_ignores_other_names(name: str) -> None:
    assert classify(name) is None


def test_segment_uses_newest_checkpoint_and_following_commits() -> None:
    listing = build_listing(
        _files(*(c(v) for v in range(13)), "00000000000000000010.checkpoint.parquet")
    )
    seg = select_segment(listing, None, uri="/t")
    assert seg.version == 12
    assert seg.checkpoint is not None and seg.checkpoint.version == 10
    assert [f.version for f in seg.commits] == [11, 12]


def test_time_travel_ignores_newer_checkpoint() -> None:
    listing = build_listing(
        _files(*(c(v) for v in range(13)), "00000000000000000010.checkpoint.parquet")
    )
    seg = select_segment(listing, 7, uri="/t")
    assert seg.checkpoint is None
    assert [f.version for f in seg.commits] == list(range(8))


def test_incomplete_multipart_and_empty_checkpoints_are_ignored() -> None:
    names = [c(v) for v in range(6)]
    names += ["00000000000000000004.checkpoint.0000000001.0000000002.parquet"]
    files = _files(*names)
    files += _files("00000000000000000005.checkpoint.parquet", size=0)
    seg = select_segment(build_listing(files), None, uri="/t")
    assert seg.checkpoint is None
    assert len(seg.commits) == 6


def test_complete_multipart_checkpoint_is_used() -> None:
    names = [c(v) for v in range(6)]
    names += [f"00000000000000000004.checkpoint.000000000{i}.0000000002.parquet" for i in (1, 2)]
    seg = select_segment(build_listing(_files(*names)), None, uri="/t")
    assert seg.checkpoint is not None
    assert seg.checkpoint.format == "multi" and len(seg.checkpoint.files) == 2


def test_gap_in_commits_is_corruption_naming_the_missing_commit() -> None:
    listing = build_listing(_files(c(0), c(1), c(3)))
    with pytest.raises(CorruptLogError) as err:
        select_segment(listing, None, uri="/t")
    assert err.value.path.endswith(c(2))


def test_version_beyond_latest_or_before_earliest() -> None:
    listing = build_listing(_files(c(2), c(3), "00000000000000000002.checkpoint.parquet"))
    with pytest.raises(VersionNotFoundError):
        select_segment(listing, 9, uri="/t")
    with pytest.raises(VersionNotFoundError):
        select_segment(listing, 1, uri="/t")
    assert earliest_version(listing) == 2
    assert select_segment(listing, 2, uri="/t").commits == ()


def test_empty_listing() -> None:
    with pytest.raises(VersionNotFoundError):
        select_segment(build_listing([]), None, uri="/t")
