"""The command line: the app and its commands in help order (each in llmsize/commands/), and main(), which turns
every expected failure into one line and an exit code. No arithmetic here; torch is never imported."""

from __future__ import annotations

import functools
import os
import re
import sys
from contextlib import contextmanager
from typing import Annotated

import typer

from llmsize import __version__
from llmsize.commands import charts, compare, fit, fleet, import_entry, listing, measure, plan
from llmsize.errors import ExitStatus, LlmsizeError, bounded, printable, shown

# typer vendors click in recent releases and re-exports only some of its exceptions: find the two
# base classes through BadParameter so this works with either layout.
_UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

_APP_SETTINGS = dict(
    name="llmsize",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
_ROOT: list = []


# (name as typed, or None for the function's own; the function) of every command, in help order
COMMANDS: tuple[tuple[str | None, object], ...] = (
    (None, plan.plan), ("import", import_entry.import_), (None, compare.compare), (None, charts.roofline),
    (None, charts.kv), (None, listing.gpus), ("fit", fit.fit_cmd), (None, fleet.fleet), (None, listing.hosts),
    (None, listing.models), (None, listing.show), (None, listing.formats), (None, measure.measure))


def build_app(only: str | None = None) -> typer.Typer:
    """The app with every command, or only the one being run (typer converts every registered command's options at
    start-up, which a one-command run need not pay for)."""
    app = typer.Typer(**_APP_SETTINGS)
    app.callback()(_ROOT[0])
    for (name, fn), cmd in zip(COMMANDS, command_names()):
        if only is None or cmd == only:
            app.command(name)(fn)
    return app


def command_names() -> list[str]:
    """Each command's name as typed, in help order."""
    return [name or fn.__name__.rstrip("_") for name, fn in COMMANDS]


@functools.lru_cache(maxsize=None)
def click_command(only: str | None = None):
    """build_app's command as click runs it (what typer's app() builds on every call), built once per process:
    a process that runs several commands, or forks after building them, converts the options once."""
    return typer.main.get_command(build_app(only))


def _version(value: bool):
    if value:
        typer.echo(f"llmsize {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
):
    """Size LLM inference: weights, KV cache, context, concurrency, decode ceiling, prefill, and why;
    then measure it on the card.

    Examples:

    \b
      llmsize plan gemma-4-12b --gpu rtx5060ti
      llmsize gpus --vendor nvidia --sort bandwidth
      llmsize models --mixer mla
      llmsize compare gemma-4-12b --vendor nvidia
      llmsize plan ./my-model-folder --gpu h200
      llmsize measure
      llmsize show h200
    """


_ROOT.append(_root)


@contextmanager
def _errors():
    try:
        yield
    except LlmsizeError as e:
        sys.stderr.write(f"Error: {e.one_line()}\n")
        sys.exit(int(e.exit_status))


def _given_value(err, argv: list[str] | None) -> str:
    """The value the user typed for the option a usage error is about, so the message can name it."""
    args = sys.argv[1:] if argv is None else argv
    opts = getattr(getattr(err, "param", None), "opts", None) or []
    for i in range(len(args) - 1, -1, -1):  # the last occurrence: the one a repeated option keeps
        tok = args[i]
        for opt in opts:
            if tok == opt and i + 1 < len(args):
                return f" (got `{shown(args[i + 1])}`)"
            if tok.startswith(opt + "="):
                return f" (got `{shown(tok.split('=', 1)[1])}`)"
    return ""


def _conflicting_repeat(command, args: list[str]) -> str | None:
    """A single-valued option given twice with different values (`--gpu h100 --gpu h200`, `-g h100 -gh200`), or
    both sides of a flag pair (`--one-per-model --all-formats`): the parser keeps the last silently, so the run
    would answer a question the user did not ask. The message, or None (an option's value missing at the end of
    the line is left for the parser to name)."""
    sub = getattr(command, "commands", {}).get(args[0]) if args else None
    if sub is None:
        return None
    tokens = args[1:args.index("--")] if "--" in args else args[1:]
    for param in sub.params:
        if getattr(param, "param_type_name", "") != "option" or param.multiple or getattr(param, "count", False):
            continue
        given = []  # (name as typed, value) in order
        for i, tok in enumerate(tokens):
            for name in param.opts + param.secondary_opts:
                if tok == name:
                    if param.is_flag:
                        given.append((name, name in param.opts))
                    elif i + 1 < len(tokens):
                        given.append((name, tokens[i + 1]))
                elif name.startswith("--") and tok.startswith(name + "="):
                    given.append((name, tok.split("=", 1)[1]))
                elif not name.startswith("--") and len(name) == 2 and tok.startswith(name) and len(tok) > 2 \
                        and not param.is_flag:  # -gh200
                    given.append((name, tok[2:]))
        if len({v for _, v in given}) > 1:
            names = sorted({n for n, _ in given}, key=[n for n, _ in given].index)
            if param.is_flag:
                return f"{' and '.join(names)} contradict each other. Give one of them."
            name = max(param.opts, key=len)
            values = ", then ".join(f"`{shown(v)}`" for _, v in given)
            times = "twice" if len(given) == 2 else f"{len(given)} times"
            listed = ", as one comma list" if "comma-separated" in (param.help or "").lower() else ""
            return f"{name} is given {times} ({values}): {sub.name} takes one. Give {name} once{listed}."
    return None


def _drop_stdout() -> None:
    """Point the standard output at /dev/null, so the interpreter's flush at exit does not fail a second time."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _suffixed_count_hint(msg: str) -> str:
    """Where an integer option got a count with a k or M suffix (`--context 128k`): the whole numbers it may
    mean, since k is 1,000 in some places and 1,024 in a model's "128K context"."""
    got = re.search(r"valid integer.*\(got `(\d+(?:\.\d+)?)([kKmM])`\)", msg)
    if not got:
        return ""
    n, unit = float(got.group(1)), got.group(2).lower()
    binary, decimal = n * (1024 if unit == "k" else 1024**2), n * (1000 if unit == "k" else 1000**2)
    if binary != int(binary):
        return f" Give a whole number, e.g. {int(decimal)}."
    return f" Give a whole number: {int(binary)} ({got.group(1)} x {binary / n:,.0f}) or {int(decimal)}."


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every expected failure becomes one line on stderr and a non-zero exit."""
    os.environ.setdefault("TYPER_STANDARD_TRACEBACK", "1")
    if sys.stdout is None:  # started with its standard output closed (`llmsize gpus >&-`): nowhere to print
        if sys.stderr is not None:
            sys.stderr.write("Error: the standard output is closed. Run llmsize with its output going to a "
                             "terminal, a file or a pipe.\n")
        sys.exit(int(ExitStatus.USAGE))
    for stream in (sys.stdout, sys.stderr):  # a name from a file (a lone surrogate) prints escaped, never raises
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    with _errors():
        args = sys.argv[1:] if argv is None else list(argv)
        first = args[0] if args else None
        try:
            command = click_command(first if first in command_names() else None)
            repeated = _conflicting_repeat(command, args)
            if repeated:
                sys.stderr.write(f"Error: {bounded(printable(repeated))}\n")
                sys.exit(int(ExitStatus.USAGE))
            rv = command(args=args, prog_name="llmsize", standalone_mode=False)
            sys.stdout.flush()  # a full disk or a closed pipe shows here, not at the interpreter's exit
        except BrokenPipeError:  # the reader went away (`| head`): nothing left to say
            _drop_stdout()
            sys.exit(int(ExitStatus.ERROR))
        except OSError as e:
            if e.filename is not None:
                raise
            _drop_stdout()  # the standard output failed (a full disk, /dev/full): one line, not a traceback
            sys.stderr.write(f"Error: could not write the output: {e.strerror or e}. Free the space, or write "
                             "to a file elsewhere (-o FILE where the command has it).\n")
            sys.exit(int(ExitStatus.USAGE))
        except (typer.Abort, KeyboardInterrupt):
            sys.stderr.write("Aborted.\n")
            sys.exit(int(ExitStatus.ERROR))
        except _UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError" and e.ctx is not None:  # a bare `llmsize`: its help
                sys.stdout.write(e.ctx.get_help() + "\n")
                sys.exit(0)
            where = e.ctx.command_path if e.ctx else "llmsize"
            if where == "llmsize" and first in command_names():  # refused before the command's own context
                where = f"llmsize {first}"
            msg = bounded(printable(e.format_message().replace("\n", " "))).rstrip(".")
            given = _given_value(e, argv)
            if given and given[len(" (got "):-1] not in msg:
                msg += given
            end = "" if msg.endswith(("?", "!")) else "."
            sys.stderr.write(f"Error: {msg}{end}{_suffixed_count_hint(msg)} Run `{where} --help` for usage.\n")
            sys.exit(int(ExitStatus.USAGE))
        except _ClickException as e:
            sys.stderr.write(f"Error: {bounded(printable(e.format_message()))}\n")
            sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
