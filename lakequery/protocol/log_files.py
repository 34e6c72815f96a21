"""Names in ``_delta_log`` and the choice of files that make up a snapshot (digest §2.4, §3).

Pure functions over listings: no I/O here. :func:`select_segment` picks the newest
complete checkpoint at or below the target version and the contiguous commits after it.

Example:
    >>> from lakequery.protocol.log_files import classify
    >>> classify("00000000000000000010.checkpoint.parquet").kind
    'checkpoint'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from lakequery.errors import CorruptLogError, VersionNotFoundError

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_UUID = re.compile(r"^(\d{20})\.checkpoint\.([^.]+)\.(json|parquet)$")
_COMPACTED = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")
_CRC = re.compile(r"^(\d{20})\.crc$")

#: Preference among complete checkpoints of one version (digest §3 step 5).
_CHECKPOINT_RANK = {"classic": 0, "multi": 1, "uuid": 2}


class LogName(NamedTuple):
    """What a ``_delta_log`` file name says about itself."""

    kind: str  # commit | checkpoint | compacted | crc
    version: int
    end_version: int | None = None  # compacted files: last version covered
    checkpoint_format: str | None = None  # classic | multi | uuid
    part: int | None = None
    parts: int | None = None
    extension: str | None = None  # uuid checkpoints: json | parquet


def classify(name: str) -> LogName | None:
    """Classifies a file name found in ``_delta_log``; None for names to ignore."""
    if m := _COMMIT.match(name):
        return LogName("commit", int(m.group(1)))
    if m := _CLASSIC.match(name):
        return LogName("checkpoint", int(m.group(1)), checkpoint_format="classic")
    if m := _MULTI.match(name):
        part, parts = int(m.group(2)), int(m.group(3))
        if parts < 1 or not 1 <= part <= parts:
            return None
        return LogName("checkpoint", int(m.group(1)), None, "multi", part, parts)
    if m := _UUID.match(name):
        return LogName(
            "checkpoint", int(m.group(1)), checkpoint_format="uuid", extension=m.group(3)
        )
    if m := _COMPACTED.match(name):
        lo, hi = int(m.group(1)), int(m.group(2))
        return LogName("compacted", lo, end_version=hi) if hi > lo else None
    if m := _CRC.match(name):
        return LogName("crc", int(m.group(1)))
    return None


class LogFile(NamedTuple):
    """One classified file of the log, with its listing facts."""

    path: str
    name: LogName
    size: int
    modified_ms: int
    etag: str | None = None  # the store's entity tag, where it gives one

    @property
    def version(self) -> int:
        return self.name.version


class Checkpoint(NamedTuple):
    """A complete checkpoint: one file, or every part of a multi-part checkpoint."""

    version: int
    format: str  # classic | multi | uuid
    files: tuple[LogFile, ...]

    @property
    def sort_key(self) -> tuple[int, int, int, str]:
        return (
            self.version,
            _CHECKPOINT_RANK[self.format],
            len(self.files),
            self.files[0].path,
        )


class LogSegment(NamedTuple):
    """The files that reconstruct one version: a checkpoint (optional) plus commits."""

    version: int
    checkpoint: Checkpoint | None
    commits: tuple[LogFile, ...]  # ascending, contiguous, after the checkpoint

    @property
    def start_version(self) -> int:
        return self.checkpoint.version if self.checkpoint else 0


class Listing(NamedTuple):
    """A classified listing of ``_delta_log`` (names ascending)."""

    commits: tuple[LogFile, ...]
    checkpoints: tuple[Checkpoint, ...]

    @property
    def latest_version(self) -> int | None:
        versions = [c.version for c in self.commits] + [c.version for c in self.checkpoints]
        return max(versions) if versions else None


def build_listing(
    files: Iterable[tuple[str, str, int, int] | tuple[str, str, int, int, str | None]],
) -> Listing:
    """Classifies ``(path, name, size, modified_ms[, etag])`` tuples into commits and
    checkpoints.

    Zero-byte checkpoints and incomplete multi-part checkpoints are dropped (digest §3).
    """
    commits: list[LogFile] = []
    singles: list[Checkpoint] = []
    multi: dict[tuple[int, int], dict[int, LogFile]] = {}
    for path, base, size, modified, *etag in files:
        name = classify(base)
        if name is None:
            continue
        lf = LogFile(path, name, size, modified, etag[0] if etag else None)
        if name.kind == "commit":
            commits.append(lf)
        elif name.kind == "checkpoint" and size > 0:
            if name.checkpoint_format == "multi":
                assert name.part is not None and name.parts is not None
                multi.setdefault((name.version, name.parts), {})[name.part] = lf
            else:
                assert name.checkpoint_format is not None
                singles.append(Checkpoint(name.version, name.checkpoint_format, (lf,)))
    for (version, parts), found in multi.items():
        if len(found) == parts:
            ordered = tuple(found[i] for i in range(1, parts + 1))
            singles.append(Checkpoint(version, "multi", ordered))
    commits.sort(key=lambda f: f.version)
    singles.sort(key=lambda c: c.sort_key)
    return Listing(tuple(commits), tuple(singles))


def select_segment(listing: Listing, target: int | None, *, uri: str) -> LogSegment:
    """Chooses the checkpoint and commits that reconstruct ``target`` (latest if None).

    Raises:
        VersionNotFoundError: the target is newer than the log, or older than what the
            remaining files can reconstruct.
        CorruptLogError: a commit is missing between the checkpoint and the target.
    """
    latest = listing.latest_version
    if latest is None:
        raise VersionNotFoundError(uri, version=target, detail="the log holds no commit")
    version = latest if target is None else target
    if version > latest or version < 0:
        raise VersionNotFoundError(
            uri, version=version, earliest=earliest_version(listing), latest=latest
        )
    candidates = [c for c in listing.checkpoints if c.version <= version]
    checkpoint = candidates[-1] if candidates else None
    start = checkpoint.version + 1 if checkpoint else 0
    commits = tuple(c for c in listing.commits if start <= c.version <= version)
    if checkpoint is None and (not commits or commits[0].version != 0):
        raise VersionNotFoundError(
            uri,
            version=version,
            earliest=earliest_version(listing),
            latest=latest,
            detail="no checkpoint at or below it and the log does not start at version 0",
        )
    _require_contiguous(commits, start, version, uri)
    return LogSegment(version, checkpoint, commits)


def _require_contiguous(commits: Sequence[LogFile], start: int, end: int, uri: str) -> None:
    expected = start
    for c in commits:
        if c.version != expected:
            raise CorruptLogError(
                f"{uri}/_delta_log/{expected:020d}.json",
                f"commit {expected} is missing (found {c.version} next); the log has a gap",
            )
        expected += 1
    if expected != end + 1:
        raise CorruptLogError(
            f"{uri}/_delta_log/{expected:020d}.json",
            f"commit {expected} is missing; cannot reach version {end}",
        )


def earliest_version(listing: Listing) -> int | None:
    """The oldest version the listed files can reconstruct (digest §16)."""
    versions = {c.version for c in listing.commits}
    if 0 in versions:
        return 0
    for cp in listing.checkpoints:  # ascending
        # all commits after it up to the latest must exist for it to be a valid start
        later = sorted(v for v in versions if v > cp.version)
        if later == list(range(cp.version + 1, cp.version + 1 + len(later))):
            return cp.version
    return None
