"""`pi approve` / `pi reject`: decide a call a stored session waits for, and continue it."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..exceptions import UserError
from ._console import err_console, fail, say, shown_arguments
from ._stdout import Emit, json_stdout
from .session import DbOption, open_db

if TYPE_CHECKING:
    from rich.console import Console

    from ..durable import Store
    from ..loop import RunResult
    from ..loop.approvals import Decision
    from ..loop.definition import AgentDefinition

MAX_LEASE_S = 86_400.0
"""The longest lease `--lease` takes: a day (a larger one overflows the store's clock)."""

SessionArg = Annotated[str, typer.Argument(help="The session's id.")]
CallArg = Annotated[str, typer.Argument(help="The waiting tool call's id.")]
FingerprintOption = Annotated[
    str | None,
    typer.Option(
        "--fingerprint", help="The fingerprint reviewed: refused if the waiting call's differs."
    ),
]
LeaseOption = Annotated[
    float,
    typer.Option(
        "--lease",
        min=0.1,
        max=MAX_LEASE_S,
        help="Lease seconds: if this process dies, a worker takes over.",
    ),
]
TraceOption = Annotated[
    Path | None, typer.Option("--trace-dir", help="Where the continued run's trace goes.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the RunResult JSON only.")]


def approve_command(
    session_id: SessionArg,
    call_id: CallArg,
    arguments: Annotated[
        str | None,
        typer.Option("--arguments", help="Run it with these arguments (one JSON object)."),
    ] = None,
    fingerprint: FingerprintOption = None,
    db: DbOption = None,
    lease: LeaseOption = 30.0,
    trace_dir: TraceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve CALL_ID: run it once and continue the session. Exits as `pi run` does."""
    from ..loop.approvals import Decision
    from ..messages import parse_object

    edited = None
    if arguments is not None:
        edited, problem = parse_object(arguments)
        if edited is None:
            fail(f"--arguments must be one JSON object: {problem}")
    try:
        decision = Decision(
            call_id=call_id, approve=True, arguments=edited, fingerprint=fingerprint
        )
    except UserError as exc:
        fail(exc)
    raise typer.Exit(_decide(session_id, decision, db, lease, trace_dir, as_json))


def reject_command(
    session_id: SessionArg,
    call_id: CallArg,
    reason: Annotated[str, typer.Option("--reason", help="Why: the model reads it.")],
    fingerprint: FingerprintOption = None,
    db: DbOption = None,
    lease: LeaseOption = 30.0,
    trace_dir: TraceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reject CALL_ID: it never runs; the model hears why, and the session continues."""
    from ..loop.approvals import Decision

    try:
        decision = Decision(call_id=call_id, approve=False, reason=reason, fingerprint=fingerprint)
    except UserError as exc:
        fail(exc)
    raise typer.Exit(_decide(session_id, decision, db, lease, trace_dir, as_json))


def _decide(
    session_id: str,
    decision: Decision,
    db: str | None,
    lease_s: float,
    trace_dir: Path | None,
    as_json: bool,
) -> int:
    """Take the decision in the store and print the continued run; the exit code."""
    # from the first import of a tools module on, stdout may hold the RunResult alone
    with json_stdout(as_json) as emit:
        return _decided(session_id, decision, db, lease_s, trace_dir, as_json, emit)


def _decided(
    session_id: str,
    decision: Decision,
    db: str | None,
    lease_s: float,
    trace_dir: Path | None,
    as_json: bool,
    emit: Emit,
) -> int:
    from ..durable import LeaseLost, StoreError
    from ..durable.approvals import decide
    from ..loop import run_blocking
    from .run import _build, _progress

    err = err_console()
    store = open_db(db)
    try:
        agent = _build(
            _recipe(store, session_id),
            trace_dir=trace_dir,
            limits=_limits(store, session_id, decision.call_id),
        )
        owner = f"cli-{socket.gethostname()}-{os.getpid()}"
        # stdout must hold the RunResult alone: whatever tools print goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            result = run_blocking(
                agent.mcp.closing(
                    decide(
                        store,
                        session_id,
                        decision,
                        agent=agent,
                        owner=owner,
                        lease_s=lease_s,
                        on_event=None if as_json else _progress(err),
                    )
                )
            )
    except UserError as exc:
        say(err, ("error:", "red"), " ", exc)
        return 2
    except (LeaseLost, StoreError) as exc:
        say(err, ("error:", "red"), " ", exc)
        return 1
    finally:
        store.close()
    return show_result(result, session_id, as_json, err, emit=emit)


def _recipe(store: Store, session_id: str) -> AgentDefinition:
    from ..durable.recipe import stored_recipe

    session = store.get_session(session_id)
    if session is None:
        raise UserError(f"no session {session_id!r}")
    return stored_recipe(session.agent)


def _limits(store: Store, session_id: str, call_id: str) -> dict[str, object]:
    """The limits the waiting call's request was given (its continuation keeps them)."""
    from ..durable.sessions import request_of

    for approval in store.list_approvals(session_id):
        if approval.tool_call_id == call_id:
            run = store.get_run(approval.run_id)
            return request_of(store, run).limits if run is not None else {}
    return {}


def show_result(
    result: RunResult, session_id: str, as_json: bool, err: Console, *, emit: Emit = typer.echo
) -> int:
    """Print a session's run as `pi run --session` does, its JSON through `emit`; its exit
    code."""
    from .run import EXIT_CODES, answer_text

    if as_json:
        emit(result.to_json())
    else:
        if result.output is not None:
            typer.echo(answer_text(result.output))
        elif result.status == "awaiting":
            awaiting_note(result, session_id, err)
        elif result.error:
            say(err, (result.stop_reason, "red"), ": ", result.error)
        say(err, (f"session {session_id} · trace: {result.trace}", "dim"))
    return EXIT_CODES.get(result.status, 1)


def awaiting_note(result: RunResult, session_id: str, err: Console) -> None:
    """What an awaiting session waits for, and the commands that move it on."""
    for pending in result.pending_approvals:
        args = shown_arguments(pending.arguments)
        say(
            err,
            "awaiting approval: ",
            (pending.call_id, "bold"),
            f" {pending.tool}({args}) fingerprint {pending.fingerprint[:16]}…",
        )
    if result.pending_approvals:
        say(
            err,
            f"`pi approve {session_id} CALL_ID` runs it; "
            f"`pi reject {session_id} CALL_ID --reason TEXT` declines it",
        )
    if result.waits:
        jobs = ", ".join(job for _, job in result.waits)
        say(
            err,
            f"awaiting {len(result.waits)} background job(s): {jobs}; "
            "`pi worker` runs them and continues the session",
        )
