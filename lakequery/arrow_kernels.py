"""The Arrow compute kernels of the read path, without importing ``pyarrow.compute``.

``import pyarrow.compute`` costs a fresh process ~27 ms on top of pyarrow (it builds a
Python wrapper, with a generated docstring and signature, for each of the ~600 kernels
in Arrow's registry, importing ``pydoc`` on the way), and its objects make the
interpreter's exit slower too: a tenth of a fresh ``to_duckdb()`` on a small table (issue
16, benchmarks/RESULTS.md section 8). The kernels themselves live in ``pyarrow._compute``
(~6 ms): ``call_function`` and the option classes are what those wrappers call, and
``pyarrow.compute`` re-exports both as public API (the fallback import below). It is
imported on the first kernel call: lists of at most :data:`FEW_ROWS` strings (the link
check's directories, a plan's locations) are handled as Python strings instead, so a
DuckDB read of a small table without deletion vectors never imports it.

So the modules a plain read or write runs (replay and its load checks, planning, the
DuckDB engine's layout, deletion vectors, the writer's partitioning and statistics, the
CLI's read commands) import this module as ``pc``. Each name here is the
``pyarrow.compute`` function of the same name over arrays and scalars, with the same
positional arguments, option keywords, ``options=`` and ``memory_pool=`` (:func:`_kernel`
builds it as ``pyarrow.compute`` builds its wrappers). Expressions (``pc.field``) stay
``pyarrow.compute``'s, imported where a filter is built; only their class,
:data:`Expression`, is here, for ``isinstance``. A name missing here fails mypy at the
call; ``tests/test_arrow_kernels.py`` compares every kernel with ``pyarrow.compute``'s,
and ``tests/test_lazy_import.py`` holds fresh DuckDB reads (plain, partitioned, with
deletion vectors, from a checkpoint) to leave ``pyarrow.compute`` unimported.

Example:
    >>> import pyarrow as pa
    >>> from lakequery import arrow_kernels as pc
    >>> pc.match_substring_regex(pa.array(["a/b", "c"]), "/").to_pylist()
    [True, False]
    >>> pc.any(pc.is_null(pa.array(["x", None]))).as_py()
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyarrow._compute import Expression as Expression


@functools.cache
def _compute() -> Any:
    """``pyarrow._compute``, imported on the first kernel call: a read of a small table
    without deletion vectors calls none (~5 ms of a fresh process, import and exit)."""
    try:  # where the kernels live (pyarrow 3 and later)
        from pyarrow import _compute as module
    except ImportError:  # pragma: no cover - the public names, should pyarrow move them
        import pyarrow.compute as module  # type: ignore[no-redef]
    return module


def call_function(name: str, args: list[Any], options: Any = None, memory_pool: Any = None) -> Any:
    """``pyarrow.compute.call_function``."""
    return _compute().call_function(name, args, options, memory_pool)


def __getattr__(name: str) -> Any:
    if name == "Expression":  # the class of ``pyarrow.compute`` expressions (isinstance)
        return _compute().Expression
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Arity of a kernel taking any number of arguments.
VARARGS = -1

#: Up to this many strings, Python's string methods cost less than a kernel call (and, in
#: a fresh process, the kernels' import); from 200,000 on they cost 10-30x more.
FEW_ROWS = 1024


def _kernel(name: str, arity: int, options_name: str | None = None) -> Callable[..., Any]:
    """The ``pyarrow.compute`` wrapper of kernel ``name``: the first ``arity`` positional
    arguments are its inputs, further positional arguments and the keywords build its
    options (else ``options=``, an instance or a dict of them). ``options_name`` names the
    option class, looked up when options are built (an older pyarrow may lack a class that
    only newer keywords need)."""

    def build(*args: Any, **kwargs: Any) -> Any:
        if options_name is None:
            raise TypeError(f"{name} takes no options, got {args or kwargs}")
        return getattr(_compute(), options_name)(*args, **kwargs)

    def call(*args: Any, memory_pool: Any = None, options: Any = None, **kwargs: Any) -> Any:
        if arity == VARARGS:
            inputs, option_args = args, ()
        else:
            if len(args) < arity:
                raise TypeError(f"{name} takes {arity} positional argument(s), got {len(args)}")
            inputs, option_args = args[:arity], args[arity:]
        if option_args or kwargs:
            if options is not None:
                raise TypeError(f"{name} called with both options= and option arguments")
            options = build(*option_args, **kwargs)
        elif isinstance(options, dict):
            options = build(**options)
        return call_function(name, list(inputs), options, memory_pool)

    call.__name__ = call.__qualname__ = name
    return call


# -- booleans and comparisons ---------------------------------------------------------------
and_ = _kernel("and", 2)
or_ = _kernel("or", 2)
and_kleene = _kernel("and_kleene", 2)
invert = _kernel("invert", 1)
is_valid = _kernel("is_valid", 1)
is_null = _kernel("is_null", 1, "NullOptions")
equal = _kernel("equal", 2)
not_equal = _kernel("not_equal", 2)
less = _kernel("less", 2)
less_equal = _kernel("less_equal", 2)
greater = _kernel("greater", 2)
if_else = _kernel("if_else", 3)

# -- arithmetic -----------------------------------------------------------------------------
add = _kernel("add", 2)
add_checked = _kernel("add_checked", 2)
multiply = _kernel("multiply", 2)
multiply_checked = _kernel("multiply_checked", 2)
is_nan = _kernel("is_nan", 1)

# -- aggregates (named as in pyarrow.compute, shadowing builtins only in this namespace) ------
any = _kernel("any", 1, "ScalarAggregateOptions")
all = _kernel("all", 1, "ScalarAggregateOptions")
min = _kernel("min", 1, "ScalarAggregateOptions")
max = _kernel("max", 1, "ScalarAggregateOptions")
sum = _kernel("sum", 1, "ScalarAggregateOptions")
min_max = _kernel("min_max", 1, "ScalarAggregateOptions")
count_distinct = _kernel("count_distinct", 1, "CountOptions")

# -- strings --------------------------------------------------------------------------------
match_substring = _kernel("match_substring", 1, "MatchSubstringOptions")
match_substring_regex = _kernel("match_substring_regex", 1, "MatchSubstringOptions")
starts_with = _kernel("starts_with", 1, "MatchSubstringOptions")
replace_substring = _kernel("replace_substring", 1, "ReplaceSubstringOptions")
replace_substring_regex = _kernel("replace_substring_regex", 1, "ReplaceSubstringOptions")
extract_regex = _kernel("extract_regex", 1, "ExtractRegexOptions")
utf8_slice_codeunits = _kernel("utf8_slice_codeunits", 1, "SliceOptions")
utf8_replace_slice = _kernel("utf8_replace_slice", 1, "ReplaceSliceOptions")
utf8_lower = _kernel("utf8_lower", 1)
split_pattern = _kernel("split_pattern", 1, "SplitPatternOptions")
strftime = _kernel("strftime", 1, "StrftimeOptions")
binary_length = _kernel("binary_length", 1)
binary_join_element_wise = _kernel("binary_join_element_wise", VARARGS, "JoinOptions")

# -- nested types, sets, selection ----------------------------------------------------------
struct_field = _kernel("struct_field", 1, "StructFieldOptions")
map_lookup = _kernel("map_lookup", 1, "MapLookupOptions")
list_slice = _kernel("list_slice", 1, "ListSliceOptions")
list_flatten = _kernel("list_flatten", 1, "ListFlattenOptions")
is_in = _kernel("is_in", 1, "SetLookupOptions")
index_in = _kernel("index_in", 1, "SetLookupOptions")
indices_nonzero = _kernel("indices_nonzero", 1)
unique = _kernel("unique", 1)
dictionary_encode = _kernel("dictionary_encode", 1, "DictionaryEncodeOptions")
run_end_decode = _kernel("run_end_decode", 1)
drop_null = _kernel("drop_null", 1)
#: ``values`` where ``mask`` is true, and the rows at ``indices`` (the ``filter`` and
#: ``take`` methods of arrays, batches and tables import ``pyarrow.compute``)
filter = _kernel("filter", 2, "FilterOptions")
take = _kernel("take", 2, "TakeOptions")
#: the row order of a table by ``sort_keys`` (``[(column, "ascending" | "descending")]``)
sort_indices = _kernel("sort_indices", 1, "SortOptions")


# -- the functions pyarrow.compute writes by hand ---------------------------------------------
def cast(
    arr: Any, target_type: pa.DataType | None = None, safe: bool | None = None, options: Any = None
) -> Any:
    """``pyarrow.compute.cast`` to a ``DataType``: safe unless ``safe=False``."""
    if options is None:
        options_class = _compute().CastOptions
        safe_cast = options_class.unsafe if safe is False else options_class.safe
        options = safe_cast(target_type)
    elif target_type is not None or safe is not None:
        raise ValueError("cast takes target_type and safe, or options, not both")
    return call_function("cast", [arr], options)


def cast_columns(data: Any, schema: pa.Schema) -> Any:
    """``Table.cast`` / ``RecordBatch.cast`` to ``schema``, column by column (the methods
    import ``pyarrow.compute``). Refuses other column names, as they do."""
    if data.schema.names != schema.names:
        raise ValueError(f"columns {data.schema.names} do not match {schema.names}")
    columns = [cast(c, f.type) for c, f in zip(data.columns, schema, strict=True)]
    return type(data).from_arrays(columns, schema=schema)


def fill_null(values: Any, fill_value: Any) -> Any:
    """``pyarrow.compute.fill_null``: ``fill_value`` is made a scalar of the values' type."""
    fill: Any = fill_value
    if isinstance(fill, pa.Scalar):
        if fill.type != values.type:
            fill = pa.scalar(fill.as_py(), type=values.type)
    elif not isinstance(fill, (pa.Array, pa.ChunkedArray)):
        fill = pa.scalar(fill, type=values.type)
    return call_function("coalesce", [values, fill])


def index(data: Any, value: Any) -> Any:
    """``pyarrow.compute.index`` over all of ``data``: the first position of ``value``
    (-1 when absent)."""
    scalar: Any = value
    if not isinstance(scalar, pa.Scalar):
        scalar = pa.scalar(scalar, type=data.type)
    elif data.type != scalar.type:
        scalar = pa.scalar(scalar.as_py(), type=data.type)
    return call_function("index", [data], _compute().IndexOptions(scalar))
