"""Parametrisation of the conformance suite over ``shared/conformance/manifest.json``.

Test functions ask for one of these (parametrised here, not real fixtures):

* ``read_case``: one per (table, version, engine); ids like ``dat_basic_append-v1-duckdb``;
* ``files_case``: one per (table, version) whose snapshot can be built; ids like
  ``dat_basic_append-v1``.

When the conformance folder is missing every such test gets a single
``conformance-data-missing`` case that fails with the reason.
"""

from __future__ import annotations

import pytest

from ._cases import (
    DV_READER_FEATURE_TAG,
    MISSING_CASE_ID,
    VersionCase,
    missing_reason,
    read_cases,
    version_cases,
)
from ._log_replay import replay

# Flip to True once lakequery decodes deletion vectors: the (table, version) cases whose live
# files carry deletion vectors then become ordinary tests. While False they are strict xfails
# that must raise lakequery.UnsupportedFeatureError (an XPASS fails the run as a reminder).
DV_DECODING_AVAILABLE = True

DV_XFAIL_REASON = "DV decoding lands with the deletion-vector issue"


# test function name -> ids generated for it (read by the case-count test).
GENERATED_IDS: dict[str, list[str]] = {}


class _LakequeryNotReady(Exception):
    """Stand-in for lakequery.UnsupportedFeatureError while lakequery does not export it."""


def unsupported_feature_error() -> type[BaseException]:
    try:
        import lakequery as lq

        return lq.UnsupportedFeatureError
    except Exception:  # lakequery broken or incomplete: must not break collection
        # The xfail then does not match whatever is raised and the case fails, as it should.
        return _LakequeryNotReady


def reads_deletion_vectors(case: VersionCase) -> bool:
    """Whether reading this version has to apply deletion vectors.

    True when the table declares the deletionVectors reader feature and a live ``add`` at
    this version carries a ``deletionVector`` (decided by replaying the log, cached).
    """
    if case.expect != "rows" or DV_READER_FEATURE_TAG not in case.features:
        return False
    return replay(str(case.table_dir), case.version).has_deletion_vectors


def _marks(case: VersionCase) -> list[pytest.MarkDecorator]:
    if not DV_DECODING_AVAILABLE and reads_deletion_vectors(case):
        return [
            pytest.mark.xfail(
                raises=unsupported_feature_error(), strict=True, reason=DV_XFAIL_REASON
            )
        ]
    return []


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for argname in ("read_case", "files_case"):
        if argname not in metafunc.fixturenames:
            continue
        if missing_reason() is not None:
            metafunc.parametrize(argname, [pytest.param(None, id=MISSING_CASE_ID)])
            GENERATED_IDS[metafunc.function.__name__] = []
            continue
        if argname == "read_case":
            params = [
                pytest.param(rc, id=rc.id, marks=_marks(rc.version_case)) for rc in read_cases()
            ]
        else:
            params = [
                pytest.param(vc, id=vc.id)
                for vc in version_cases()
                if vc.builds_snapshot
                and (
                    vc.entry.get("active_files") is not None
                    or vc.entry.get("log_stats_row_count") is not None
                )
            ]
        GENERATED_IDS[metafunc.function.__name__] = [p.id for p in params]
        metafunc.parametrize(argname, params)


@pytest.fixture(scope="session")
def generated_case_ids() -> dict[str, list[str]]:
    return GENERATED_IDS
