"""`pi run`: one agent run from the command line."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..exceptions import UserError
from ._console import err_console, fail, plain, say
from ._stdout import Emit, json_stdout
from .session import open_db

# The loop, the store and the model adapters are imported where a run needs them, so
# `pi --help` starts without them.
if TYPE_CHECKING:
    from rich.console import Console

    from ..loop import Agent, RunResult
    from ..loop.definition import AgentDefinition
    from ..memory import MemoryStore
    from ..models import Model
    from ..observe import Event

EXIT_CODES = {"completed": 0, "awaiting": 3}


def run_command(
    prompt: Annotated[str, typer.Argument(help="The user's message.")],
    agent_file: Annotated[
        Path | None,
        typer.Option("--agent", help="Agent file (TOML) defining the agent; flags override it."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model spec, e.g. scripted:PATH.")
    ] = None,
    tools: Annotated[
        list[str] | None,
        typer.Option("--tools", help="MODULE:ATTR holding a tool or a list of tools."),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", min=1, help="Model calls allowed.")
    ] = None,
    token_budget: Annotated[
        int | None, typer.Option("--token-budget", min=1, help="Tokens allowed.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=0.001, help="Seconds allowed.")
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Continue (or start) this persistent session.")
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Store of sessions (default $PI_DB, sqlite:///.pi/pi.db)."),
    ] = None,
    local_threads: Annotated[
        int | None,
        typer.Option("--local-threads", min=1, help="CPU threads of the embedded model."),
    ] = None,
    local_context: Annotated[
        int | None,
        typer.Option("--local-context", min=512, help="The embedded model's window in tokens."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="OpenAI-compatible server URL.")
    ] = None,
    tool_choice: Annotated[
        str | None,
        typer.Option(
            "--tool-choice", help="Tool choice of the first model call only (default auto)."
        ),
    ] = None,
    trace_dir: Annotated[
        Path | None, typer.Option("--trace-dir", help="Where the JSONL trace goes.")
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode", help="react (default), plan (plan, execute, reflect) or auto (routed)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the RunResult JSON only.")] = False,
) -> None:
    """Run an agent on PROMPT. Exit 0 completed, 3 awaiting, 1 otherwise, 2 bad usage."""
    limits = {
        k: v
        for k, v in (
            ("max_steps", max_steps),
            ("token_budget", token_budget),
            ("wall_clock_s", timeout),
        )
        if v is not None
    }
    engine = {
        k: v for k, v in (("threads", local_threads), ("context", local_context)) if v is not None
    }
    # from the first import of a tools module on, stdout may hold the RunResult alone
    with json_stdout(as_json) as emit:
        definition = _chosen(
            agent_file, model=model, tools=tools, base_url=base_url, engine=engine, mode=mode
        )
        if db is not None and session is None and definition.memory is None:
            fail("--db is the store of sessions (and of an agent's memory): add --session ID")
        if session is not None:
            named = (
                agent_file is not None
                or model is not None
                or bool(tools)
                or base_url is not None
                or bool(engine)
                or mode is not None
            )
            code = _run_in_session(
                prompt,
                session,
                db,
                definition=definition,
                named=named,
                limits=limits,
                trace_dir=trace_dir,
                tool_choice=tool_choice,
                as_json=as_json,
                emit=emit,
            )
        else:
            code = _run_once(
                prompt,
                definition,
                db=db,
                limits=limits,
                trace_dir=trace_dir,
                tool_choice=tool_choice,
                emit=emit if as_json else None,
            )
    raise typer.Exit(code)


def _chosen(
    agent_file: Path | None,
    *,
    model: str | None,
    tools: list[str] | None,
    base_url: str | None,
    engine: dict[str, int],
    mode: str | None,
) -> AgentDefinition:
    """The agent the flags choose, or exit 2 saying why there is none."""
    try:
        definition = _definition(agent_file, model=model, tools=tools, base_url=base_url)
        if engine:  # merged key by key over the agent file's [local] table
            definition = definition.with_overrides(local=engine)
        if mode is not None:
            definition = definition.with_overrides(mode=mode)
    except UserError as exc:
        fail(exc)
    return definition


def _run_once(
    prompt: str,
    definition: AgentDefinition,
    *,
    db: str | None,
    limits: dict[str, Any],
    trace_dir: Path | None,
    tool_choice: str | None,
    emit: Emit | None,
) -> int:
    """One run without a session, printed (as JSON through `emit`, if given); the exit
    code."""
    from ..loop import run_blocking

    err = err_console()
    # an agent with long-term memory keeps its facts in the store, session or not
    memory = open_db(db) if definition.memory is not None else None
    try:
        agent = _build(definition, trace_dir=trace_dir, limits=limits, memory_store=memory)
        if tool_choice is not None:
            agent.validate_tool_choice(tool_choice)
    except UserError as exc:
        if memory is not None:
            memory.close()
        fail(exc)
    try:
        if emit is not None:
            result = agent.run_sync(prompt, next_tool_choice=tool_choice)
        else:
            result = run_blocking(
                agent.mcp.closing(_run_with_progress(agent, prompt, tool_choice, err))
            )
    except UserError as exc:  # refused before it began (a trace folder that is a file)
        fail(exc)
    finally:
        if memory is not None:
            memory.close()
    if emit is not None:
        emit(result.to_json())
    else:
        if result.output is not None:
            typer.echo(answer_text(result.output))
        elif result.error:
            say(err, (result.stop_reason, "red"), ": ", result.error)
        say(err, (f"trace: {result.trace}", "dim"))
    return EXIT_CODES.get(result.status, 1)


def answer_text(output: Any) -> str:
    """The final answer as stdout shows it: text with its line breaks, terminal control
    characters escaped (a model must not drive the user's terminal); a contract's JSON
    object as JSON."""
    if not isinstance(output, str):
        output = json.dumps(output, ensure_ascii=False)
    return plain(output, lines=True)


def _definition(
    agent_file: Path | None,
    *,
    model: str | None,
    tools: list[str] | None,
    base_url: str | None,
) -> AgentDefinition:
    """The agent the command line defines: the agent file with the flags over it."""
    # from loop, not durable: a run without --db never imports the store (SQLAlchemy)
    from ..loop.agentfile import read_agent_file
    from ..loop.definition import absolute_model, definition_here

    if agent_file is None:
        return definition_here(model=model, tools=tools or [], base_url=base_url)
    flags: dict[str, Any] = {"model": absolute_model(model, Path.cwd()), "base_url": base_url}
    if tools:  # tools named on the command line import from the current folder
        flags.update(tools=tuple(tools), import_path=os.getcwd())
    return read_agent_file(agent_file).with_overrides(**flags)


def _build(
    definition: AgentDefinition,
    *,
    trace_dir: Path | None,
    limits: dict[str, Any],
    models: dict[str, Model] | None = None,
    memory_store: MemoryStore | None = None,
) -> Agent:
    from ..loop.agentfile import agent_error
    from ..loop.definition import DefinitionError

    try:
        return definition.build_agent(
            trace_dir=trace_dir, limits=limits, models=models, memory_store=memory_store
        )
    except DefinitionError as exc:
        raise agent_error(definition, exc) from None


async def _run_with_progress(
    agent: Agent, prompt: str, choice: str | None, err: Console
) -> RunResult:
    from .progress import render_progress

    stream = agent.run_stream(prompt, next_tool_choice=choice)
    async for event in stream:
        if event.kind != "model_delta":
            render_progress(event, err)
    assert stream.result is not None
    return stream.result


def _run_in_session(
    prompt: str,
    session_id: str,
    db: str | None,
    *,
    definition: AgentDefinition,
    named: bool,
    limits: dict[str, Any],
    trace_dir: Path | None,
    tool_choice: str | None,
    as_json: bool,
    emit: Emit,
) -> int:
    """One turn of a persistent session; the exit code. A session keeps the agent it was
    started with; limits and tool choice given now apply to this request. With `as_json`
    the result is written through `emit`."""
    from ..durable import Conflict, StoreError
    from ..durable.sessions import open_session, run_turn
    from ..loop import run_blocking

    err = err_console()
    store = open_db(db)
    try:
        agent = None
        if store.get_session(session_id) is None:
            # A new session stores its agent for good: build it and check the request
            # first, so a typo in --tools or --tool-choice stores nothing.
            agent = _build(definition, trace_dir=trace_dir, limits=limits, memory_store=store)
            if tool_choice is not None:
                agent.validate_tool_choice(tool_choice)
        session, recipe = open_session(store, session_id, definition, same_agent=named)
        if agent is None or session.agent != definition.to_dict():  # (created meanwhile)
            agent = _build(recipe, trace_dir=trace_dir, limits=limits, memory_store=store)
        on_event = None if as_json else _progress(err)
        owner = f"cli-{socket.gethostname()}-{os.getpid()}"
        # stdout must hold the RunResult alone: whatever tools print goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            turn = run_blocking(
                agent.mcp.closing(
                    run_turn(
                        store,
                        session_id,
                        prompt,
                        agent=agent,
                        owner=owner,
                        job_max_attempts=recipe.job_max_attempts,
                        on_event=on_event,
                        tool_choice=tool_choice,
                        limits=limits,
                    )
                )
            )
    except Conflict as exc:
        status = store.get_session(session_id)
        hint = {
            "awaiting_server_tool": "; `pi worker` delivers the results it waits for, "
            "`pi session cancel` stops waiting",
            "awaiting_approval": "; `pi approve` or `pi reject` decides the calls it waits "
            "for (`pi session show` lists them), `pi session cancel` stops waiting",
        }.get(status.status if status is not None else "", "")
        say(err, ("error:", "red"), " ", exc, hint)
        return 2
    except UserError as exc:
        say(err, ("error:", "red"), " ", exc)
        return 2
    except KeyboardInterrupt:
        store.cancel_session(session_id)
        say(err, "interrupted: session ", session_id, " cancelled")
        return 130
    except StoreError as exc:
        say(err, ("error:", "red"), " ", exc)
        return 1
    finally:
        store.close()
    from .approve import show_result

    return show_result(turn.result, session_id, as_json, err, emit=emit)


def _progress(err: Console) -> Callable[[Event], None]:
    from .progress import render_progress

    def show(event: Event) -> None:
        if event.kind != "model_delta":
            render_progress(event, err)

    return show
