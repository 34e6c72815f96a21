"""Locating the conformance data and turning ``manifest.json`` into test cases.

The data lives outside the repository, in ``<repo>/../shared/conformance`` (a fresh CI clone
sits beside ``shared/`` the same way). ``LAKEQUERY_CONFORMANCE_DIR`` overrides the location.
A missing folder is a test failure, never a skip.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from tablekit import conformance_dir as shared_conformance_dir

ENV_VAR = "LAKEQUERY_CONFORMANCE_DIR"

# Every expectation is checked through each of these read paths.
ENGINES: tuple[str, ...] = ("arrow", "arrow_reader", "duckdb", "polars")

DV_READER_FEATURE_TAG = "readerFeature:deletionVectors"

# Id of the single case each parametrised test gets when the data is missing.
MISSING_CASE_ID = "conformance-data-missing"


class ConformanceDataMissing(Exception):
    """The conformance folder or its manifest cannot be found or read."""


def conformance_dir() -> Path:
    return shared_conformance_dir()


def load_manifest() -> dict[str, Any]:
    """The parsed manifest of the current conformance folder; raises ConformanceDataMissing."""
    return _load_manifest(conformance_dir())


@functools.cache
def _load_manifest(root: Path) -> dict[str, Any]:
    how = f"${ENV_VAR}" if os.environ.get(ENV_VAR) else f"the default (set ${ENV_VAR} to override)"
    manifest = root / "manifest.json"
    if not manifest.is_file():
        raise ConformanceDataMissing(
            f"conformance data not found: {manifest} does not exist (location from {how}). "
            "The conformance tables are expected in ../shared/conformance next to the repository."
        )
    try:
        data = json.loads(manifest.read_text())
    except (OSError, ValueError) as exc:
        raise ConformanceDataMissing(f"cannot read {manifest}: {exc}") from exc
    if not data.get("tables"):
        raise ConformanceDataMissing(f"{manifest} lists no tables")
    return data


def missing_reason() -> str | None:
    """Why the conformance data is unusable, or None when it is there."""
    try:
        load_manifest()
    except ConformanceDataMissing as exc:
        return str(exc)
    return None


def require_data() -> None:
    """Fail (never skip) when the conformance data is missing."""
    reason = missing_reason()
    if reason is not None:
        pytest.fail(reason, pytrace=False)


# ---------------------------------------------------------------------------------------------
# Must-fail versions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorSpec:
    """What reading a must-fail version has to raise.

    ``classes``: the exception must be an instance of every entry (a string names a class
    exported by ``lakequery``). ``stage``: ``"snapshot"`` means ``DeltaTable(path).snapshot(v)``
    itself must raise; ``"read"`` means the error may come from any step up to the
    materialised result. ``message``: regular expressions (case-insensitive) that must all
    occur in ``str(exc)``, so the message names what is wrong.
    """

    classes: tuple[str | type[BaseException], ...]
    stage: Literal["snapshot", "read"]
    message: tuple[str, ...]
    why: str


# Keyed by (table, version). Every ``expect: "error"`` version in the manifest needs an entry
# (test_conformance.py::test_every_error_version_has_a_spec enforces it).
EXPECTED_ERRORS: dict[tuple[str, int], ErrorSpec] = {
    ("dat_no_replay", 0): ErrorSpec(
        classes=("VersionNotFoundError",),
        stage="snapshot",
        message=(r"\b0\b",),
        why="commits before the checkpoint at v2 were cleaned up: v0 cannot be reconstructed",
    ),
    ("dat_no_replay", 2): ErrorSpec(
        # The log reconstructs v2 fine; its data file was vacuumed. That is a missing object
        # (lakequery's StorageError that is also a FileNotFoundError, i.e. ObjectNotFoundError),
        # not a missing version, so it may surface only when the data is read.
        classes=("StorageError", FileNotFoundError),
        stage="read",
        message=(r"part-00000-49f5aa37-14b2-462a-bda5-b68267c94acf",),
        why="the data file live at v2 was removed by VACUUM",
    ),
    ("golden_deltalog_invalid_protocol_version", 0): ErrorSpec(
        classes=("ProtocolError",),  # UnsupportedFeatureError is a ProtocolError too
        stage="snapshot",
        message=(r"\b99\b",),
        why="protocol.minReaderVersion=99 is not a supported reader version",
    ),
    ("golden_deltalog_state_reconstruction_without_protocol", 0): ErrorSpec(
        classes=("CorruptLogError",),
        stage="snapshot",
        message=(r"protocol",),
        why="the log has metaData and add actions but no protocol action",
    ),
}


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionCase:
    """One entry of a table's ``versions`` list."""

    table: dict[str, Any] = field(repr=False)
    entry: dict[str, Any] = field(repr=False)

    @property
    def name(self) -> str:
        return str(self.table["name"])

    @property
    def version(self) -> int:
        return int(self.entry["version"])

    @property
    def expect(self) -> str:
        return str(self.entry["expect"])

    @property
    def id(self) -> str:
        return f"{self.name}-v{self.version}"

    @property
    def table_dir(self) -> Path:
        return conformance_dir() / self.table["path"]

    @property
    def expected_file(self) -> Path:
        return conformance_dir() / self.entry["expected_file"]

    @property
    def alternative_files(self) -> list[tuple[Path, str]]:
        """(file, description) of every alternative expectation (README: alternative_expected)."""
        alt = self.entry.get("alternative_expected")
        if not alt:
            return []
        alts = alt if isinstance(alt, list) else [alt]
        return [(conformance_dir() / a["file"], str(a.get("reader", a["file"]))) for a in alts]

    @property
    def features(self) -> list[str]:
        return list(self.table.get("features") or [])

    @property
    def error_spec(self) -> ErrorSpec | None:
        return EXPECTED_ERRORS.get((self.name, self.version))

    @property
    def builds_snapshot(self) -> bool:
        """Whether a snapshot of this version can be constructed (the log itself is valid)."""
        if self.expect == "rows":
            return True
        spec = self.error_spec
        return spec is not None and spec.stage != "snapshot"


@dataclass(frozen=True)
class ReadCase:
    version_case: VersionCase
    engine: str

    @property
    def id(self) -> str:
        return f"{self.version_case.id}-{self.engine}"


def version_cases() -> list[VersionCase]:
    manifest = load_manifest()
    return [VersionCase(t, v) for t in manifest["tables"] for v in t["versions"]]


def read_cases() -> list[ReadCase]:
    return [ReadCase(vc, engine) for vc in version_cases() for engine in ENGINES]


def manifest_total_versions() -> int:
    """Count of ``versions`` entries, straight from the JSON (independent of the case builders)."""
    with open(conformance_dir() / "manifest.json") as fh:
        raw = json.load(fh)
    return sum(len(t["versions"]) for t in raw["tables"])
