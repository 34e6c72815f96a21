"""Convert PyArrow compute expressions into lakequery predicates.

``pyarrow.compute.Expression`` offers no Python API to walk its tree; its ``str()`` is
lossy (literal types and quoting) and ``to_substrait`` needs a schema. The one exact,
schema-free view is the serialization Arrow uses to pickle an expression: an Arrow IPC
file whose columns hold the literals and option structs, and whose schema metadata lists
the tree in prefix order as key/value pairs (``call``/``end`` around arguments,
``field_ref``, ``nested_field_ref``, ``literal`` and ``options`` referring to columns).
The metadata keys repeat, and ``Schema.metadata`` is a ``dict``, so the pairs are read in
order through the Arrow C data interface (``__arrow_c_schema__``), whose metadata
encoding is a documented ABI.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from lakequery import arrow_kernels as pc
from lakequery.errors import PredicateError
from lakequery.protocol.arrow_types import timestamp_params, timestamp_type
from lakequery.protocol.predicate_ast import (
    And,
    Arith,
    Column,
    Compare,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
)

_COMPARE = {
    "equal": "=",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
}
_ARITH = {
    "add": "+",
    "add_checked": "+",
    "subtract": "-",
    "subtract_checked": "-",
    "multiply": "*",
    "multiply_checked": "*",
    "divide": "/",
    "divide_checked": "/",
}
# SetLookupOptions.null_matching_behavior
_MATCH, _SKIP, _EMIT_NULL, _INCONCLUSIVE = 0, 1, 2, 3


class _ArrowSchema(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """Schema metadata in order, duplicates kept (read via the C data interface)."""
    capsule = schema.__arrow_c_schema__()
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, b"arrow_schema")
    metadata = _ArrowSchema.from_address(address).metadata
    if not metadata:
        return []

    def int32(offset: int) -> int:
        return int.from_bytes(ctypes.string_at(offset, 4), sys.byteorder, signed=True)

    pairs, offset = [], metadata + 4
    for _ in range(int32(metadata)):
        size = int32(offset)
        key = ctypes.string_at(offset + 4, size).decode()
        offset += 4 + size
        size = int32(offset)
        value = ctypes.string_at(offset + 4, size).decode()
        offset += 4 + size
        pairs.append((key, value))
    del capsule  # releases the exported schema
    return pairs


def _literal(scalar: pa.Scalar[Any], context: str) -> Literal:
    t = scalar.type
    if pa.types.is_nested(t) or pa.types.is_dictionary(t):
        raise PredicateError(context, f"unsupported literal of type {t}")
    if pa.types.is_timestamp(t) and timestamp_params(t)[0] == "ns":
        try:
            scalar = scalar.cast(timestamp_type("us", timestamp_params(t)[1]), safe=True)
        except pa.ArrowInvalid:
            raise PredicateError(context, "timestamp literal below microsecond precision") from None
        t = scalar.type
    return Literal(scalar.as_py(), t)


def _like_pattern(pattern: str, context: str) -> str:
    """A ``match_like`` pattern (backslash escapes) as an escape-free LIKE pattern."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in "%_":
                raise PredicateError(
                    context, "LIKE patterns matching a literal '%' or '_' are not supported"
                )
            out.append(nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


class _Converter:
    def __init__(self, pairs: list[tuple[str, str]], table: pa.Table, context: str) -> None:
        self.pairs = pairs
        self.table = table
        self.context = context
        self.i = 0

    def fail(self, reason: str) -> PredicateError:
        return PredicateError(self.context, reason)

    def next(self) -> tuple[str, str]:
        if self.i >= len(self.pairs):
            raise self.fail("truncated expression serialization")
        pair = self.pairs[self.i]
        self.i += 1
        return pair

    def column(self, index: str) -> pa.Scalar[Any]:
        value: pa.Scalar[Any] = self.table.column(int(index))[0]
        return value

    def node(self, negated: bool) -> Expr:
        key, value = self.next()
        if key == "literal":
            return _literal(self.column(value), self.context)
        if key == "field_ref":
            return Column((value,))
        if key == "nested_field_ref":
            names = []
            for _ in range(int(value)):
                k, v = self.next()
                if k != "field_ref":
                    raise self.fail("only field references by name are supported")
                names.append(v)
            return Column(tuple(names))
        if key != "call":
            raise self.fail(f"unexpected {key!r} in expression")
        name = value
        inner_negated = not negated if name == "invert" else negated
        args: list[Expr] = []
        options: dict[str, Any] = {}
        while self.i < len(self.pairs) and self.pairs[self.i][0] not in ("end", "options"):
            args.append(self.node(inner_negated))
        k, v = self.next()
        if k == "options":
            struct = self.column(v)
            assert isinstance(struct, pa.StructScalar)
            options = {f.name: struct[f.name] for f in struct.type}
            k, v = self.next()
        if (k, v) != ("end", name):
            raise self.fail(f"malformed call to {name!r}")
        return self.call(name, args, options, negated)

    def call(self, name: str, args: list[Expr], options: dict[str, Any], negated: bool) -> Expr:
        def arity(n: int) -> None:
            if len(args) != n:
                raise self.fail(f"{name} expects {n} arguments, got {len(args)}")

        if name in _COMPARE:
            arity(2)
            return Compare(_COMPARE[name], args[0], args[1])
        if name in _ARITH:
            arity(2)
            return Arith(_ARITH[name], args[0], args[1])
        if name in ("and", "or") and negated:
            raise self.fail(f"non-Kleene {name!r} under a negation is not supported (use & / |)")
        if name in ("and_kleene", "and"):
            return And(tuple(args))
        if name in ("or_kleene", "or"):
            return Or(tuple(args))
        if name == "and_not_kleene":
            arity(2)
            return And((args[0], Not(args[1])))
        if name == "invert":
            arity(1)
            return Not(args[0])
        if name in ("negate", "negate_checked"):
            arity(1)
            return Arith("-", Literal(0), args[0])
        if name == "is_null":
            arity(1)
            if options.get("nan_is_null") is not None and options["nan_is_null"].as_py():
                raise self.fail("is_null(nan_is_null=True) is not supported")
            return IsNull(args[0])
        if name == "is_valid":
            arity(1)
            return IsNull(args[0], negated=True)
        if name == "is_in":
            arity(1)
            return self.is_in(args[0], options)
        if name in ("match_like", "starts_with", "ends_with", "match_substring"):
            arity(1)
            if options["ignore_case"].as_py():
                raise self.fail(f"{name}(ignore_case=True) is not supported")
            raw = options["pattern"].as_py()
            if name == "match_like":
                return Like(args[0], _like_pattern(raw, self.context))
            if "%" in raw or "_" in raw:
                raise self.fail(f"{name} with '%' or '_' in the pattern is not supported")
            pattern = {"starts_with": "{}%", "ends_with": "%{}", "match_substring": "%{}%"}
            return Like(args[0], pattern[name].format(raw))
        raise self.fail(f"unsupported pyarrow function {name!r}")

    def is_in(self, operand: Expr, options: dict[str, Any]) -> Expr:
        value_set = options["value_set"].values
        behaviour = _MATCH
        if "null_matching_behavior" in options:
            behaviour = int(options["null_matching_behavior"].as_py())
        elif options.get("skip_nulls") is not None and options["skip_nulls"].as_py():
            behaviour = _SKIP
        present = [_literal(s, self.context) for s in value_set if s.is_valid]
        has_null = value_set.null_count > 0
        values = tuple(present)
        if behaviour == _INCONCLUSIVE:
            if has_null:
                values = (*values, Literal(None, value_set.type))
            return In(operand, values) if values else Literal(False, pa.bool_())
        found: Expr = In(operand, values) if values else Literal(False, pa.bool_())
        if behaviour == _EMIT_NULL:
            return found
        if behaviour == _MATCH and has_null:  # NULL input matches the NULL in the set
            return Or((IsNull(operand), found))
        return And((IsNull(operand, negated=True), found))  # a NULL input is FALSE


def from_pyarrow_expression(expr: pc.Expression) -> Expr:
    """Convert a PyArrow compute expression into a predicate tree.

    Supported: field references (nested ones too), scalars, ``== != < <= > >=``,
    ``& | ~`` (Kleene; the non-Kleene ``and``/``or`` only outside a negation),
    ``is_null`` (without ``nan_is_null``), ``is_valid``, ``is_in`` (its null matching
    behaviour is reproduced exactly), ``+ - * /`` and negation, ``match_like``,
    ``starts_with``, ``ends_with`` and ``match_substring`` (case sensitive). Note that
    ``/`` becomes true division (PyArrow divides integers by truncation).

    Args:
        expr: The PyArrow expression.

    Returns:
        An unbound predicate (literals keep their Arrow types).

    Raises:
        PredicateError: The expression uses something else.

    Example:
        >>> import pyarrow.compute as pc
        >>> from lakequery.protocol.predicates import format_predicate, from_pyarrow_expression
        >>> format_predicate(from_pyarrow_expression((pc.field("a") > 3) | ~pc.field("b").is_null()))
        '(("a" > 3) OR (NOT ("b" IS NULL)))'
    """
    if not isinstance(expr, pc.Expression):
        raise PredicateError(expr, "expected a pyarrow.compute.Expression")
    context = str(expr)
    try:
        reduced = expr.__reduce__()
        buffer = reduced[1][0]
        reader = ipc.open_file(buffer)
        table = reader.read_all()
        pairs = _metadata_pairs(reader.schema)
    except (pa.ArrowException, TypeError, IndexError, ValueError) as exc:
        raise PredicateError(context, f"cannot inspect the expression: {exc}") from None
    converter = _Converter(pairs, table, context)
    result = converter.node(negated=False)
    if converter.i != len(pairs):
        raise PredicateError(context, "unexpected trailing data in expression serialization")
    return result
