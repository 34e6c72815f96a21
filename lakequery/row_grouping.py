"""Rows grouped by the values of one or more Arrow columns (partition values, mostly).

pyarrow's ``Table.group_by(...).aggregate(...)`` imports pandas (0.15-0.2 s of a fresh
process), so the writer's split by partition and the engines' file groups use this
instead: each column is dictionary-encoded (null is a value of its own), the codes are
combined into one code per row, and one stable sort of that code lines the groups up
(a radix sort while the codes fit 16 bits: up to 65,536 groups).
Groups come in the order of their first row, rows inside a group in their order.

Example:
    >>> import pyarrow as pa
    >>> g = group_rows([pa.array(["x", "y", "x", None]), pa.array([1, 1, 1, 1])])
    >>> [g.rows(i).tolist() for i in range(g.num_groups)]
    [[0, 2], [1], [3]]
    >>> [g.value(0, i).as_py() for i in range(g.num_groups)]
    ['x', 'y', None]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import int64_scalar, int_values

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True)
class RowGroups:
    """The groups of :func:`group_rows`."""

    #: row positions, group after group
    order: npt.NDArray[np.int64]
    #: group ``g`` is ``order[starts[g]:starts[g + 1]]``
    starts: npt.NDArray[np.int64]
    #: per column: each row's position in that column's ``dictionaries`` entry
    codes: list[npt.NDArray[np.int64]]
    #: per column: its distinct values (a null once, where the column has nulls)
    dictionaries: list[pa.Array[Any]]

    @property
    def num_groups(self) -> int:
        return len(self.starts) - 1

    def rows(self, group: int) -> npt.NDArray[np.int64]:
        """The positions of the rows of ``group``, in order."""
        return self.order[int(self.starts[group]) : int(self.starts[group + 1])]

    def code(self, column: int, group: int) -> int:
        """The dictionary position of ``group``'s value in ``column``."""
        return int(self.codes[column][int(self.order[int(self.starts[group])])])

    def value(self, column: int, group: int) -> pa.Scalar[Any]:
        """``group``'s value in ``column``."""
        scalar: pa.Scalar[Any] = self.dictionaries[column][self.code(column, group)]
        return scalar


def _narrowest(codes: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """Non-negative ``codes`` in the narrowest unsigned type that holds them: numpy's
    stable sort is a radix sort for types of up to 16 bits and a merge sort above (5M
    codes of 100 groups: 41-49 ms against 345-377 ms as int32 or int64)."""
    top = int(codes.max()) if codes.size else 0
    if top < 1 << 8:
        return codes.astype(np.uint8)
    if top < 1 << 16:
        return codes.astype(np.uint16)
    return codes


def group_rows(columns: Sequence[Any]) -> RowGroups:
    """Groups the rows of equal-length arrays by their values (see the module docstring)."""
    n = len(columns[0])
    codes: list[npt.NDArray[np.int64]] = []
    dictionaries: list[pa.Array[Any]] = []
    key: Any = None
    for column in columns:
        enc = pc.dictionary_encode(column, null_encoding="encode")
        dictionaries.append(enc.dictionary)
        idx = pc.cast(enc.indices, pa.int64())
        codes.append(int_values(idx).astype(np.int64, copy=False))
        if key is None:
            key = idx
        else:  # one code per combination seen, numbered in order of first appearance
            # (a Python number handed to a kernel makes pyarrow import pandas)
            width = int64_scalar(len(enc.dictionary))
            combined = pc.add(pc.multiply(key, width), idx)
            key = pc.cast(pc.dictionary_encode(combined).indices, pa.int64())
    key_np = int_values(key) if n else np.zeros(0, dtype=np.int64)
    order = np.argsort(_narrowest(key_np), kind="stable").astype(np.int64, copy=False)
    bounds = np.flatnonzero(np.diff(key_np[order])) + 1
    starts = np.concatenate([[0], bounds, [n]]).astype(np.int64) if n else np.zeros(1, np.int64)
    return RowGroups(order, starts, codes, dictionaries)
