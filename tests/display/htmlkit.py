"""Parse ``_repr_html_`` output with the standard library's HTML parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"br", "hr", "img", "meta", "link", "input", "col", "wbr"}


@dataclass
class Parsed:
    """The text of each element kind and every text run; ``unbalanced`` lists tags that
    were closed without being open (or left open)."""

    texts: list[str] = field(default_factory=list)
    by_tag: dict[str, list[str]] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    unbalanced: list[str] = field(default_factory=list)
    rows: list[list[tuple[str, str]]] = field(default_factory=list)  # (th|td, text) per <tr>

    @property
    def text(self) -> str:
        return " ".join(self.texts)

    def cells(self) -> list[str]:
        return self.by_tag.get("td", []) + self.by_tag.get("th", [])

    def fields(self) -> dict[str, str]:
        """Label -> value of the two-column rows (``<th>label</th><td>value</td>``)."""
        return {
            row[0][1]: row[1][1]
            for row in self.rows
            if len(row) == 2 and row[0][0] == "th" and row[1][0] == "td"
        }


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out = Parsed()
        self.stack: list[tuple[str, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.out.tags.append(tag)
        if tag == "tr":
            self.out.rows.append([])
        if tag not in VOID:
            self.stack.append((tag, []))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1][0] != tag:
            self.out.unbalanced.append(tag)
            return
        name, parts = self.stack.pop()
        text = "".join(parts).strip()
        self.out.by_tag.setdefault(name, []).append(text)
        if name in ("td", "th") and self.out.rows:
            self.out.rows[-1].append((name, text))
        if self.stack:
            self.stack[-1][1].append(text)

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1][0] == "style":
            return
        self.out.texts.append(data)
        if self.stack:
            self.stack[-1][1].append(data)


def parse(markup: str) -> Parsed:
    parser = _Parser()
    parser.feed(markup)
    parser.close()
    parser.out.unbalanced += [tag for tag, _ in parser.stack]
    return parser.out
