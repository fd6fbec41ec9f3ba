"""Reads the /status page with the stdlib HTML parser: sections, table rows and their cells."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Row:
    section: str
    attrs: dict[str, str]
    cells: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # each cell's data-label ("" when none)

    def cell(self, label: str) -> str:
        return self.cells[self.labels.index(label)]


@dataclass
class StatusPage:
    sections: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    text_by_section: dict[str, str] = field(default_factory=dict)
    bars: list[dict[str, str]] = field(default_factory=list)  # the usage chart's <rect>s
    scripts: int = 0

    def rows_in(self, section: str, tr_class: str) -> list[Row]:
        return [
            r
            for r in self.rows
            if r.section == section and tr_class in r.attrs.get("class", "").split()
        ]


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = StatusPage()
        self._section = ""
        self._row: Row | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "section" and "id" in values:
            self._section = values["id"]
            self.page.sections.append(self._section)
        elif tag == "tr":
            self._row = Row(self._section, values)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            self._row.labels.append(values.get("data-label", ""))
        elif tag == "rect":
            self.page.bars.append(values)
        elif tag == "script":
            self.page.scripts += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.cells.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.page.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._section:
            text = self.page.text_by_section.get(self._section, "")
            self.page.text_by_section[self._section] = text + data


def parse_status(html: str) -> StatusPage:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.page
