"""`pi session show|cancel`: look into a persistent session, or stop its waiting."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from ..exceptions import UserError
from ._console import console, err_console, fail, literal, say, shown_arguments
from ._stdout import json_stdout

if TYPE_CHECKING:
    from ..durable import Store

T = TypeVar("T")

DEFAULT_DB = "sqlite:///.pi/pi.db"
DB_ENV = "PI_DB"

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=f"Store URL: sqlite:///PATH or postgresql://… (default ${DB_ENV}, {DEFAULT_DB}).",
    ),
]

session_app = typer.Typer(
    help="Persistent sessions: show one, or cancel what it waits for.", no_args_is_help=True
)


def db_url(given: str | None) -> str:
    """The store URL: `--db`, else `$PI_DB`, else a SQLite file under `.pi/`."""
    return given or os.environ.get(DB_ENV) or DEFAULT_DB


def open_db(given: str | None) -> Store:
    """The store, or exit 2 saying why it cannot be opened."""
    # Imported here, as in the commands below, so `pi --help` does not load SQLAlchemy.
    from ..durable import open_store

    try:
        return open_store(db_url(given))
    except UserError as exc:
        fail(exc)


def in_store(given: str | None, op: Callable[[Store], T]) -> T:
    """`op` on the store, closed after; a session not there exits 2, a store failing 1."""
    from ..durable import NotFound, StoreError

    store = open_db(given)
    try:
        return op(store)
    except NotFound as exc:
        fail(exc)
    except StoreError as exc:
        fail(exc, 1)
    finally:
        store.close()


@session_app.command("show")
def show(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show a session: its status, messages (tool results with their call id), the calls
    waiting for approval, and its runs."""
    from rich.table import Table

    from ..durable.views import session_view

    with json_stdout(as_json) as emit:
        view = in_store(db, lambda store: session_view(store, session_id))
        if as_json:
            emit(json.dumps(view, ensure_ascii=False))
            return
    out = console()
    say(out, "session ", (session_id, "bold"), ": ", view["status"])
    for m in view["messages"]:
        say(out, f"  {m['seq']:>3} ", _line(m))
    for p in view["pending_approvals"]:
        args = shown_arguments(p["arguments"])
        say(
            out,
            ("  awaiting approval: ", "yellow"),
            (p["call_id"], "bold"),
            f" {p['tool']}({args}) fingerprint {p['fingerprint']}",
        )
    table = Table("run", "kind", "status", "stop reason", "attempts")
    for run in view["runs"]:
        table.add_row(
            *(literal(run[k] or "") for k in ("run_id", "kind", "status", "stop_reason")),
            str(run["attempts"]),
        )
    out.print(table, soft_wrap=False)


def _line(message: dict[str, object]) -> str:
    role = message["role"]
    if role == "tool":
        mark = "✗" if message.get("is_error") else "→"
        text = " ⏎ ".join(str(message.get("content", "")).splitlines())
        return f"tool {mark} {message['tool_call_id']}: {text[:120]}"
    if role == "assistant":
        parts = []
        for block in message.get("content") or []:  # type: ignore[attr-defined]
            if block.get("kind") == "text":
                parts.append(block["text"][:100])
            elif block.get("kind") == "tool_call":
                parts.append(f"{block['name']}({block['raw'][:60]}) [{block['id']}]")
        return "assistant: " + " · ".join(parts)
    return f"{role}: {str(message.get('content', ''))[:100]}"


@session_app.command("cancel")
def cancel(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Stop waiting: awaited calls get a `cancelled` result; nothing is delivered after."""
    from ..durable.views import cancel_view

    with json_stdout(as_json) as emit:
        done = in_store(db, lambda store: store.cancel_session(session_id))
        if as_json:
            emit(json.dumps(cancel_view(session_id, done), ensure_ascii=False))
            return
    say(
        err_console(),
        f"session {session_id} cancelled: {len(done.waits_cancelled)} wait(s), "
        f"{len(done.approvals_cancelled)} approval(s), "
        f"{len(done.runs_cancelled)} run(s), {len(done.jobs_cancelled)} queued job(s)",
    )
