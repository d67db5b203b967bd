"""Column tables whose cells never fold: a number split over two lines ("32,00" over "0.0") reads as another number,
and a card id cut short ("h100-sx") names no card. Each column is as wide as its widest cell; a header wider than
that breaks between its words where the width allows, inside a word where it does not; a table whose cells alone
need more than the width is printed wider (the terminal wraps or scrolls whole lines). Plain text, no arithmetic;
print_table puts one on a rich console."""

from __future__ import annotations

import re

GAP = "  "


def widths(headers: list[str], rows: list[list[str]], width: int) -> list[int]:
    """Each column's widest cell; then, as far as `width` allows, the header rows fewer (every header that folds into
    the most lines widened by the least that folds it into fewer, while all of them can be), each header's longest
    word, then its whole header, the columns that need the least more served first; where the cells alone need more
    than `width`, every header's longest word (the table is wider than `width` anyway: a header cut into letters
    gains nothing)."""
    w = [max([len(r[i]) for r in rows] + [1]) for i in range(len(headers))]
    left = width - 1 - len(GAP) * (len(headers) - 1) - sum(w)
    longest = [max([len(x) for x in h.split()] + [1]) for h in headers]
    if left < 0:  # printed wider than `width` whatever the headers do: no word of one is broken
        return [max(wi, lo) for wi, lo in zip(w, longest)]
    while left > 0:  # first the table's depth: the headers that fold into the most lines ("c" "a" "r" "d" "s")
        depth = [len(wrap_header(h, wi)) for h, wi in zip(headers, w)]
        deepest = [i for i, d in enumerate(depth) if d == max(depth) > 1]
        more = [next((m for m in range(1, left + 1) if len(wrap_header(headers[i], w[i] + m)) < depth[i]), left + 1)
                for i in deepest]
        if not deepest or sum(more) > left:  # one line already, or a header that cannot fold less in the width
            break
        for i, m in zip(deepest, more):
            w[i] += m
        left -= sum(more)
    for want in (longest, [len(h) for h in headers]):  # the longest word first, then the whole header on a line
        for i in sorted(range(len(headers)), key=lambda i: want[i] - w[i]):
            more = want[i] - w[i]
            if 0 < more <= left:
                w[i] += more
                left -= more
    return w


def wrap_header(text: str, width: int) -> list[str]:
    """A header in lines of at most `width`: broken between words, then after a slash ("tok/s/" "user"), then
    inside a word where nothing else fits."""
    lines, cur = [], ""
    for word in text.split():
        for j, piece in enumerate(re.findall(r"[^/]*/|[^/]+", word)):
            glue = " " if (j == 0 and cur) else ""
            if len(cur) + len(glue) + len(piece) <= width:
                cur += glue + piece
                continue
            if cur:
                lines.append(cur)
            cur = piece
            while len(cur) > width:
                lines.append(cur[:width])
                cur = cur[width:]
    return lines + [cur] if cur or not lines else lines


def table_lines(headers: list[str], rows: list[list[str]], width: int, left: tuple[int, ...] = (0,)) -> list[str]:
    """The header (its lines bottom-aligned), a rule, the rows; the columns `left` (their indices) to the left, the
    others to the right."""
    w = widths(headers, rows, width)
    heads = [wrap_header(h, wi) for h, wi in zip(headers, w)]
    depth = max(len(h) for h in heads)
    heads = [[""] * (depth - len(h)) + h for h in heads]

    def line(cells: list[str]) -> str:
        return " " + GAP.join(c.ljust(wi) if i in left else c.rjust(wi)
                              for i, (c, wi) in enumerate(zip(cells, w)))

    out = [line([h[k] for h in heads]) for k in range(depth)]
    out.append(" " + "─" * (sum(w) + len(GAP) * (len(w) - 1)))
    out += [line(r) for r in rows]
    return [x.rstrip() for x in out]


def print_table(console, title: str, headers: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> None:
    """A titled table on a rich console: the title bold, the lines as table_lines makes them (never cropped)."""
    console.print(title, style="bold", markup=False, highlight=False)
    console.print()
    if rows:
        for line in table_lines(headers, rows, console.width, left):
            console.print(line, markup=False, highlight=False, crop=False, soft_wrap=True)
    console.print()


def print_rich(console, renderable) -> None:
    """A rich renderable (a ledger's table) on `console`, its lines without the padding rich adds to the width."""
    with console.capture() as cap:
        console.print(renderable)
    console.file.write("\n".join(line.rstrip() for line in cap.get().split("\n")))
