"""Time travel by version and by timestamp (digest §16) through the public API."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from tablekit import TableKit, commit_info, metadata_action, protocol_action

import lakequery as lq

SCHEMA = pa.schema([("id", pa.int64())])
T0 = 1_700_000_000_000  # ms, 2023-11-14T22:13:20Z
UTC = dt.timezone.utc


def at(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)


def ids(snap: lq.Snapshot) -> list[int]:
    return sorted(snap.scan().to_arrow().column("id").to_pylist())


def build(root: Path, mtimes_ms: list[int], *, ict: list[int] | None = None) -> TableKit:
    """v0 creates the table; every later version appends the one row ``id = version``."""
    kit = TableKit(root)
    config = {"delta.enableInCommitTimestamps": "true"} if ict is not None else {}
    proto = protocol_action(1, 7, None, ["inCommitTimestamp"]) if ict is not None else None

    def info(v: int) -> dict[str, object]:
        # commitInfo.timestamp deliberately differs from both the file time and the ICT
        extra = {"inCommitTimestamp": ict[v]} if ict is not None else {}
        return commit_info("WRITE", timestamp=T0 + 86_400_000 + v, **extra)

    kit.create(SCHEMA, configuration=config, protocol=proto, info=info(0))
    for v in range(1, len(mtimes_ms)):
        add = kit.write_parquet(pa.table({"id": pa.array([v], pa.int64())}))
        kit.commit([add], info=info(v))
    for v, ms in enumerate(mtimes_ms):
        kit.set_mtime(v, ms)
    return kit


def test_version_travel(tmp_path: Path) -> None:
    kit = build(tmp_path / "t", [T0, T0 + 1000, T0 + 2000, T0 + 3000])
    table = lq.DeltaTable(kit.uri)
    for v in range(4):
        snap = table.snapshot(version=v)
        assert snap.version == v
        assert ids(snap) == list(range(1, v + 1))
    assert table.snapshot().version == 3


@pytest.mark.parametrize(
    ("as_of", "expected"),
    [
        (at(T0), 0),
        (at(T0 + 50_000), 0),
        (at(T0 + 100_000), 1),
        (at(T0 + 199_999), 1),
        (at(T0 + 200_000), 2),
        (at(T0 + 10_000_000), 2),  # after the latest commit: the latest version
        (at(T0 + 100_000).replace(tzinfo=None), 1),  # naive = UTC
        (at(T0 + 100_000).astimezone(dt.timezone(dt.timedelta(hours=5))), 1),
        (at(T0 + 99_999).astimezone(dt.timezone(dt.timedelta(hours=-7))), 0),
        ("2023-11-14T22:15:00Z", 1),  # T0 + 100 s
        ("2023-11-14T22:14:59.999Z", 0),
        ("2023-11-14T22:15:00", 1),  # naive ISO string = UTC
        ("2023-11-14 22:16:40", 2),  # T0 + 200 s, space separator
        ("2023-11-15T00:15:00+02:00", 1),  # the same instant as 22:15Z
        ("2023-11-15T00:14:59+02:00", 0),
    ],
)
def test_as_of(tmp_path: Path, as_of: dt.datetime | str, expected: int) -> None:
    kit = build(tmp_path / "t", [T0, T0 + 100_000, T0 + 200_000])
    table = lq.DeltaTable(kit.uri)
    snap = table.snapshot(as_of=as_of)
    assert snap.version == expected
    assert ids(snap) == list(range(1, expected + 1))


@pytest.mark.parametrize(
    "as_of", [at(T0 - 1), at(T0 - 1).replace(tzinfo=None), "2023-11-14T22:13:19.999Z", "2000-01-01"]
)
def test_as_of_before_earliest_commit_raises(tmp_path: Path, as_of: dt.datetime | str) -> None:
    kit = build(tmp_path / "t", [T0, T0 + 100_000])
    with pytest.raises(lq.VersionNotFoundError) as info:
        lq.DeltaTable(kit.uri).snapshot(as_of=as_of)
    assert isinstance(info.value, LookupError)


def test_non_monotonic_file_times_are_monotonised(tmp_path: Path) -> None:
    # raw file times: v1 before v0, v3 equal to v2
    kit = build(tmp_path / "t", [T0, T0 - 100_000, T0 + 200_000, T0 + 200_000, T0 + 150_000])
    table = lq.DeltaTable(kit.uri)
    # adjusted: v0 T0, v1 T0+1ms, v2 T0+200s, v3 T0+200s+1ms, v4 T0+200s+2ms
    assert table.snapshot(as_of=at(T0)).version == 0
    assert table.snapshot(as_of=at(T0 + 1)).version == 1
    assert table.snapshot(as_of=at(T0 + 199_999)).version == 1
    assert table.snapshot(as_of=at(T0 + 200_000)).version == 2
    assert table.snapshot(as_of=at(T0 + 200_001)).version == 3
    assert table.snapshot(as_of=at(T0 + 200_002)).version == 4
    # v1's raw time is before v0's, but after monotonisation nothing is before T0
    with pytest.raises(lq.VersionNotFoundError):
        table.snapshot(as_of=at(T0 - 50_000))
    times = {e.version: e.timestamp for e in table.history()}
    assert times == {
        0: at(T0),
        1: at(T0 + 1),
        2: at(T0 + 200_000),
        3: at(T0 + 200_001),
        4: at(T0 + 200_002),
    }


def test_in_commit_timestamps_decide_over_file_times(tmp_path: Path) -> None:
    ict = [T0, T0 + 100_000, T0 + 200_000]
    # file times are reversed and far away: they must not matter
    kit = build(tmp_path / "t", [T0 + 900_000, T0 + 800_000, T0 + 50_000], ict=ict)
    table = lq.DeltaTable(kit.uri)
    assert table.snapshot(as_of=at(T0 + 150_000)).version == 1
    assert table.snapshot(as_of=at(T0 + 200_000)).version == 2
    assert table.snapshot(as_of=at(T0 + 99_999)).version == 0
    with pytest.raises(lq.VersionNotFoundError):
        table.snapshot(as_of=at(T0 - 1))
    assert table.snapshot(version=1).timestamp == at(T0 + 100_000)
    assert [e.timestamp for e in table.history()] == [at(t) for t in reversed(ict)]


def test_in_commit_timestamps_enabled_mid_table(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA, mtime_ms=T0)
    kit.commit(
        [kit.write_parquet(pa.table({"id": pa.array([1], pa.int64())}))], mtime_ms=T0 + 100_000
    )
    enable = metadata_action(
        SCHEMA,
        configuration={
            "delta.enableInCommitTimestamps": "true",
            "delta.inCommitTimestampEnablementVersion": "2",
            "delta.inCommitTimestampEnablementTimestamp": str(T0 + 300_000),
        },
    )
    kit.commit(
        [protocol_action(1, 7, None, ["inCommitTimestamp"]), enable],
        info=commit_info("SET TBLPROPERTIES", inCommitTimestamp=T0 + 300_000),
        mtime_ms=T0 + 10_000,  # file times from here on are meaningless
    )
    kit.commit(
        [kit.write_parquet(pa.table({"id": pa.array([3], pa.int64())}))],
        info=commit_info("WRITE", inCommitTimestamp=T0 + 400_000),
        mtime_ms=T0 + 20_000,
    )
    table = lq.DeltaTable(kit.uri)
    assert table.snapshot(as_of=at(T0 + 50_000)).version == 0
    assert table.snapshot(as_of=at(T0 + 150_000)).version == 1
    assert table.snapshot(as_of=at(T0 + 299_999)).version == 1
    assert table.snapshot(as_of=at(T0 + 300_000)).version == 2
    assert table.snapshot(as_of=at(T0 + 399_999)).version == 2
    assert table.snapshot(as_of=at(T0 + 400_000)).version == 3
    assert table.snapshot(as_of=at(T0 + 999_999)).version == 3


def test_snapshot_timestamp_agrees_with_history_and_as_of(tmp_path: Path) -> None:
    """Without ICT, a commit's timestamp is its (monotonised) file time (digest §16): the
    same value must come out of ``Snapshot.timestamp``, ``history()`` and ``as_of``."""
    mtimes = [T0, T0 + 100_000, T0 + 200_000]
    kit = build(tmp_path / "t", mtimes)
    table = lq.DeltaTable(kit.uri)
    history = {e.version: e.timestamp for e in table.history()}
    assert history == {v: at(ms) for v, ms in enumerate(mtimes)}
    for v in range(3):
        snap = table.snapshot(as_of=history[v])
        assert snap.version == v
        assert snap.timestamp == history[v]


def test_time_travel_after_log_cleanup(tmp_path: Path) -> None:
    kit = build(tmp_path / "t", [T0, T0 + 100_000, T0 + 200_000, T0 + 300_000, T0 + 400_000])
    kit.checkpoint(3)
    for v in range(3):
        kit.commit_path(v).unlink()
    table = lq.DeltaTable(kit.uri)
    assert ids(table.snapshot(version=3)) == [1, 2, 3]
    assert ids(table.snapshot(version=4)) == [1, 2, 3, 4]
    with pytest.raises(lq.VersionNotFoundError) as info:
        table.snapshot(version=2)
    assert info.value.version == 2
    assert table.snapshot(as_of=at(T0 + 300_000)).version == 3
    assert table.snapshot(as_of=at(T0 + 350_000)).version == 3
    with pytest.raises(lq.VersionNotFoundError):
        table.snapshot(as_of=at(T0 + 250_000))  # version 2 is no longer reconstructable


def test_a_version_past_the_end_names_the_whole_range(tmp_path: Path) -> None:
    """With a checkpoint (and its ``_last_checkpoint`` hint) the log is listed from the
    checkpoint, which cannot tell which older versions exist: the error said 3..3."""
    kit = build(tmp_path / "t", [T0, T0 + 100_000, T0 + 200_000, T0 + 300_000])
    kit.checkpoint(3)
    table = lq.DeltaTable(kit.uri)
    with pytest.raises(lq.VersionNotFoundError, match=r"versions: 0\.\.3") as info:
        table.snapshot(version=9)
    assert (info.value.earliest, info.value.latest) == (0, 3)
    for v in range(3):
        kit.commit_path(v).unlink()  # now 3 is the earliest indeed
    with pytest.raises(lq.VersionNotFoundError, match=r"versions: 3\.\.3"):
        lq.DeltaTable(kit.uri).snapshot(version=9)


def test_version_and_as_of_together_is_refused(tmp_path: Path) -> None:
    kit = build(tmp_path / "t", [T0, T0 + 100_000])
    with pytest.raises(ValueError):
        lq.DeltaTable(kit.uri).snapshot(version=0, as_of=at(T0))


def test_unparseable_as_of_string_is_a_value_error(tmp_path: Path) -> None:
    kit = build(tmp_path / "t", [T0, T0 + 100_000])
    with pytest.raises(ValueError):
        lq.DeltaTable(kit.uri).snapshot(as_of="yesterday-ish")


def test_time_travel_snapshots_are_independent(tmp_path: Path) -> None:
    kit = build(tmp_path / "t", [T0, T0 + 100_000, T0 + 200_000])
    table = lq.DeltaTable(kit.uri)
    old = table.snapshot(version=1)
    new = table.snapshot()
    kit.commit([kit.write_parquet(pa.table({"id": pa.array([99], pa.int64())}))])
    assert ids(old) == [1]
    assert ids(new) == [1, 2]
    assert ids(table.snapshot()) == [1, 2, 99]


def test_enabling_in_commit_timestamps_after_a_commit_from_a_clock_ahead(
    tmp_path: Path,
) -> None:
    """The enabling commit's timestamp is above the previous commit's time as time travel
    reads it (its file's time, from a store whose clock may run ahead): commit times stay
    increasing and a time after the enabling commit finds it."""
    import json
    import os
    import time

    uri = str(tmp_path / "t")
    for i in range(3):
        lq.write(uri, pa.table({"x": [i]}), mode="append")
    ahead = time.time() + 60
    os.utime(Path(uri) / "_delta_log" / f"{2:020d}.json", (ahead, ahead))
    table = lq.DeltaTable(uri)
    version = table.alter.set_properties({"delta.enableInCommitTimestamps": "true"}).version
    first = (Path(uri) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()[0]
    ict = json.loads(first)["commitInfo"]["inCommitTimestamp"]
    assert ict > int(ahead * 1000)
    times = [e.timestamp for e in reversed(table.history())]
    assert times == sorted(times) and len(set(times)) == len(times)
    later = table.history()[0].timestamp + dt.timedelta(seconds=1)
    assert table.version_as_of(later) == version


def test_times_around_the_enablement_are_searched_on_their_side(tmp_path: Path) -> None:
    """Digest §16: a time at or after the enablement is searched among the versions with
    in-commit timestamps, an earlier one among the file times before, even when a file
    time before the enablement runs past the in-commit timestamps (another writer's
    clock)."""
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA, mtime_ms=T0)
    for mtime in (T0 + 500_000, T0 + 510_000):  # versions 1 and 2, stamped late
        one = pa.table({"id": pa.array([1], pa.int64())})
        kit.commit([kit.write_parquet(one)], mtime_ms=mtime)
    enable = metadata_action(
        SCHEMA,
        configuration={
            "delta.enableInCommitTimestamps": "true",
            "delta.inCommitTimestampEnablementVersion": "3",
            "delta.inCommitTimestampEnablementTimestamp": str(T0 + 300_000),
            "delta.enableChangeDataFeed": "true",
        },
    )
    kit.commit(
        [protocol_action(1, 7, None, ["inCommitTimestamp", "changeDataFeed"]), enable],
        info=commit_info("SET TBLPROPERTIES", inCommitTimestamp=T0 + 300_000),
        mtime_ms=T0 + 600_000,
    )
    kit.commit(
        [kit.write_parquet(pa.table({"id": pa.array([3], pa.int64())}))],
        info=commit_info("WRITE", inCommitTimestamp=T0 + 400_000),
        mtime_ms=T0 + 700_000,
    )
    table = lq.DeltaTable(kit.uri)
    assert table.snapshot(as_of=at(T0 + 250_000)).version == 0  # before: file times
    assert table.snapshot(as_of=at(T0 + 299_999)).version == 0
    assert table.snapshot(as_of=at(T0 + 350_000)).version == 3  # after: in-commit times
    assert table.snapshot(as_of=at(T0 + 450_000)).version == 4
    # the change feed's time bounds: the same search
    feed = table.changes(starting_timestamp=at(T0 + 350_000), ending_timestamp=at(T0 + 450_000))
    assert (feed.starting_version, feed.ending_version) == (4, 4)
