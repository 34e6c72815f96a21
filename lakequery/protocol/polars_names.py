"""How a column or struct field name is handed to Polars: ``pl.col`` and ``struct.field``
read ``*`` as every column and ``^...$`` as a regular expression, so such names go in as
the expression that matches exactly themselves.

Example:
    >>> literal_name("a b"), literal_name("*"), literal_name("^v.*$")
    ('a b', '^\\\\*$', '^\\\\^v\\\\.\\\\*\\\\$$')
"""

from __future__ import annotations

import re


def is_pattern(name: str) -> bool:
    """Whether Polars would expand ``name`` (a wildcard or a regular expression)."""
    return name == "*" or (name.startswith("^") and name.endswith("$"))


def literal_name(name: str) -> str:
    """``name`` as Polars selects exactly that one column (or struct field)."""
    return "^" + re.escape(name) + "$" if is_pattern(name) else name
