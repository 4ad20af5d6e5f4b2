"""One self-contained HTML file: inline CSS, plotly.js inlined from the Python package (works
offline, no CDN), the figures as JSON in the page, tables as plain HTML.

A report is a list of `Section`s; `write_report(path, sections, title)` writes it. Every string
that comes from data (model names, run names, error messages) is HTML-escaped, and the figure JSON
is escaped so that no "</script>" can end its script element early.
"""

from __future__ import annotations

import functools
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenprobe.files import check_out_file
from tokenprobe.report.plot import Figure

Row = tuple[str, ...]


@dataclass(frozen=True)
class Table:
    caption: str
    header: Row
    rows: list[Row]
    text: bool = False  # words, not numbers: cells left-aligned


@dataclass(frozen=True)
class Section:
    """A heading with notes (plain text), tables and figures (id -> plotly figure dict)."""

    title: str
    tables: list[Table] = field(default_factory=list)
    figures: dict[str, Figure] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    css_class: str = ""


@functools.cache
def plotly_js() -> str:
    """plotly.min.js as shipped inside the `plotly` Python package (about 4.8 MB)."""
    from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]

    js: str = get_plotlyjs()
    return js


CSS = """
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 1em 2em;
       color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.6em 1.5em 0.6em 0; font-size: 0.9em;
        display: inline-table; vertical-align: top; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; }
td:not(:first-child), th:not(:first-child) { text-align: right; }
th { background: #f4f4f4; }
.figs { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 12px; }
.fig { min-height: 380px; border: 1px solid #eee; }
.fig.wide { grid-column: 1 / -1; }
table.text td, table.text th { text-align: left; }
.note { color: #555; font-size: 0.9em; }
.bad { color: #b00; font-weight: 600; }
section.headline { background: #f8f9fb; border: 1px solid #dde3ea; border-radius: 6px;
                   padding: 0.2em 1em 0.6em; }
section.headline h2 { margin-top: 0.6em; }
section.headline td:first-child { color: #555; }
section.headline td:not(:first-child) { font-weight: 600; }
"""

WIDE = {"timeline", "compare", "roofline"}

BOOT = """
const figures = JSON.parse(document.getElementById('figures').textContent);
for (const [id, fig] of Object.entries(figures)) {
  Plotly.newPlot('fig-' + id, fig.data, fig.layout, {responsive: true, displaylogo: false});
}
"""


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _table(t: Table) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in t.header) if any(t.header) else ""
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in t.rows)
    head_row = f"<tr>{head}</tr>" if head else ""
    cls = ' class="text"' if t.text else ""
    return f"<table{cls}><caption>{_esc(t.caption)}</caption>{head_row}{body}</table>"


def _section(s: Section) -> str:
    cls = f' class="{_esc(s.css_class)}"' if s.css_class else ""
    parts = [f"<section{cls}><h2>{_esc(s.title)}</h2>"]
    parts += [f'<p class="note">{_esc(n)}</p>' for n in s.notes]
    parts += [_table(t) for t in s.tables]
    if s.figures:
        divs = "".join(
            f'<div class="fig{" wide" if fid in WIDE else ""}" id="fig-{_esc(fid)}"></div>'
            for fid in s.figures
        )
        parts.append(f'<div class="figs">{divs}</div>')
    parts.append("</section>")
    return "".join(parts)


def figures_json(figures: dict[str, Figure]) -> str:
    """JSON of the figures, safe inside a <script> element."""
    text = json.dumps(figures, separators=(",", ":"), allow_nan=False)
    # JSON's \u escapes keep the text valid JSON and free of any "<" the HTML parser could see
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(title: str, sections: list[Section], subtitle: str = "") -> str:
    """The whole page as one string."""
    figures: dict[str, Any] = {}
    for s in sections:
        clash = set(figures) & set(s.figures)
        if clash:
            raise ValueError(f"figure ids used twice: {sorted(clash)}")
        figures.update(s.figures)
    return "".join(
        [
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
            f"<title>{_esc(title)}</title><style>{CSS}</style>",
            f"<script>{plotly_js()}</script></head><body>",
            f"<h1>{_esc(title)}</h1>",
            f'<p class="note">{_esc(subtitle)}</p>' if subtitle else "",
            *(_section(s) for s in sections),
            f'<script type="application/json" id="figures">{figures_json(figures)}</script>',
            f"<script>{BOOT}</script></body></html>",
        ]
    )


def write_report(out: str | Path, sections: list[Section], title: str, subtitle: str = "") -> Path:
    """Write the report to `out` (parents created) and return its path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    check_out_file(path)  # a folder or FIFO at `out` is refused, never blocked on
    path.write_text(render_html(title, sections, subtitle), encoding="utf-8")
    return path
