"""ADD / DROP CONSTRAINT (existing rows checked, deletion vectors applied) and
enable_feature / add_feature / drop_feature with the exact protocol after each."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from altkit import assert_engines, config_of, deltalake_rows, plain_table, protocol_of

import lakequery as lq

ROWS = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]


def test_add_constraint_checks_rows_then_guards_writes(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    result = dt.alter.add_constraint({"Id_Positive": "id > 0"})
    assert (result.version, result.operation, result.rows_checked) == (1, "ADD CONSTRAINT", 3)
    assert protocol_of(uri) == (1, 3, (), ())
    assert config_of(uri)["delta.constraints.id_positive"] == "id > 0"
    with pytest.raises(lq.ConstraintViolationError, match="id_positive"):
        lq.write(uri, pa.table({"id": [-1], "v": ["x"]}), mode="append")
    assert_engines(uri, ROWS)
    assert deltalake_rows(uri) == ROWS


def test_add_constraint_refused_with_violating_count(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    with pytest.raises(lq.ConstraintViolationError) as info:
        dt.alter.add_constraint({"small": "id < 2"})
    assert info.value.constraint == "small"
    assert info.value.detail == "2 of 3 existing row(s) violate it"
    # NULL counts as a violation, as for written rows.
    lq.write(uri, pa.table({"id": [4], "v": pa.array([None], pa.string())}), mode="append")
    with pytest.raises(lq.ConstraintViolationError, match="1 of 4"):
        dt.alter.add_constraint({"v_len": "length(v) = 1"})
    assert dt.snapshot().version == 1
    assert protocol_of(uri) == (1, 1, (), ())


def test_add_constraint_sees_rows_through_deletion_vectors(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.enableDeletionVectors": "true"})
    dt = lq.DeltaTable(uri)
    dt.delete("id = 3")
    assert dt.snapshot().files().column("deletion_vector").null_count == 0
    result = dt.alter.add_constraint({"lt3": "id < 3"})
    assert result.rows_checked == 2
    assert protocol_of(uri) == (
        3,
        7,
        ("deletionVectors",),
        ("checkConstraints", "deletionVectors"),
    )


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        ({"d": "no_such_column > 0"}, "cannot be evaluated"),
        ({"C": "id > 0"}, "already exists"),
    ],
)
def test_add_constraint_refused(tmp_path: Path, constraints: dict[str, str], message: str) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.constraints.c": "id > -1"})
    with pytest.raises(lq.AlterTableError, match=message):
        lq.DeltaTable(uri).alter.add_constraint(constraints)


def test_drop_constraint(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.add_constraint({"pos": "id > 0"})
    assert dt.alter.drop_constraint("POS").operation == "DROP CONSTRAINT"
    assert "delta.constraints.pos" not in config_of(uri)
    lq.write(uri, pa.table({"id": [-1], "v": ["x"]}), mode="append")  # no longer checked
    with pytest.raises(lq.AlterTableError, match="no constraint 'pos'"):
        dt.alter.drop_constraint("pos")
    assert dt.alter.drop_constraint("pos", raise_if_not_exists=False).version == 4
    assert protocol_of(uri) == (1, 3, (), ())  # the feature stays until drop_feature


@pytest.mark.parametrize(
    ("feature", "protocol", "key"),
    [
        (
            "deletionVectors",
            (3, 7, ("deletionVectors",), ("deletionVectors",)),
            "delta.enableDeletionVectors",
        ),
        ("ChangeDataFeed", (1, 4, (), ()), "delta.enableChangeDataFeed"),
        ("columnMapping", (2, 5, (), ()), "delta.columnMapping.mode"),
        ("inCommitTimestamp", (1, 7, (), ("inCommitTimestamp",)), "delta.enableInCommitTimestamps"),
        ("typeWidening", (3, 7, ("typeWidening",), ("typeWidening",)), "delta.enableTypeWidening"),
        ("v2Checkpoint", (3, 7, ("v2Checkpoint",), ("v2Checkpoint",)), "delta.checkpointPolicy"),
        ("appendOnly", (1, 2, (), ()), "delta.appendOnly"),
        ("domainMetadata", (1, 7, (), ("domainMetadata",)), None),
        ("TimestampWithoutTimezone", (3, 7, ("timestampNtz",), ("timestampNtz",)), None),
    ],
)
def test_enable_feature_exact_protocol(
    tmp_path: Path, feature: str, protocol: tuple[object, ...], key: str | None
) -> None:
    uri = plain_table(str(tmp_path / "t"))
    result = lq.DeltaTable(uri).alter.enable_feature(feature)
    assert result.version == 1
    assert protocol_of(uri) == protocol
    if key is not None:
        assert config_of(uri)[key] in ("true", "name", "v2")
    assert_engines(uri, ROWS)
    lq.write(uri, pa.table({"id": [4], "v": ["d"]}), mode="append")
    assert_engines(uri, [*ROWS, {"id": 4, "v": "d"}])


def test_enable_several_features_in_one_commit(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    result = lq.DeltaTable(uri).alter.enable_feature(["deletionVectors", "changeDataFeed"])
    assert result.version == 1
    assert protocol_of(uri) == (
        3,
        7,
        ("deletionVectors",),
        ("changeDataFeed", "deletionVectors"),  # (1, 1) implied nothing: no legacy extras
    )


def test_add_feature_supports_without_enabling(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    lq.DeltaTable(uri).alter.add_feature("deletionVectors")
    assert protocol_of(uri) == (3, 7, ("deletionVectors",), ("deletionVectors",))
    assert config_of(uri).get("delta.enableDeletionVectors") == "false"


def test_enable_unsupported_feature_refused(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    with pytest.raises(lq.UnsupportedFeatureError, match="variantType"):
        lq.DeltaTable(uri).alter.enable_feature("variantType")
    with pytest.raises(lq.AlterTableError, match="unknown table feature"):
        lq.DeltaTable(uri).alter.enable_feature("speedBoost")
    assert lq.DeltaTable(uri).snapshot().version == 0


def test_drop_writer_feature_after_disabling(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.enableChangeDataFeed": "true"})
    dt = lq.DeltaTable(uri)
    assert protocol_of(uri) == (1, 4, (), ())
    with pytest.raises(lq.AlterTableError, match=r"still in use: delta\.enableChangeDataFeed"):
        dt.alter.drop_feature("changeDataFeed")
    dt.alter.unset_properties("delta.enableChangeDataFeed")
    result = dt.alter.drop_feature("changeDataFeed")
    assert (result.operation, result.features_removed) == ("DROP FEATURE", ("changeDataFeed",))
    # The rest of what writer 4 implied stays, listed as table features.
    assert protocol_of(uri) == (
        1,
        7,
        (),
        ("appendOnly", "checkConstraints", "generatedColumns", "invariants"),
    )
    assert deltalake_rows(uri) == ROWS
    lq.write(uri, pa.table({"id": [4], "v": ["d"]}), mode="append")
    assert_engines(uri, [*ROWS, {"id": 4, "v": "d"}])


def test_drop_in_commit_timestamps_removes_enablement_keys(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.enable_feature("inCommitTimestamp")
    dt.alter.set_properties({"delta.enableInCommitTimestamps": "false"})
    dt.alter.drop_feature("inCommitTimestamp")
    assert protocol_of(uri) == (1, 1, (), ())
    assert not [k for k in config_of(uri) if "inCommitTimestamp" in k and k.endswith("stamp")]
    assert "delta.inCommitTimestampEnablementVersion" not in config_of(uri)


def test_drop_check_constraints_after_dropping_them(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.add_constraint({"pos": "id > 0"})
    with pytest.raises(lq.AlterTableError, match="constraint"):
        dt.alter.drop_feature("checkConstraints")
    dt.alter.drop_constraint("pos")
    dt.alter.drop_feature("checkConstraints")
    assert protocol_of(uri) == (1, 2, (), ())  # writer 2 says exactly what remains


def test_feature_enabled_again_after_its_drop_is_listed(tmp_path: Path) -> None:
    # after a drop the protocol lists table features: the feature comes back as one, not
    # as a writer-7 protocol without a feature list
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.enableChangeDataFeed": "true"})
    dt = lq.DeltaTable(uri)
    dt.alter.unset_properties("delta.enableChangeDataFeed")
    dt.alter.drop_feature("changeDataFeed")
    dt.alter.set_properties({"delta.appendOnly": "false"})
    dt.alter.drop_feature("appendOnly")
    assert protocol_of(uri) == (1, 7, (), ("checkConstraints", "generatedColumns", "invariants"))
    dt.alter.set_properties({"delta.appendOnly": "true"})
    assert protocol_of(uri) == (
        1,
        7,
        (),
        ("appendOnly", "checkConstraints", "generatedColumns", "invariants"),
    )
    with pytest.raises(lq.AppendOnlyError):
        dt.delete("id = 1")
    assert deltalake_rows(uri) == ROWS


@pytest.mark.parametrize(
    ("config", "feature", "message"),
    [
        ({"delta.enableDeletionVectors": "true"}, "deletionVectors", "history truncation"),
        ({}, "changeDataFeed", "does not list it"),
        ({"delta.enableRowTracking": "true"}, "rowTracking", "lakequery drops only"),
        ({}, "noSuchFeature", "unknown table feature"),
    ],
)
def test_drop_feature_refused(
    tmp_path: Path, config: dict[str, str], feature: str, message: str
) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration=config)
    before = protocol_of(uri)
    with pytest.raises(lq.AlterTableError, match=message):
        lq.DeltaTable(uri).alter.drop_feature(feature)
    assert protocol_of(uri) == before


def test_drop_feature_keeps_reader_version_2_for_column_mapping(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"))
    dt = lq.DeltaTable(uri)
    dt.alter.rename_column("v", "w")
    assert protocol_of(uri) == (2, 5, (), ())
    dt.alter.drop_feature("changeDataFeed")
    assert protocol_of(uri) == (
        2,
        7,
        (),
        ("appendOnly", "checkConstraints", "columnMapping", "generatedColumns", "invariants"),
    )
    expected = [{"id": r["id"], "w": r["v"]} for r in ROWS]
    assert_engines(uri, expected)
    assert deltalake_rows(uri) == expected


def test_deltalake_writer_enforces_a_constraint_added_by_alter(tmp_path: Path) -> None:
    """The stored constraint is what another writer reads: deltalake refuses a violating
    append and accepts a valid one."""
    import deltalake

    uri = plain_table(str(tmp_path / "t"))
    lq.DeltaTable(uri).alter.add_constraint({"pos": "id > 0"})
    with pytest.raises(Exception, match="failed validation"):
        deltalake.write_deltalake(uri, pa.table({"id": [-1], "v": ["x"]}), mode="append")
    deltalake.write_deltalake(uri, pa.table({"id": [5], "v": ["x"]}), mode="append")
    assert_engines(uri, [*ROWS, {"id": 5, "v": "x"}])


def test_enable_column_mapping_on_id_mode_table_keeps_id(tmp_path: Path) -> None:
    uri = plain_table(str(tmp_path / "t"), configuration={"delta.columnMapping.mode": "id"})
    before = protocol_of(uri)
    assert lq.DeltaTable(uri).alter.enable_feature("columnMapping").features_added == ()
    assert config_of(uri)["delta.columnMapping.mode"] == "id"
    assert protocol_of(uri) == before
