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

from lakequery.dv import z85
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
        if len(s) < 20:
            raise ValueError(f"DV path {s!r} is shorter than a Z85 UUID")
        prefix, encoded = s[:-20], s[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85.decode(encoded))}.bin"
        root = table_root.rstrip("/")
        return f"{root}/{prefix}/{name}" if prefix else f"{root}/{name}"


def new_uuid_path(u: uuid.UUID, prefix: str = "") -> str:
    """``pathOrInlineDv`` for a ``u`` DV file named after ``u`` (optional random prefix)."""
    return prefix + z85.encode(u.bytes)
