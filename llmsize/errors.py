"""One family of expected errors. The CLI prints them in one line on stderr and exits with 2: every expected
failure (a bad value, an unknown name, an unreadable file, a missing extra or GPU, not enough memory) is the
user's to fix, so it gets the usage status; 1 is left for the unexpected."""

import re
from enum import IntEnum


def printable(text: str) -> str:
    """Control characters (newlines, escapes, NUL) and lone surrogates as backslash escapes: what a message
    or a report shows of a user's value stays on its line and encodes as UTF-8."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


PATH_CHARS = 240  # characters of a path an error quotes whole: any real folder's depth; past it, cut
LONGEST_WORD = 300  # characters of one run without a space an error line prints whole (a deep path fits)


def bounded(text: str) -> str:
    """A message with every run of characters without a space past LONGEST_WORD cut, saying how long it was: the
    last guard against an error line that repeats a value of thousands of characters (those the message quotes
    with `shown` are cut already)."""
    return re.sub(r"\S{%d,}" % (LONGEST_WORD + 1),
                  lambda m: f"{m.group()[:PATH_CHARS]}... ({len(m.group()):,} characters)", text)


def shown_path(path) -> str:
    """A path as an error message quotes it: whole up to PATH_CHARS, cut past it (a name of thousands of
    characters, which the system refuses, is not echoed whole)."""
    return shown(path, PATH_CHARS)


def shown(value: object, limit: int = 80) -> str:
    """A value as an error message quotes it: printable, and cut to `limit` characters, so a hostile input
    cannot make the one-line error a megabyte long or several lines."""
    text = str(value)
    cut = text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"
    return printable(cut)


def close_names(typed: str, names, n: int = 1) -> list[str]:
    """Up to `n` of `names` near what was typed (difflib, ratio 0.6), else the one name it is the start of ("agg"
    for aggregated); [] where none is."""
    import difflib

    v = typed.strip().lower()[:200]
    close = difflib.get_close_matches(v, list(names), n=n, cutoff=0.6)
    if not close and v:
        starts = [x for x in names if str(x).startswith(v)]
        close = starts if len(starts) == 1 else []
    return close


def not_one_of(value: str, values, synonyms: dict[str, str] | None = None) -> str:
    """Why `value` is refused, with a did-you-mean from its spelling or from `synonyms` (other names users give
    the same thing); the one message of every closed set."""
    v = value.strip().lower()
    close = [synonyms[v]] if synonyms and v in synonyms else close_names(v, values)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return f"`{shown(value)}` is not one of {', '.join(values)}{hint}"


def install_hint(extra: str, packages: str) -> str:
    """How to install an extra: from the checkout the tool is installed from (it is not on PyPI), or its packages."""
    return f"Install the {extra} extra: pip install '.[{extra}]' in the llmsize checkout (or pip install {packages})."


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2


class LlmsizeError(Exception):
    """An expected failure: message says what happened, hint says what to do next (a class's default_hint when the
    raise gives none)."""

    exit_status = ExitStatus.USAGE
    default_hint: str | None = None

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint

    def one_line(self) -> str:
        text = f"{self.message} {self.hint}" if self.hint else self.message
        return bounded(printable(text))


class CatalogError(LlmsizeError):
    """A catalog file that does not parse or does not match its schema."""


class UnknownNameError(LlmsizeError):
    """An id that is neither in the catalog nor an alias."""


class MissingSpecError(LlmsizeError):
    """The catalog lacks a figure an estimate needs; we never invent it."""


class InvalidValueError(LlmsizeError):
    """An impossible input value (negative context, utilization above 1...)."""
