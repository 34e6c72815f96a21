"""Model-based tests of ``lq.write``: random write sequences against an in-memory model.

Every sequence is applied both to a real table (through ``lq.write``) and to a list of
rows; after EVERY commit, every version so far is read back by lakequery (time travel)
and by the ``deltalake`` package, and both must equal the model's rows at that version.
The other direction is covered too: lakequery appending to and overwriting tables that
``deltalake.write_deltalake`` created.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from writekit import dl_rows, lq_rows, normalize

import lakequery

#: Awkward partition values: spaces, '/', '%', '=', ':', '#', non-ASCII, null, empty-ish.
PARTITION_VALUES: list[str | None] = [
    "a b",
    "x/y",
    "50%",
    None,
    "ümlaut ☃",
    "a=b",
    "k:v#1",
    "plain",
]
STRINGS: list[str | None] = ["", "q", "naïve", "日本語", "quote'd", None, "tab\there", "x" * 40]
FLOATS: list[float | None] = [1.5, -0.0, float("nan"), None, float("inf"), -2.25, 0.75, 1e300]

_BASE_FIELDS: list[pa.Field[Any]] = [
    pa.field("id", pa.int64()),
    pa.field("p", pa.string()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("d", pa.date32()),
    pa.field("dec", pa.decimal128(10, 3)),
    pa.field("f", pa.float64()),
    pa.field("s", pa.string()),
]
BASE_SCHEMA = pa.schema(_BASE_FIELDS)
EXTRA = pa.field("extra", pa.int64())


class Model:
    """The expected table: a list of row dicts and the current columns."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rows: list[dict[str, Any]] = []
        self.schema = BASE_SCHEMA
        self.next_id = 0

    def make_rows(
        self,
        n: int,
        *,
        p: Any = "random",
        f_choices: list[float | None] | None = None,
    ) -> list[dict[str, Any]]:
        rng = self.rng
        base = dt.datetime(2024, 2, 29, 23, 59, 59, tzinfo=dt.timezone.utc)
        out = []
        for _ in range(n):
            row = {
                "id": self.next_id,
                "p": rng.choice(PARTITION_VALUES) if p == "random" else p,
                "ts": None
                if rng.random() < 0.1
                else base + dt.timedelta(microseconds=rng.randrange(-(10**13), 10**13)),
                "d": dt.date(1969, 12, 31) + dt.timedelta(days=rng.randrange(0, 4)),
                "dec": None
                if rng.random() < 0.1
                else Decimal(rng.randrange(-(10**9), 10**9)).scaleb(-3),
                "f": rng.choice(f_choices if f_choices is not None else FLOATS),
                "s": rng.choice(STRINGS),
            }
            if "extra" in self.schema.names:
                row["extra"] = rng.choice([None, rng.randrange(-(2**62), 2**62)])
            self.next_id += 1
            out.append(row)
        return out

    def table(self, rows: list[dict[str, Any]]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=self.schema)

    def expected(self) -> list[Any]:
        names = self.schema.names
        return normalize([{n: r.get(n) for n in names} for r in self.rows], names)


def _f_matches(value: float | None) -> bool:
    """``f > 0.5`` in SQL with Delta/Spark NaN semantics (NaN is larger than any number)."""
    return value is not None and (math.isnan(value) or value > 0.5)


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _check_all_versions(uri: str, history: list[list[Any]], names: list[list[str]]) -> None:
    """Every version so far, read by both readers, equals the model at that version."""
    for version, expected in enumerate(history):
        columns = names[version]
        ours = normalize(lq_rows(uri, version), columns)
        assert ours == expected, f"lakequery differs from the model at version {version}"
        theirs = normalize(dl_rows(uri, version), columns)
        assert theirs == expected, f"deltalake differs from the model at version {version}"


