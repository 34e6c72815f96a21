"""Every notebook in notebooks/ runs top to bottom in a real Jupyter kernel (nbclient),
with no error, and every cell tagged ``plot`` shows a PNG image.

The kernel is this test's own interpreter (``sys.executable -m ipykernel_launcher``)
through a kernelspec written to a temporary directory, with this checkout first on
``PYTHONPATH`` and ``TMPDIR`` pointing into the test's temporary directory: no user or
system kernelspec is consulted or installed, and the notebooks write nothing outside it.
The notebooks are stored without outputs and executed in memory (never saved).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "lakequery-test-python"
#: Notebooks that must draw at least this many plots (cells tagged "plot").
MIN_PLOTS = {
    "explore_table": 2,
    "time_travel_history_cdf": 2,
    "dml_deletion_vectors": 2,
    "optimize_zorder_hilbert": 3,
    "spark_write_read": 2,
}


def _kernel_manager(tmp: Path) -> KernelManager:
    spec_dir = tmp / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    scratch = tmp / "scratch"
    scratch.mkdir()
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "lakequery tests",
        "language": "python",
        "env": {"PYTHONPATH": path, "TMPDIR": str(scratch), "MPLBACKEND": "Agg"},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(tmp / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


def _images(cell: Any) -> int:
    return sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


def test_every_notebook_is_stored_without_outputs() -> None:
    assert len(NOTEBOOKS) >= 6
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_draws_its_plots(path: Path, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        km=_kernel_manager(tmp_path),
        timeout=300,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert errors == []
    plot_cells = [c for c in nb.cells if "plot" in c.get("metadata", {}).get("tags", [])]
    assert len(plot_cells) >= MIN_PLOTS.get(path.stem, 0)
    for cell in plot_cells:
        assert _images(cell) == 1, f"{path.name}: no image from\n{cell.source}"


def test_the_kernel_runs_this_interpreter_and_checkout(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import sys, lakequery; print(sys.executable); print(lakequery.__file__)"
        )
    ]
    NotebookClient(nb, km=_kernel_manager(tmp_path), timeout=60).execute()
    executable, module = nb.cells[0].outputs[0]["text"].split()
    assert Path(executable) == Path(sys.executable)
    assert Path(module) == ROOT / "lakequery" / "__init__.py"
