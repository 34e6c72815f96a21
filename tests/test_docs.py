"""The README's Python examples and the docstring examples run as written."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import lakequery
import udfs

ROOT = Path(__file__).resolve().parents[1]
# ```python blocks are runnable examples; ```py blocks (e.g. a real S3 bucket) are not.
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int) -> None:
    code = compile(BLOCKS[index], f"README.md[python block {index}]", "exec")
    exec(code, {"__name__": "readme_example"})


def _modules() -> list[str]:
    names = ["lakequery", "udfs"]
    for package in (lakequery, udfs):
        prefix = package.__name__ + "."
        for info in pkgutil.walk_packages(package.__path__, prefix):
            if not info.name.endswith(".__main__"):
                names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_notebook_cells_run() -> None:
    import json

    notebook = json.loads((ROOT / "notebooks" / "quickstart.ipynb").read_text())
    code = [c["source"] for c in notebook["cells"] if c["cell_type"] == "code"]
    assert len(code) >= 5
    scope: dict[str, object] = {"__name__": "notebook"}
    for source in code:
        text = source if isinstance(source, str) else "".join(source)
        exec(compile(text, "notebooks/quickstart.ipynb", "exec"), scope)
    assert scope["plan"].num_files < scope["plan"].total_files  # type: ignore[attr-defined]
