"""Text that goes into a Markdown table or title: a model or card name read from a user's config.json or catalog,
a reason. Kept on its line and inert: a `|` would end the cell, a newline the row, and `<script>` is HTML to a
Markdown renderer."""

from __future__ import annotations

import re

from llmsize.errors import printable


def md(text: object) -> str:
    """`text` as Markdown shows it literally: a tag's `<` and an entity's `&` as entities (`<= 2 s` stays), the pipe
    escaped, control characters as backslash escapes (one line)."""
    s = printable(" ".join(str(text).splitlines()))
    s = re.sub(r"&(?=#?\w+;)", "&amp;", s)
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", s).replace("|", "\\|")
