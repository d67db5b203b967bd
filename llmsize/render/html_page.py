"""One self-contained HTML page: headings, tables, inline SVG charts and notes, its style inline, no scripts and
nothing fetched, so it can be mailed around and opened offline. Every text is escaped."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #111; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; }
th { background: #f0f0f0; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
p.note, li { font-size: 0.92em; color: #333; } footer { margin-top: 2em; font-size: 0.8em; color: #666; }
pre { font-size: 0.85em; background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
svg.chart { display: block; margin: 0.8em 0; background: #fff; }
"""


@dataclass
class Section:
    title: str
    tables: list[tuple[list[str], list[list[object]]]] = field(default_factory=list)  # (headers, rows)
    charts: list[str] = field(default_factory=list)  # <svg> elements
    notes: list[str] = field(default_factory=list)
    pre: list[str] = field(default_factory=list)  # preformatted text, as a terminal shows it


def _cell(v: object) -> str:
    if v is None:
        return "<td></td>"
    if isinstance(v, bool):
        return f"<td>{'yes' if v else 'no'}</td>"
    if isinstance(v, int):
        return f'<td class="num">{v:,}</td>'
    if isinstance(v, float):
        return f'<td class="num">{v:,.4g}</td>' if abs(v) < 1000 else f'<td class="num">{v:,.0f}</td>'
    return f"<td>{escape(str(v))}</td>"


def table_html(headers: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(_cell(v) for v in r) + "</tr>" for r in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def page(title: str, sections: list[Section], footer: str) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>", f"<h1>{escape(title)}</h1>"]
    for s in sections:
        parts.append(f"<section><h2>{escape(s.title)}</h2>")
        parts.extend(f"<pre>{escape(t)}</pre>" for t in s.pre)
        parts.extend(table_html(h, r) for h, r in s.tables)
        parts.extend(s.charts)
        if s.notes:
            parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in s.notes) + "</ul>")
        parts.append("</section>")
    parts.append(f"<footer>{escape(footer)}</footer></body></html>")
    return "\n".join(parts) + "\n"
