"""`pi qrp encode` / `pi qrp decode`: JSON to QRP1 and back, on stdin and stdout."""

from __future__ import annotations

import json
import sys
from enum import Enum
from typing import Annotated, NoReturn

import typer

from ._console import fail

# The QRP1 kinds, spelled here so `pi --help` need not import the codec
# (tests/test_cli_startup.py checks they match `qrp1.KINDS`).
KINDS = ("record", "table", "series", "text", "receipt")

KindOption = Enum("KindOption", {kind: kind for kind in KINDS}, type=str)  # type: ignore[misc]

qrp_app = typer.Typer(help="QRP1: compact results for the model to read.", no_args_is_help=True)


def _stdin_text() -> str:
    # Bytes, not text mode: text mode would turn "\r\n" into "\n" and change the data.
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"stdin is not UTF-8: {exc}")


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _write(text: str) -> None:
    sys.stdout.buffer.write(text.encode("utf-8") + b"\n")
    sys.stdout.buffer.flush()


def encode_command(
    kind: Annotated[
        KindOption | None,
        typer.Option("--kind", help="Shape; chosen from the value if unset."),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Where the data came from.")
    ] = None,
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="Snapshot or version it was read at.")
    ] = None,
    range_: Annotated[str | None, typer.Option("--range", help="What the result covers.")] = None,
    time_key: Annotated[
        str | None, typer.Option("--time-key", help="Series: the field holding the time.")
    ] = None,
    t0: Annotated[
        str | None, typer.Option("--t0", help="Series: time origin, spelled like the times.")
    ] = None,
    step_ms: Annotated[
        int | None, typer.Option("--step-ms", min=1, help="Series: the fixed step in ms.")
    ] = None,
) -> None:
    """Read JSON on stdin, write one QRP1 document on stdout. Exit 2 on bad input."""
    from ..qrp1 import QRPError, encode

    text = _stdin_text()
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError, NaN, or an integer past the digit limit
        fail(f"stdin is not valid JSON: {exc}")
    origin: str | int | None = t0
    if t0 is not None and t0.lstrip("-").isdigit():
        origin = int(t0)  # epoch milliseconds
    try:
        document = encode(
            value,
            kind=None if kind is None else kind.value,
            source=source,
            snapshot=snapshot,
            range=range_,
            time_key=time_key,
            t0=origin,
            step_ms=step_ms,
        )
    except QRPError as exc:
        fail(exc)
    _write(document)


def decode_command() -> None:
    """Read one QRP1 document on stdin, write its JSON value on stdout. Exit 2 on bad input."""
    from ..qrp1 import QRPError, decode
    from ..qrp1.escape import json_text

    try:
        value = decode(_stdin_text())
    except QRPError as exc:  # QRPDecodeError: names the line and column
        fail(f"not a valid QRP1 document: {exc}")
    try:
        text = json_text(value)
    except (ValueError, RecursionError) as exc:  # decode refuses these; never a traceback
        fail(f"the document's value cannot be written as JSON: {exc}")
    _write(text)


qrp_app.command("encode")(encode_command)
qrp_app.command("decode")(decode_command)
