"""Rich displays for notebooks: the HTML behind ``_repr_html_`` and the facts it shows.

- :mod:`lakequery.display.facts` -- file totals and per-partition summaries (Arrow).
- :mod:`lakequery.display.html` -- one renderer per object, with escaping helpers.
- :class:`HtmlMetrics` -- gives the command result dataclasses their ``_repr_html_``.

Nothing here is imported by ``import lakequery``; the classes import the renderers when
Jupyter asks for HTML.
"""

from __future__ import annotations


class HtmlMetrics:
    """Mixin for the command results (:mod:`lakequery.commands.metrics`, ``DmlMetrics``):
    an HTML table of their fields in Jupyter."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        from lakequery.display.html import metrics_html

        return metrics_html(self)


__all__ = ["HtmlMetrics"]