def _run_sequence(uri: str, seed: int, partition_by: list[str], steps: int) -> list[str]:
    rng = random.Random(seed)
    model = Model(rng)
    history: list[list[Any]] = []
    names: list[list[str]] = []
    ops_done: list[str] = []

    def committed(result: lakequery.WriteResult) -> None:
        assert not result.skipped
        assert result.version == len(history), (result, ops_done)
        history.append(model.expected())
        names.append(list(model.schema.names))

    rows = model.make_rows(rng.randrange(5, 25))
    committed(lakequery.write(uri, model.table(rows), partition_by=partition_by))
    model.rows = rows
    history[-1] = model.expected()
    ops = ["append", "overwrite", "overwrite_partition", "overwrite_data", "overwrite_float"]
    merge_at = rng.randrange(1, steps)
    for step in range(1, steps + 1):
        op = "merge" if step == merge_at else rng.choice(ops)
        ops_done.append(op)
        if op in ("append", "merge"):
            if op == "merge":
                model.schema = model.schema.append(EXTRA)
                for r in model.rows:
                    r["extra"] = None
            rows = model.make_rows(rng.randrange(0, 12) if op == "append" else 4)
            result = lakequery.write(
                uri,
                model.table(rows),
                mode="append",
                schema_mode="merge" if op == "merge" else None,
            )
            model.rows += rows
        elif op == "overwrite":
            rows = model.make_rows(rng.randrange(1, 15))
            result = lakequery.write(uri, model.table(rows), mode="overwrite")
            model.rows = rows
        elif op == "overwrite_partition":
            value = rng.choice(PARTITION_VALUES)
            predicate = "p IS NULL" if value is None else f"p = {_sql_string(value)}"
            rows = model.make_rows(rng.randrange(0, 6), p=value)
            result = lakequery.write(uri, model.table(rows), mode="overwrite", predicate=predicate)
            model.rows = [r for r in model.rows if r["p"] != value] + rows
        elif op == "overwrite_data":
            ids = sorted(r["id"] for r in model.rows) or [0]
            threshold = rng.choice(ids)
            rows = model.make_rows(rng.randrange(0, 6))
            result = lakequery.write(
                uri, model.table(rows), mode="overwrite", predicate=f"id >= {threshold}"
            )
            model.rows = [r for r in model.rows if r["id"] < threshold] + rows
        else:  # overwrite_float: a predicate on a float column with NaN and nulls around
            rows = model.make_rows(3, f_choices=[0.75, float("nan"), 1e300, float("inf")])
            result = lakequery.write(uri, model.table(rows), mode="overwrite", predicate="f > 0.5")
            model.rows = [r for r in model.rows if not _f_matches(r["f"])] + rows
        committed(result)
    _check_all_versions(uri, history, names)
    return ops_done


@pytest.mark.parametrize(
    ("seed", "partition_by"),
    [
        (1, []),
        (2, ["p"]),
        (3, ["p", "d"]),
        (4, ["p"]),
        (5, []),
        (6, ["d"]),
    ],
)
def test_random_write_sequences_match_model(
    tmp_path: Path, seed: int, partition_by: list[str]
) -> None:
    uri = str(tmp_path / "table")
    ops = _run_sequence(uri, seed, partition_by, steps=8)
    assert len(ops) == 8
    # The final table also has the partition columns and schema the model says.
    snap = lakequery.DeltaTable(uri).snapshot()
    assert snap.partition_columns == partition_by
    assert snap.schema.names[: len(BASE_SCHEMA)] == BASE_SCHEMA.names
    assert "extra" in snap.schema.names


# -- the other direction: lakequery writing to tables deltalake created -------------------------


def _dl_data(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "region": [PARTITION_VALUES[i % len(PARTITION_VALUES)] for i in range(n)],
            "value": [None if i % 5 == 0 else i * 0.5 for i in range(n)],
            "when": pa.array(
                [dt.datetime(2023, 3, 26, 1, 30, i % 60, tzinfo=dt.timezone.utc) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


@pytest.mark.parametrize("partition_by", [None, ["region"]])
def test_lakequery_writes_to_deltalake_tables(
    tmp_path: Path, partition_by: list[str] | None
) -> None:
    uri = str(tmp_path / "dl")
    first = _dl_data(0, 16)
    deltalake.write_deltalake(uri, first, partition_by=partition_by)
    deltalake.write_deltalake(uri, _dl_data(100, 4), mode="append")
    model = first.to_pylist() + _dl_data(100, 4).to_pylist()

    def check() -> None:
        expected = normalize(model, first.column_names)
        assert normalize(lq_rows(uri), first.column_names) == expected
        assert normalize(dl_rows(uri), first.column_names) == expected

    check()
    r = lakequery.write(uri, _dl_data(200, 9), mode="append")
    assert r.version == 2
    model += _dl_data(200, 9).to_pylist()
    check()
    # replace one partition's (or one value's) rows
    new = _dl_data(300, 3).set_column(1, "region", pa.array(["x/y"] * 3))
    r = lakequery.write(uri, new, mode="overwrite", predicate="region = 'x/y'")
    assert r.num_removed_files >= 1
    model = [row for row in model if row["region"] != "x/y"] + new.to_pylist()
    check()
    # deltalake appends after lakequery, lakequery overwrites everything
    deltalake.write_deltalake(uri, _dl_data(400, 2), mode="append")
    model += _dl_data(400, 2).to_pylist()
    check()
    final = _dl_data(500, 5)
    lakequery.write(uri, final, mode="overwrite")
    model = final.to_pylist()
    check()
    assert deltalake.DeltaTable(uri).version() == lakequery.DeltaTable(uri).snapshot().version == 5
    # time travel agrees too, at a version lakequery wrote
    assert normalize(lq_rows(uri, 3)) == normalize(dl_rows(uri, 3))
