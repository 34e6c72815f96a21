"""Rich displays for notebooks: the HTML behind ``_repr_html_`` and the facts it shows.

- :mod:`lakequery.display.facts` -- file totals and per-partition summaries (Arrow).
- :mod:`lakequery.display.html` -- one renderer per object, with escaping helpers.
- :class:`HtmlMetrics` -- gives the command result dataclasses their ``_repr_html_``.

Nothing here is imported by ``import lakequery``; the classes import the renderers when
Jupyter asks for HTML.
"""

from __future__ import annotations

from collections.abc import Sequence


class HtmlMetrics:
    """Mixin for the command results (:mod:`lakequery.commands.metrics`, ``DmlMetrics``):
    an HTML table of their fields in Jupyter."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        from lakequery.display.html import metrics_html

        return metrics_html(self)


def column_list(columns: Sequence[str], limit: int = 6) -> str:
    """Column names for a one-line repr: all of them up to ``limit``, else the first ones
    and the count.

    Example:
        >>> column_list(["a", "b"])
        "['a', 'b']"
        >>> column_list([f"c{i}" for i in range(40)], limit=2)
        "['c0', 'c1', ... 40 columns]"
    """
    if len(columns) <= limit:
        return repr(list(columns))
    shown = ", ".join(repr(c) for c in columns[:limit])
    return f"[{shown}, ... {len(columns)} columns]"


__all__ = ["HtmlMetrics", "column_list"]
