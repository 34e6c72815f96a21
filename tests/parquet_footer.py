"""Annotate groups of a written Parquet file with the VARIANT logical type (tests only).

pyarrow writes a variant's ``{metadata, value}`` group as a plain struct and DuckDB cannot
write a variant below the top level, so tests that need Parquet's VARIANT annotation on
any group (nested in structs, lists and maps too) write the file with pyarrow and then
rewrite its footer, as a writer that knows the annotation would have written it.

The footer is ``FileMetaData`` in Thrift's compact protocol, followed by its length (4 bytes,
little endian) and ``PAR1``. The codec here decodes every Thrift value generically (field
ids and wire types kept), so re-encoding an unchanged footer gives back the same bytes; the
only change made is field 10 (``logicalType``) of the chosen ``SchemaElement``s, set to the
``VARIANT`` member (16) of the ``LogicalType`` union with ``specification_version = 1``.

Example:
    >>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> path = tempfile.mkdtemp() + "/v.parquet"
    >>> v = pa.struct([("metadata", pa.binary()), ("value", pa.binary())])
    >>> pq.write_table(pa.table({"v": pa.array([{"metadata": b"\\x01\\x00\\x00", "value": b"\\x00"}], v)}), path)
    >>> annotate_variant(path, [("v",)])
    >>> "Variant" in str(pq.ParquetFile(path).metadata.schema)
    True
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

MAGIC = b"PAR1"

# compact protocol wire types
STOP, TRUE, FALSE, I8, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)

#: A decoded struct: its fields in wire order as ``[field id, wire type, value]``.
Fields = list[list[Any]]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = out = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return out

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, wire: int) -> Any:
        if wire in (TRUE, FALSE):  # inside a container a boolean is one byte
            return self.byte() == TRUE
        if wire == I8:
            return struct.unpack("<b", bytes([self.byte()]))[0]
        if wire in (I16, I32, I64):
            return self.zigzag()
        if wire == DOUBLE:
            self.pos += 8
            return struct.unpack("<d", self.data[self.pos - 8 : self.pos])[0]
        if wire == BINARY:
            n = self.varint()
            self.pos += n
            return self.data[self.pos - n : self.pos]
        if wire in (LIST, SET):
            head = self.byte()
            size = head >> 4 if head >> 4 != 15 else self.varint()
            elem = head & 0x0F
            return [elem, [self.value(elem) for _ in range(size)]]
        if wire == MAP:
            size = self.varint()
            kinds = self.byte() if size else 0
            k, v = kinds >> 4, kinds & 0x0F
            return [k, v, [(self.value(k), self.value(v)) for _ in range(size)]]
        if wire == STRUCT:
            return self.fields()
        raise ValueError(f"unknown compact wire type {wire}")

    def fields(self) -> Fields:
        out: Fields = []
        last = 0
        while True:
            head = self.byte()
            wire = head & 0x0F
            if wire == STOP:
                return out
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            if wire in (TRUE, FALSE):
                out.append([fid, wire, wire == TRUE])
            else:
                out.append([fid, wire, self.value(wire)])
            last = fid


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _value(wire: int, v: Any) -> bytes:
    if wire in (TRUE, FALSE):
        return bytes([TRUE if v else FALSE])
    if wire == I8:
        return struct.pack("<b", v)
    if wire in (I16, I32, I64):
        return _zigzag(v)
    if wire == DOUBLE:
        return struct.pack("<d", v)
    if wire == BINARY:
        return _varint(len(v)) + bytes(v)
    if wire in (LIST, SET):
        elem, items = v
        head = bytes([(len(items) << 4) | elem]) if len(items) < 15 else bytes([0xF0 | elem])
        size = b"" if len(items) < 15 else _varint(len(items))
        return head + size + b"".join(_value(elem, x) for x in items)
    if wire == MAP:
        k, t, pairs = v
        if not pairs:
            return b"\x00"
        body = b"".join(_value(k, a) + _value(t, b) for a, b in pairs)
        return _varint(len(pairs)) + bytes([(k << 4) | t]) + body
    if wire == STRUCT:
        return _fields(v)
    raise ValueError(f"unknown compact wire type {wire}")


def _fields(fields: Fields) -> bytes:
    out = bytearray()
    last = 0
    for fid, wire, v in fields:
        if wire in (TRUE, FALSE):
            wire = TRUE if v else FALSE
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | wire)
        else:
            out.append(wire)
            out += _zigzag(fid)
        if wire not in (TRUE, FALSE):
            out += _value(wire, v)
        last = fid
    out.append(STOP)
    return bytes(out)


def _get(fields: Fields, fid: int) -> Any:
    return next((v for f, _, v in fields if f == fid), None)


def _element_paths(elements: Sequence[Fields]) -> list[tuple[str, ...]]:
    """The path of every schema element (the root's is ``()``), from the depth-first list
    and each group's ``num_children`` (field 5)."""
    paths: list[tuple[str, ...]] = []
    stack: list[list[Any]] = []  # [path, children left]
    for el in elements:
        name = _get(el, 4).decode()
        parent = stack[-1][0] if stack else None
        path: tuple[str, ...] = () if parent is None else (*parent, name)
        if stack:
            stack[-1][1] -= 1
        paths.append(path)
        children = _get(el, 5) or 0
        if children:
            stack.append([path, children])
        while stack and stack[-1][1] == 0:
            stack.pop()
    return paths


def annotate_variant(path: str | Path, groups: Iterable[Sequence[str]]) -> None:
    """Marks the groups at ``groups`` (Parquet paths such as ``("v",)``, ``("s", "v")``,
    ``("l", "list", "element")`` or ``("m", "key_value", "value")``) as VARIANT."""
    p = Path(path)
    data = p.read_bytes()
    if data[-4:] != MAGIC:
        raise ValueError(f"{p} is not a Parquet file")
    size = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - size
    meta = _Reader(data[start : len(data) - 8]).fields()
    elements = _get(meta, 2)[1]
    paths = _element_paths(elements)
    wanted = {tuple(g) for g in groups}
    missing = wanted - set(paths)
    if missing:
        raise KeyError(f"no schema element at {sorted(missing)} (have {paths})")
    for el, el_path in zip(elements, paths, strict=True):
        if el_path in wanted:
            el[:] = [f for f in el if f[0] != 10]
            el.append([10, STRUCT, [[16, STRUCT, [[1, I8, 1]]]]])
            el.sort(key=lambda f: f[0])
    footer = _fields(meta)
    p.write_bytes(data[:start] + footer + struct.pack("<I", len(footer)) + MAGIC)


def roundtrip(path: str | Path) -> bytes:
    """The footer re-encoded unchanged (a check of the codec)."""
    data = Path(path).read_bytes()
    size = struct.unpack("<I", data[-8:-4])[0]
    return _fields(_Reader(data[len(data) - 8 - size : len(data) - 8]).fields())
