"""Deletion vectors of a scan: which planned files have deleted rows, and which rows.

The DVs of one plan are fetched together (concurrently, cached by unique id) and handed
to the engines as sorted int64 arrays of deleted physical row positions per file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import int64_array, int64_scalar
from lakequery.dv.descriptor import Descriptor

if TYPE_CHECKING:
    import numpy.typing as npt

    from lakequery.scan import ScanPlan
    from lakequery.storage import Storage


def dv_cardinalities(files: pa.Table) -> Any:
    """Rows each file's deletion vector deletes (0 without one, and for tables of files
    without a ``deletion_vector`` column), an ``int64`` array over rows of
    ``Snapshot.files()`` or a plan's files."""
    # zeros from NumPy buffers: ``pa.scalar(0)`` would import pandas (lakequery.arrow_buffers)
    if "deletion_vector" not in files.column_names:
        return int64_array(np.zeros(files.num_rows))
    dv = files.column("deletion_vector").combine_chunks()
    return pc.fill_null(pc.cast(pc.struct_field(dv, "cardinality"), pa.int64()), int64_scalar(0))


def dv_mask(plan: ScanPlan) -> pa.BooleanArray:
    """True for planned files whose DV deletes at least one row."""
    if plan.num_files == 0:
        return pa.nulls(0, pa.bool_())
    # no Python value becomes an Arrow scalar here (pyarrow's first such conversion imports
    # pandas): a cardinality is nonzero exactly when its cast to boolean is true, and
    # ``and_kleene`` with its validity turns a missing one into false.
    dv = plan.files.column("deletion_vector").combine_chunks()
    card = pc.struct_field(dv, "cardinality")
    mask: pa.BooleanArray = pc.and_kleene(pc.is_valid(card), pc.cast(card, pa.bool_()))
    return mask


def deleted_rows(plan: ScanPlan, storage: Storage) -> dict[str, npt.NDArray[np.int64]]:
    """Location -> sorted deleted row positions, for every planned file with a DV."""
    descriptors_column = plan.files.column("deletion_vector")
    if descriptors_column.null_count == len(descriptors_column):
        # no DVs: no compute call (the first compute call in a process imports pandas)
        return {}
    mask = dv_mask(plan)
    if not pc.any(mask).as_py():
        return {}
    from lakequery.dv.files import deleted_positions  # pyroaring: tables with DVs only

    files = pc.filter(plan.files, mask)
    locations = [str(x) for x in pc.filter(plan.locations, mask).to_pylist()]
    descriptors = [
        Descriptor.from_dict(d or {}) for d in files.column("deletion_vector").to_pylist()
    ]
    paths = [str(x) for x in files.column("path").to_pylist()]
    positions = deleted_positions(
        storage,
        list(zip(paths, descriptors, strict=True)),
        files.column("num_records").to_pylist(),
    )
    return dict(zip(locations, positions, strict=True))
