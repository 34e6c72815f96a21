"""The README's table of table features says what the code does, feature by feature."""

from __future__ import annotations

import re
from pathlib import Path

from lakequery.protocol.features import FEATURES

README = Path(__file__).resolve().parents[1] / "README.md"
ROW = re.compile(r"^\| `([^`]+)` \| (reader-writer|writer) \| (yes|no) \| (yes|no) \|", re.M)


def test_readme_feature_table_matches_the_code() -> None:
    rows = {m[0]: (m[1], m[2] == "yes", m[3] == "yes") for m in ROW.findall(README.read_text())}
    assert rows, "README has no feature table"
    expected = {name: (f.kind, f.read, f.write) for name, f in FEATURES.items()}
    assert rows == expected
