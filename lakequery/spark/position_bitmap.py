"""Deleted rows as a dense bitmap inside Spark's plan: a filter instead of a join.

For the files of one scan (files of pairwise different sizes, see
:mod:`lakequery.spark.deletions`), the deleted positions become one ``long[]`` of bitmap
words, file after file, and a small slot table indexed by ``pmod(file_size, m)`` gives
each file's first word and word count (``m`` is chosen so that no two files share a
slot). A row is kept unless bit ``row_index & 63`` of word ``first + (row_index >> 6)``
is set; rows past a file's last word (after its last deleted row) are kept. Both arrays
enter the plan as literals backed by ``UnsafeArrayData`` (Spark reads them in place; the
plan prints them as one short name, not their contents), and travel to the executors
once per stage inside the task binary Spark broadcasts.

Measured against the broadcast anti-join on a one-long key (benchmarks/RESULTS.md,
Spark section): the filter needs no hash probe per row, which was the join's main cost.
It needs Spark's classic (JVM) session to build the literals; on other sessions, above
:data:`MAX_WORDS` words, or when no small collision-free ``m`` exists, the caller keeps
the join.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Most bitmap words in one plan (16 MiB of literals); beyond, the join is used.
MAX_WORDS = 1 << 21
#: Largest slot table (file-size modulus) tried.
MAX_SLOTS = 1 << 20
_INT64 = np.dtype(np.int64)


@dataclass(frozen=True)
class PositionBitmap:
    """The words and the slot table of the DV files of one scan."""

    modulus: int
    slots: np.ndarray[Any, np.dtype[np.int64]]  # (first word << 32) | word count, per slot
    words: np.ndarray[Any, np.dtype[np.int64]]


def collision_free_modulus(sizes: np.ndarray[Any, Any]) -> int | None:
    """The smallest tried ``m`` (up to :data:`MAX_SLOTS`) under which the distinct
    ``sizes`` have distinct residues, or None."""
    n = len(sizes)
    m = max(n, 1)
    while m <= MAX_SLOTS:
        for candidate in range(m, min(m + 8, MAX_SLOTS + 1)):
            if np.unique(sizes % candidate).size == n:
                return candidate
        m = max(m + 8, m * 5 // 4)
    return None


def build(sizes: Sequence[int], positions: Sequence[np.ndarray[Any, Any]]) -> PositionBitmap | None:
    """The bitmap of files of pairwise different ``sizes`` with the deleted ``positions``
    (sorted, unique; one array per file), or None when it would not fit (see above)."""
    size_array = np.asarray(sizes, dtype=np.int64)
    if len(np.unique(size_array)) != len(size_array) or (size_array < 0).any():
        return None
    counts = np.fromiter((len(p) for p in positions), dtype=np.int64, count=len(positions))
    last = np.fromiter(
        (int(p[-1]) if len(p) else -1 for p in positions), dtype=np.int64, count=len(positions)
    )
    nwords = (last >> 6) + 1  # 0 for a file without deleted rows
    if int(nwords.sum()) > MAX_WORDS:
        return None
    modulus = collision_free_modulus(size_array)
    if modulus is None:
        return None
    first = np.concatenate([[0], np.cumsum(nwords)[:-1]]).astype(np.int64)
    flat = (
        np.concatenate([np.asarray(p, dtype=np.int64) for p in positions])
        if len(positions)
        else np.empty(0, np.int64)
    )
    index = np.repeat(first, counts) + (flat >> 6)
    bits = np.left_shift(np.int64(1), flat & 63)
    words = np.zeros(int(nwords.sum()), dtype=np.int64)
    if len(index):
        # positions are sorted per file and files follow each other: index is sorted
        starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
        words[index[starts]] = np.bitwise_or.reduceat(bits, starts)
    slots = np.zeros(modulus, dtype=np.int64)
    slots[size_array % modulus] = (first << 32) | nwords
    return PositionBitmap(modulus, slots, words)


def long_array_literal(spark: SparkSession, values: np.ndarray[Any, Any]) -> Column | None:
    """A ``array<bigint>`` literal column of ``values`` backed by ``UnsafeArrayData``, or
    None where the session has no JVM to build it in (Spark Connect)."""
    from pyspark.sql.column import Column

    jvm = getattr(spark, "_jvm", None)
    gateway = getattr(getattr(spark, "sparkContext", None), "_gateway", None)
    if jvm is None or gateway is None:
        return None
    try:
        java_longs = gateway.new_array(jvm.long, len(values))
        data = bytearray(np.asarray(values, dtype=">i8").tobytes())
        jvm.java.nio.ByteBuffer.wrap(data).asLongBuffer().get(java_longs)
        expressions = jvm.org.apache.spark.sql.catalyst.expressions
        types = jvm.org.apache.spark.sql.types.DataTypes
        literal = expressions.Literal(
            expressions.UnsafeArrayData.fromPrimitiveArray(java_longs),
            types.createArrayType(types.LongType, False),
        )
        return Column(jvm.org.apache.spark.sql.classic.ExpressionUtils.column(literal))
    except Exception:  # an internal API moved: the caller falls back to the join
        return None


@dataclass(frozen=True)
class BitmapFilter:
    """The literals of a :class:`PositionBitmap`, ready to filter scans."""

    modulus: int
    slots: Column
    words: Column

    @classmethod
    def create(cls, spark: SparkSession, bitmap: PositionBitmap) -> BitmapFilter | None:
        slots = long_array_literal(spark, bitmap.slots)
        words = long_array_literal(spark, bitmap.words)
        if slots is None or words is None:
            return None
        return cls(bitmap.modulus, slots, words)

    def apply(self, df: DataFrame) -> DataFrame:
        """``df`` (a Parquet scan of some of the bitmap's files) without deleted rows."""
        from pyspark.sql import functions as F

        position = F.col("_metadata.row_index")
        slot_number = F.pmod(F.col("_metadata.file_size"), F.lit(self.modulus)).cast("int")
        slot = F.get(self.slots, slot_number)
        word_number = F.shiftright(position, 6)
        word = F.get(self.words, (F.shiftright(slot, 32) + word_number).cast("int"))
        bit = F.call_function("shiftright", word, position.bitwiseAND(63).cast("int"))
        deleted = (word_number < slot.bitwiseAND(F.lit(0xFFFFFFFF))) & (bit.bitwiseAND(1) == 1)
        # one condition: every DataFrame step is one more analysis of the plan on the driver
        return df.where(~deleted)


__all__ = [
    "MAX_SLOTS",
    "MAX_WORDS",
    "BitmapFilter",
    "PositionBitmap",
    "build",
    "collision_free_modulus",
    "long_array_literal",
]
