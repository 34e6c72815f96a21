"""The ``deletionVector`` descriptor and the values derived from it (digest §11.2, §11.3).

Example:
    >>> d = Descriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 1, 36, 2)
    >>> d.absolute_path("s3://mytable")
    's3://mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin'
    >>> d.unique_id
    'uab^-aqEH.-t@S}K{vb[*k^@1'
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from lakequery.dv import z85
from lakequery.errors import DeletionVectorError
from lakequery.protocol.file_locations import normalize_location


@dataclass(frozen=True)
class Descriptor:
    """A deletion vector descriptor as stored in ``add.deletionVector``."""

    storage_type: str  # u | i | p
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Descriptor:
        offset = d.get("offset")
        return cls(
            str(d["storageType"]),
            str(d["pathOrInlineDv"]),
            int(offset) if offset is not None else None,
            int(d["sizeInBytes"]),
            int(d["cardinality"]),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "storageType": self.storage_type,
            "pathOrInlineDv": self.path_or_inline_dv,
            "sizeInBytes": self.size_in_bytes,
            "cardinality": self.cardinality,
        }
        if self.offset is not None:
            out["offset"] = self.offset
        return out

    @property
    def unique_id(self) -> str:
        """``storageType + pathOrInlineDv`` plus ``@offset`` when an offset is set."""
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"

    @property
    def is_inline(self) -> bool:
        return self.storage_type == "i"

    def inline_bytes(self) -> bytes:
        """The serialized bitmap of an inline DV."""
        if not self.is_inline:
            raise ValueError("not an inline deletion vector")
        try:
            return z85.decode(self.path_or_inline_dv, self.size_in_bytes)
        except ValueError:
            if not self.path_or_inline_dv[-5:].startswith("#"):
                raise
            # some writers pad the last group the "Z85 padded" way (leading '#')
            return z85.decode_tail_padded(self.path_or_inline_dv, self.size_in_bytes)

    def absolute_path(self, table_root: str) -> str:
        """Where an on-disk DV lives (``u``: under the table root; ``p``: its own URI)."""
        if self.storage_type == "p":  # file URIs as OS paths, s3a:// as s3://
            return normalize_location(unquote(self.path_or_inline_dv))
        if self.storage_type != "u":
            raise ValueError(f"storage type {self.storage_type!r} has no file")
        s = self.path_or_inline_dv
        if len(s) < Z85_UUID_LENGTH:
            raise ValueError(f"DV path {s!r} is shorter than a Z85 UUID")
        prefix, encoded = s[:-Z85_UUID_LENGTH], s[-Z85_UUID_LENGTH:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85.decode(encoded))}.bin"
        root = table_root.rstrip("/")
        return f"{root}/{prefix}/{name}" if prefix else f"{root}/{name}"


#: Characters of the Z85-encoded UUID that ends a ``u`` DV's ``pathOrInlineDv``.
Z85_UUID_LENGTH = 20


def u_prefixes(paths: Any) -> Any:
    """The directory prefixes of ``u`` DVs' ``pathOrInlineDv`` values (vectorised): all
    but the trailing Z85 UUID."""
    from lakequery import arrow_kernels as pc

    return pc.utf8_slice_codeunits(paths, 0, -Z85_UUID_LENGTH)


def new_uuid_path(u: uuid.UUID, prefix: str = "") -> str:
    """``pathOrInlineDv`` for a ``u`` DV file named after ``u`` (optional random prefix)."""
    return prefix + z85.encode(u.bytes)


#: Serialized size of an empty RoaringBitmapArray: magic (4 bytes) and bucket count (8).
EMPTY_DV_SIZE = 12


def _plainly_valid(
    present: Any,
    kind: Any,
    path: Any,
    size: Any,
    card: Any,
    offset: Any,
    records: Any,
    rooted: bool,
) -> bool:
    """True when no descriptor can fail a rule of :func:`check_descriptors`, decided
    without turning any Python value into an Arrow one: pyarrow's first such conversion
    (``pa.scalar``, ``pa.array``, a Python number given to a compute function) imports
    pandas, 0.2-0.4 s in a fresh process. Only option-taking kernels and aggregates read
    back with ``as_py`` run here; when this says False the full check runs and names the
    problem (a cardinality of 0, a ``p`` DV, and -- with a table root -- a ``u`` prefix
    holding ``..`` or ``%`` also send it there)."""
    from lakequery import arrow_kernels as pc

    if any(pc.any(pc.and_(present, pc.is_null(c))).as_py() for c in (kind, path, size, card)):
        return False
    if pc.any(pc.and_(present, pc.invert(pc.match_substring_regex(kind, "^[uip]$")))).as_py():
        return False
    inline = pc.match_substring_regex(kind, "^i$")
    if pc.any(pc.and_(present, pc.and_(inline, pc.is_valid(offset)))).as_py():
        return False
    if records is not None and pc.any(pc.and_(present, pc.greater(card, records))).as_py():
        return False
    if rooted:
        if pc.any(pc.and_(present, pc.match_substring_regex(kind, "^p$"))).as_py():
            return False
        prefix = u_prefixes(path)
        suspect = pc.and_(pc.match_substring_regex(kind, "^u$"), pc.match_substring(prefix, ".."))
        suspect = pc.or_(
            suspect,
            pc.and_(pc.match_substring_regex(kind, "^u$"), pc.match_substring(prefix, "%")),
        )
        if pc.any(pc.and_(present, suspect)).as_py():
            return False
    lowest = (pc.min(pc.filter(c, present)).as_py() for c in (size, card, offset))
    return all(low is None or low >= bound for low, bound in zip(lowest, (0, 1, 0), strict=True))


def _path_problems(root: str, kind: Any, path: Any) -> list[tuple[str, Any]]:
    """(reason, mask) of DV paths that escape the root: a ``..`` segment in a ``u``
    prefix; a ``p`` path that is relative, on other storage or holds a ``..`` segment."""
    from lakequery import arrow_kernels as pc
    from lakequery.protocol.file_locations import (
        PARENT_SEGMENT_PATTERN,
        external_mask,
        refusals,
    )

    is_u, is_p = pc.equal(kind, pa.scalar("u")), pc.equal(kind, pa.scalar("p"))
    path = pc.fill_null(path, "")
    prefix = u_prefixes(path)
    decoded = path  # the spellings of '.' and '/' that could hide a '..' segment
    for code, char in (("%2E", "."), ("%2e", "."), ("%2F", "/"), ("%2f", "/")):
        decoded = pc.replace_substring(decoded, code, char)
    refused = pc.is_valid(refusals(root, decoded))
    return [
        (
            "a .. segment in the DV path prefix leaves the table root",
            pc.and_(is_u, pc.match_substring_regex(prefix, PARENT_SEGMENT_PATTERN)),
        ),
        (
            "a p (absolute path) DV whose path is relative",
            pc.and_(is_p, pc.invert(external_mask(decoded))),
        ),
        ("a p DV path outside the table's storage or through a .. segment", pc.and_(is_p, refused)),
    ]


def check_descriptors(files: pa.Table, root: str | None = None) -> None:
    """Refuses live files whose ``deletionVector`` is present but malformed.

    A descriptor that lacks its storage type, path, size or cardinality, has an unknown
    storage type, a negative size, cardinality or offset, an offset on an inline DV, a
    cardinality of 0 with a non-empty bitmap, or a cardinality above the file's
    ``numRecords`` cannot be applied; reading the file without
    it would return deleted rows. With the table ``root``, DV files are held to the rule
    of data files (:mod:`lakequery.protocol.file_locations`): a ``u`` prefix must not hold
    a ``..`` segment, and a ``p`` path must be an absolute location on the table's own
    storage without a ``..`` segment (``%2E``/``%2F`` decoded first). One vectorised pass
    over the replayed files (most tables have no DV at all).

    Raises:
        DeletionVectorError: naming the first such data file and what is wrong.
    """
    from lakequery import arrow_kernels as pc

    if "deletion_vector" not in files.column_names or files.num_rows == 0:
        return
    dv = files.column("deletion_vector")
    if dv.null_count == len(dv):
        return
    kind = pc.struct_field(dv, "storageType")
    path = pc.struct_field(dv, "pathOrInlineDv")
    size = pc.struct_field(dv, "sizeInBytes")
    card = pc.struct_field(dv, "cardinality")
    offset = pc.struct_field(dv, "offset")
    # a descriptor is there when the struct is valid and any field is set
    present = pc.and_(
        pc.is_valid(dv),
        pc.or_(
            pc.or_(pc.is_valid(kind), pc.is_valid(path)),
            pc.or_(pc.or_(pc.is_valid(size), pc.is_valid(card)), pc.is_valid(offset)),
        ),
    )
    records = files.column("num_records") if "num_records" in files.column_names else None
    if _plainly_valid(present, kind, path, size, card, offset, records, root is not None):
        return
    zero, empty = pa.scalar(0, pa.int64()), pa.scalar(EMPTY_DV_SIZE, pa.int64())
    problems = [
        ("no storageType", pc.is_null(kind)),
        ("storageType is not u, i or p", pc.invert(pc.is_in(kind, pa.array(["u", "i", "p"])))),
        ("no pathOrInlineDv", pc.is_null(path)),
        ("no sizeInBytes", pc.is_null(size)),
        ("negative sizeInBytes", pc.less(size, zero)),
        ("no cardinality", pc.is_null(card)),
        ("negative cardinality", pc.less(card, zero)),
        ("negative offset", pc.less(offset, zero)),
        (
            "an inline DV with an offset",
            pc.and_(pc.equal(kind, pa.scalar("i")), pc.is_valid(offset)),
        ),
        # readers skip a DV that deletes nothing, so its size must be an empty bitmap's
        (
            f"cardinality 0 but more than {EMPTY_DV_SIZE} bytes of bitmap",
            pc.and_(pc.equal(card, zero), pc.greater(size, empty)),
        ),
    ]
    if records is not None:  # a DV deletes some of the file's rows
        problems.append(("cardinality above the file's numRecords", pc.greater(card, records)))
    if root is not None:
        problems += _path_problems(root, kind, path)
    for reason, mask in problems:
        hit = pc.and_kleene(present, pc.fill_null(mask, False))
        if pc.any(hit).as_py():
            index = pc.index(hit, True).as_py()
            row = files.slice(index, 1).to_pylist()[0]
            d = row["deletion_vector"] or {}
            unique = f"{d.get('storageType') or ''}{d.get('pathOrInlineDv') or ''}"
            raise DeletionVectorError(str(row["path"]), unique, f"malformed descriptor: {reason}")
