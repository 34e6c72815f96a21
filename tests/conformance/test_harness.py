"""Checks of the harness against the conformance data itself (no lakequery needed).

They validate the data location, the manifest, the expected files, the canonical sort order
and the small log replay used to find deletion-vector cases, so that a conformance failure
can be trusted to be a lakequery failure.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from . import conftest
from ._cases import (
    DV_READER_FEATURE_TAG,
    ENV_VAR,
    conformance_dir,
    missing_reason,
    require_data,
    version_cases,
)
from ._compare import assert_tables_match, canonical_sort, row_keys
from ._log_replay import checkpoint_versions, replay


def test_conformance_dir_present() -> None:
    """The data folder must exist: a missing folder fails the suite, it is never skipped."""
    require_data()
    assert (conformance_dir() / "manifest.json").is_file()


def test_missing_dir_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nowhere"))
    reason = missing_reason()
    assert reason is not None
    assert str(tmp_path / "nowhere") in reason
    assert ENV_VAR in reason
    with pytest.raises(pytest.fail.Exception, match="conformance data not found"):
        require_data()


def test_env_var_overrides_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert conformance_dir() == tmp_path.resolve()


def _cases_or_fail():
    require_data()
    return version_cases()


def test_tables_and_expected_files_exist() -> None:
    problems = []
    for vc in _cases_or_fail():
        if not (vc.table_dir / "_delta_log").is_dir():
            problems.append(f"{vc.id}: no _delta_log in {vc.table_dir}")
        if vc.expect == "rows":
            if not vc.expected_file.is_file():
                problems.append(f"{vc.id}: missing {vc.expected_file}")
            elif pq.read_metadata(vc.expected_file).num_rows != vc.entry["row_count"]:
                problems.append(f"{vc.id}: {vc.expected_file.name} row count != row_count")
            for alt, _ in vc.alternative_files:
                if not alt.is_file():
                    problems.append(f"{vc.id}: missing alternative {alt}")
    assert not problems, "\n".join(problems)


def test_expected_files_are_in_canonical_order() -> None:
    """Our sort key reproduces the README order the expected files were written in."""
    unsorted = []
    for vc in _cases_or_fail():
        if vc.expect != "rows":
            continue
        for file in [vc.expected_file, *(a for a, _ in vc.alternative_files)]:
            table = pq.read_table(file)
            keys = row_keys(table)
            if keys != sorted(keys):
                unsorted.append(str(file))
            assert_tables_match(canonical_sort(table), table)
    assert not unsorted, f"not in canonical order: {unsorted}"


def test_log_replay_agrees_with_manifest() -> None:
    """The harness replay (used to find DV cases) reproduces the manifest's log statistics."""
    problems = []
    for vc in _cases_or_fail():
        if not vc.builds_snapshot:
            continue
        table_dir = str(vc.table_dir)
        modes = [False] + (
            [True] if any(v <= vc.version for v in checkpoint_versions(table_dir)) else []
        )
        for from_checkpoint in modes:
            result = replay(table_dir, vc.version, from_checkpoint=from_checkpoint)
            how = "checkpoint" if from_checkpoint else "json"
            active = vc.entry.get("active_files")
            if active is not None and len(result.files) != active:
                problems.append(f"{vc.id} ({how}): {len(result.files)} live files != {active}")
            stats = vc.entry.get("log_stats_row_count")
            if stats is not None and result.stats_row_count != stats:
                problems.append(f"{vc.id} ({how}): {result.stats_row_count} rows != {stats}")
    assert not problems, "\n".join(problems)


def test_deletion_vector_cases_are_found() -> None:
    """DV xfails apply only to DV tables, and at least one version per DV table has DVs."""
    cases = _cases_or_fail()
    with_dv = [vc for vc in cases if conftest.reads_deletion_vectors(vc)]
    assert with_dv, "no version reads deletion vectors: the replay or the manifest changed"
    assert all(DV_READER_FEATURE_TAG in vc.features for vc in with_dv)
    dv_tables = {vc.name for vc in cases if DV_READER_FEATURE_TAG in vc.features}
    # Tables with the feature enabled but no DV ever written must not be marked.
    assert {vc.name for vc in with_dv} < dv_tables
