"""Plain-text report building blocks for `llmsize plan`: titled key/value blocks, column tables with a rule
under the header, hanging-indent bullets. No rich: the plan is the command people run most, and importing
and laying out rich tables costs it ~25 ms of a ~170 ms cold start (benchmarks/RESULTS.md). ANSI styles
only on a terminal, and never with NO_COLOR set."""

from __future__ import annotations

import os
import sys
import textwrap

CODES = {"bold": "1", "dim": "2", "cyan": "36", "yellow": "33"}
KEY_WIDTH = 30


def color_enabled(stream=None) -> bool:
    stream = stream or sys.stdout
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


class Report:
    """Lines of a report, at most `width` columns."""

    def __init__(self, width: int = 100, color: bool = False):
        self.width, self.color, self.lines = width, color, []

    def style(self, text: str, *styles: str) -> str:
        if not self.color or not styles or not text:
            return text
        return "\033[" + ";".join(CODES[s] for s in styles) + "m" + text + "\033[0m"

    def line(self, text: str = "", *styles: str) -> None:
        """One line, wrapped with a hanging indent when longer than the width."""
        lead = text[:len(text) - len(text.lstrip())]
        parts = textwrap.wrap(text, self.width, initial_indent="", subsequent_indent=lead + "  ") \
            if len(text) > self.width else [text]
        for part in parts or [""]:
            self.lines.append(self.style(part, *styles))

    def title(self, text: str) -> None:
        self.line(text, "bold")

    def kv(self, title: str, rows: list[tuple[str, str]]) -> None:
        """A titled block of key / value rows; long values wrap under the value column."""
        self.title(title)
        self.lines.append("")
        key_width = max([KEY_WIDTH] + [len(k) for k, _ in rows])
        col = 1 + key_width + 3
        avail = max(20, min(66, self.width - col))
        for key, value in rows:
            parts = textwrap.wrap(value, avail) or [""]
            self.lines.append(" " + self.style(key.ljust(key_width), "cyan") + "   " + parts[0])
            self.lines += [" " * col + p for p in parts[1:]]
        self.lines.append("")

    def table(self, title: str, headers: list[str], rows: list[tuple[list[str], tuple[str, ...]]],
              min_width: int = 80, note: str | None = None) -> None:
        """Columns: the first left-aligned, the others right-aligned; `rows` are (cells, styles); `note` is a
        dim line under the title."""
        self.title(title)
        if note:
            self.line(note, "dim")
        self.lines.append("")
        widths = [max([len(h)] + [len(cells[i]) for cells, _ in rows]) for i, h in enumerate(headers)]
        inner = sum(widths) + 3 * (len(widths) - 1)
        widths[0] += max(0, min(min_width, self.width - 2) - inner)

        def fmt(cells: list[str]) -> str:
            out = [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
            return " " + "   ".join(out)

        self.lines.append(self.style(fmt(headers), "bold"))
        self.lines.append(" " + "─" * (sum(widths) + 3 * (len(widths) - 1)))
        for cells, styles in rows:
            text = fmt(cells)
            self.lines.append(self.style(text, *styles) if styles else
                              " " + self.style(cells[0].ljust(widths[0]), "cyan") + text[1 + widths[0]:])
        self.lines.append("")

    def bullets(self, items: list[str], mark: str = "-", *styles: str) -> None:
        for item in items:
            parts = textwrap.wrap(item, self.width - 4) or [""]
            self.lines.append(f"{mark:>3} " + self.style(parts[0], *styles))
            self.lines += ["    " + self.style(p, *styles) for p in parts[1:]]

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines) + "\n"
