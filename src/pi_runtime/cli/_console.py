"""How the `pi` command line prints: outside text shown as it is, one message a line.

Text from outside — argv, files, models, tools, providers, the store — may hold Rich
markup (`[/]` crashes Rich, `[bold]` silently vanishes), emoji codes (`:x:`), newlines or
terminal control sequences. So every print goes through here, and nothing here parses
markup: a line is assembled from parts, plain text or `(text, style)`, each shown
literally, with control characters escaped so that a message stays on one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NoReturn, TypeAlias

import typer
from rich.console import Console
from rich.text import Text

Part: TypeAlias = object | tuple[object, str]
"""Text to print: a value shown as it is, or `(value, style)` with a Rich style."""

# C0 and C1 controls, DEL and the Unicode line/paragraph separators: each could end a
# line or drive the terminal. Bidirectional marks, embeddings, overrides and isolates:
# each could make text read in another order than it runs (`ls \u202e; rm -rf ~`).
# Each is shown as its Python escape.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")
_CONTROL_BUT_LF = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")

MAX_SHOWN_ARGUMENTS = 20
"""Arguments an approval line shows by name; it says how many more there are."""
MAX_SHOWN_VALUE_CHARS = 120
"""Characters an approval line shows of one argument's value; it says how many it has."""


def _shown(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def plain(value: object, *, lines: bool = False) -> str:
    """`value` as one line of text: lone surrogates as U+FFFD, control characters
    (newlines and tabs included) as escapes such as `\\n` and `\\x1b`. With `lines`,
    line feeds stay (for prose such as a model's commentary)."""
    from ..messages import repair_text  # here: `pi --help` needs no message model

    pattern = _CONTROL_BUT_LF if lines else _CONTROL
    return pattern.sub(_shown, repair_text(str(value)))


def shown_arguments(arguments: Mapping[str, Any]) -> str:
    """A call's arguments for a person to approve: every name up to
    `MAX_SHOWN_ARGUMENTS`, each value as JSON cut to `MAX_SHOWN_VALUE_CHARS`. Whatever is
    cut says so, so nothing can hide behind a padded field."""
    import json

    from ..messages import clipped

    parts = []
    for name, value in list(arguments.items())[:MAX_SHOWN_ARGUMENTS]:
        text = json.dumps(value, ensure_ascii=False)
        if len(text) > MAX_SHOWN_VALUE_CHARS:
            text = f"{clipped(text, MAX_SHOWN_VALUE_CHARS)} ({len(text)} characters)"
        parts.append(f"{name}={text}")
    more = len(arguments) - MAX_SHOWN_ARGUMENTS
    if more > 0:
        parts.append(f"… and {more} more arguments (all of them: --json)")
    return ", ".join(parts)


def literal(value: object, style: str = "") -> Text:
    """Outside text as a Rich `Text` (never parsed as markup), e.g. for a table cell."""
    return Text(plain(value), style=style)


def console(*, stderr: bool = False) -> Console:
    """A console that neither highlights nor expands emoji codes and, when it does not
    write to a terminal, never wraps a line (Rich would break it at 80 columns)."""
    made = Console(stderr=stderr, highlight=False, emoji=False)
    made.soft_wrap = not made.is_terminal
    return made


def err_console() -> Console:
    """`console()` on stderr: progress, notes and errors."""
    return console(stderr=True)


def line(*parts: Part, lines: bool = False) -> Text:
    """One line of literal text from parts: `value` or `(value, style)` (see `plain`)."""
    return Text.assemble(
        *(
            (plain(p[0], lines=lines), p[1]) if isinstance(p, tuple) else plain(p, lines=lines)
            for p in parts
        )
    )


def say(target: Console, *parts: Part, lines: bool = False) -> None:
    """Print the line assembled from `parts` (see `line`) on `target`."""
    target.print(line(*parts, lines=lines))


def fail(message: object, code: int = 2) -> NoReturn:
    """Print `error: MESSAGE` on one line of stderr, then exit with `code` (2: bad usage)."""
    say(err_console(), ("error:", "red"), " ", message)
    raise typer.Exit(code)
