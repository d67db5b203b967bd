"""Charts in the terminal, no extra needed: series of (x, y) points on log or linear axes in a character
grid, each series drawn with its own marker, with labelled axes and a legend."""

from __future__ import annotations

import math
import textwrap

MARKERS = "o*x+#@%&123456789"  # distinct for up to 17 series (fleet charts at most 4 cards: 2 curves each, 2 more)


def ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        return [10.0 ** e for e in range(a, b + 1)]
    step = 10 ** math.floor(math.log10((hi - lo) or 1))
    n = math.floor(lo / step)
    out = []
    while n * step <= hi + 1e-9:
        out.append(n * step)
        n += 1
    return out if len(out) <= 8 else out[::math.ceil(len(out) / 8)]


def tick_label(v: float) -> str:
    if v == 0:
        return "0"
    e = math.floor(math.log10(abs(v)))
    if -3 <= e <= 5:
        return f"{v:,.{max(0, -e)}f}" if e < 0 else f"{v:,.0f}"
    return f"1e{e}" if abs(v / 10 ** e - 1) < 1e-9 else f"{v:.0e}"


def plot(series: list[tuple[str, list[tuple[float, float]], str]], title: str, xlabel: str, ylabel: str,
         logx: bool = True, logy: bool = True, width: int = 96, height: int = 22) -> str:
    """series: (name, points, style) with style 'line' (points joined) or 'points'."""
    pts = [(x, y) for _, ps, _ in series for x, y in ps if x > 0 and y > 0 or not (logx or logy)]
    if not pts:
        return f"{title}\n(no data)"
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if logx:
        x0, x1 = 10 ** math.floor(math.log10(x0)), 10 ** math.ceil(math.log10(x1))
    if logy:
        y0, y1 = 10 ** math.floor(math.log10(y0)), 10 ** math.ceil(math.log10(y1))
    if x1 == x0:
        x1 = x0 * 10 if logx else x0 + 1
    if y1 == y0:
        y1 = y0 * 10 if logy else y0 + 1
    ylabels = [tick_label(t) for t in ticks(y0, y1, logy)]
    margin = max(len(s) for s in ylabels) + 1
    cols, rows = width - margin - 2, height

    def fx(x):
        f = (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0)) if logx else (x - x0) / (x1 - x0)
        return min(cols - 1, max(0, round(f * (cols - 1))))

    def fy(y):
        f = (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)) if logy else (y - y0) / (y1 - y0)
        return min(rows - 1, max(0, round(f * (rows - 1))))

    grid = [[" "] * cols for _ in range(rows)]
    for i, (_, ps, style) in enumerate(series):
        m = MARKERS[i % len(MARKERS)]
        ps = [(x, y) for x, y in ps if (x > 0 or not logx) and (y > 0 or not logy)]
        if style == "line" and len(ps) > 1:  # sample the segment densely in screen space
            for (xa, ya), (xb, yb) in zip(ps, ps[1:]):
                for k in range(41):
                    t = k / 40
                    if logx:
                        x = 10 ** (math.log10(xa) + t * (math.log10(xb) - math.log10(xa)))
                    else:
                        x = xa + t * (xb - xa)
                    if logy:
                        y = 10 ** (math.log10(ya) + t * (math.log10(yb) - math.log10(ya)))
                    else:
                        y = ya + t * (yb - ya)
                    grid[rows - 1 - fy(y)][fx(x)] = "." if grid[rows - 1 - fy(y)][fx(x)] == " " else \
                        grid[rows - 1 - fy(y)][fx(x)]
        for x, y in ps:
            grid[rows - 1 - fy(y)][fx(x)] = m
    ytick_rows = {rows - 1 - fy(t): tick_label(t) for t in ticks(y0, y1, logy)}
    out = [title, ylabel]
    for r in range(rows):
        out.append(f"{ytick_rows.get(r, ''):>{margin}}|" + "".join(grid[r]))
    out.append(" " * margin + "+" + "-" * cols)
    axis = [" "] * cols
    for t in ticks(x0, x1, logx):
        label = tick_label(t)
        c = min(fx(t), cols - len(label))  # the last label ends at the right edge
        for j, ch in enumerate(label):
            axis[c + j] = ch
    out.append(" " * (margin + 1) + "".join(axis).rstrip())
    out.append(" " * (margin + 1) + xlabel)
    legend = "   ".join(f"{MARKERS[i % len(MARKERS)]} {name}" for i, (name, _, _) in enumerate(series))
    legend = "legend: " + legend + ("   (dots: lines)" if any(s[2] == "line" for s in series) else "")
    out += textwrap.wrap(legend, width, subsequent_indent="        ")
    return "\n".join(line.rstrip() for line in out)
