"""Charts as inline SVG text, no extra needed: the series the terminal charts take (render/ascii_chart.py), drawn
on log or linear axes with ticks, labelled axes (units in the labels), a legend, and dashed marker lines (a target).
Text stays text, so a page that holds the chart can be searched and read by a screen reader."""

from __future__ import annotations

import math
from html import escape

from llmsize.render.ascii_chart import tick_label, ticks

W, H = 760, 440
LEFT, RIGHT, TOP, BOTTOM = 78, 190, 38, 58
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
          "#bcbd22")


def _bounds(vals: list[float], log: bool) -> tuple[float, float]:
    lo, hi = min(vals), max(vals)
    if log:
        lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
        return (lo, hi * 10) if hi == lo else (lo, hi)
    return (lo, lo + 1) if hi == lo else (lo, hi)


def svg_plot(series: list[tuple[str, list[tuple[float, float]], str]], title: str, xlabel: str, ylabel: str,
             logx: bool = True, logy: bool = True, vlines: list[tuple[str, float]] = (), color_group: int = 1) -> str:
    """series: (name, points, style) with style 'line' (points joined) or 'points'; vlines: (label, x) drawn
    dashed across the plot; color_group: that many consecutive series share a colour (a card's roof and the
    model's points on it). Returns one <svg> element."""
    ok = (lambda x, y: x > 0 and y > 0) if (logx or logy) else (lambda x, y: True)
    series = [(n, [(x, y) for x, y in ps if ok(x, y)], s) for n, ps, s in series]
    pts = [p for _, ps, _ in series for p in ps]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {W} {H}" width="{W}" '
           f'height="{H}" role="img" aria-label="{escape(title)}">',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{escape(title)}</text>']
    if not pts:
        out.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle">no data</text></svg>')
        return "\n".join(out)
    x0, x1 = _bounds([p[0] for p in pts] + [x for _, x in vlines if not logx or x > 0], logx)
    y0, y1 = _bounds([p[1] for p in pts], logy)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def fx(x: float) -> float:
        f = (math.log10(x / x0) / math.log10(x1 / x0)) if logx else (x - x0) / (x1 - x0)
        return LEFT + f * pw

    def fy(y: float) -> float:
        f = (math.log10(y / y0) / math.log10(y1 / y0)) if logy else (y - y0) / (y1 - y0)
        return TOP + ph - f * ph

    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    def grid(x1_, y1_, x2_, y2_, tx, ty, anchor, t) -> str:  # one grid line and its tick label
        return (f'<line x1="{x1_:.1f}" y1="{y1_:.1f}" x2="{x2_:.1f}" y2="{y2_:.1f}" stroke="#ddd"/>'
                f'<text x="{tx:.1f}" y="{ty:.1f}" text-anchor="{anchor}" font-size="11">{escape(tick_label(t))}</text>')

    out += [grid(fx(t), TOP, fx(t), TOP + ph, fx(t), TOP + ph + 16, "middle", t)
            for t in ticks(x0, x1, logx) if x0 <= t <= x1]
    out += [grid(LEFT, fy(t), LEFT + pw, fy(t), LEFT - 6, fy(t) + 4, "end", t)
            for t in ticks(y0, y1, logy) if y0 <= t <= y1]
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 16}" text-anchor="middle" font-size="12">{escape(xlabel)}</text>')
    out.append(f'<text x="18" y="{TOP + ph / 2}" text-anchor="middle" font-size="12" '
               f'transform="rotate(-90 18 {TOP + ph / 2})">{escape(ylabel)}</text>')
    legend_y = TOP + 8
    for i, (name, ps, style) in enumerate(series):
        c = COLORS[(i // color_group) % len(COLORS)]
        coords = [(fx(x), fy(y)) for x, y in sorted(ps)]
        if style == "line" and len(coords) > 1:
            d = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            out.append(f'<polyline class="series" data-name="{escape(name)}" points="{d}" fill="none" '
                       f'stroke="{c}" stroke-width="2"/>')
        if style == "points" or len(coords) <= 16:  # a long line's points would only blur it
            out.extend(f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"/>' for x, y in coords)
        swatch = (f'<rect x="{LEFT + pw + 14}" y="{legend_y - 9}" width="12" height="12" fill="{c}"/>'
                  if style == "line" else f'<circle cx="{LEFT + pw + 20}" cy="{legend_y - 3}" r="4" fill="{c}"/>')
        out.append(f'{swatch}<text x="{LEFT + pw + 32}" y="{legend_y + 1}" font-size="11">{escape(name)}</text>')
        legend_y += 18
    for label, x in vlines:
        if x0 <= x <= x1:
            out.append(f'<line class="target" x1="{fx(x):.1f}" y1="{TOP}" x2="{fx(x):.1f}" y2="{TOP + ph}" '
                       f'stroke="#000" stroke-dasharray="6 4"/>'
                       f'<text x="{fx(x) + 4:.1f}" y="{TOP + 14}" font-size="11">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)
