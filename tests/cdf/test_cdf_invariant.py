"""An invariant independent of any other reader: applying a version's changes to the
table before it gives the table at that version (minus ``delete`` and
``update_preimage`` rows, plus ``insert`` and ``update_postimage`` rows, as multisets).
Checked at every version of the conformance tables and of random write sequences."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from cdfkit import CDF, CONFORMANCE, check_every_version

import lakequery as lq


@pytest.mark.parametrize(
    "name",
    ["kernelrs_cdf_table_with_dv", "kernelrs_cdf_table_with_cdc_and_dvs", "deltars_cdc_ict_table"],
)
def test_conformance_tables(tmp_path: Path, name: str) -> None:
    shutil.copytree(CONFORMANCE / name, tmp_path / name)
    check_every_version(str(tmp_path / name))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_lakequery_writes(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    root = str(tmp_path / "t")
    next_id = 0

    def batch(n: int) -> pa.Table:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "part": [rnd.choice(["a", "b", "c"]) for _ in ids],
                "v": [rnd.random() for _ in ids],
            }
        )

    lq.write(root, batch(20), partition_by=["part"], configuration=CDF)
    for _ in range(8):
        op = rnd.choice(["append", "append", "overwrite", "part", "rows"])
        if op == "append":
            lq.write(root, batch(rnd.randint(1, 10)), mode="append")
        elif op == "overwrite":
            lq.write(root, batch(rnd.randint(1, 10)), mode="overwrite")
        elif op == "part":
            data = batch(5)
            data = data.set_column(1, "part", pa.array(["b"] * 5))
            lq.write(root, data, mode="overwrite", predicate="part = 'b'")
        else:
            cut = rnd.randint(0, next_id)
            data = batch(3)
            ids = pa.array([cut + 1000 + i for i in range(3)], pa.int64())
            lq.write(root, data.set_column(0, "id", ids), mode="overwrite", predicate=f"id > {cut}")
    check_every_version(root)
