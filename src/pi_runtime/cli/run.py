"""`pi run`: one agent run from the command line."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..exceptions import UserError
from ..loop import Agent, RunResult, run_blocking
from .loading import load_tools
from .progress import render_progress

EXIT_CODES = {"completed": 0, "awaiting": 3}


def run_command(
    prompt: Annotated[str, typer.Argument(help="The user's message.")],
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
    session: Annotated[str | None, typer.Option("--session", help="Conversation id.")] = None,
    db: Annotated[str | None, typer.Option("--db", help="Store URL for sessions.")] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="OpenAI-compatible server URL.")
    ] = None,
    tool_choice: Annotated[
        str, typer.Option("--tool-choice", help="Tool choice of the first model call only.")
    ] = "auto",
    trace_dir: Annotated[
        Path | None, typer.Option("--trace-dir", help="Where the JSONL trace goes.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the RunResult JSON only.")] = False,
) -> None:
    """Run an agent on PROMPT. Exit 0 completed, 3 awaiting, 1 otherwise, 2 bad usage."""
    err = Console(stderr=True)
    try:
        if db is not None:
            raise UserError(
                "--db needs the durable store, which this version of Pi does not include yet"
            )
        if base_url is not None:
            raise UserError(
                "--base-url needs the OpenAI-compatible provider, not in this version of Pi yet"
            )
        specs = [s for spec in tools or [] for s in load_tools(spec)]
        agent = Agent(
            model,
            tools=specs,
            max_steps=max_steps,
            token_budget=token_budget,
            wall_clock_s=timeout,
            trace_dir=trace_dir,
        )
        agent._check_tool_choice(tool_choice)
    except UserError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    if as_json:
        # stdout must hold the RunResult alone: whatever tools print goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            result = agent.run_sync(prompt, session_id=session, next_tool_choice=tool_choice)
        typer.echo(result.to_json())
    else:
        result = run_blocking(_run_with_progress(agent, prompt, session, tool_choice, err))
        if result.output is not None:
            typer.echo(result.output)
        elif result.error:
            err.print(f"[red]{result.stop_reason}[/]: {result.error}", highlight=False)
        err.print(f"[dim]trace: {result.trace}[/]", highlight=False)
    raise typer.Exit(EXIT_CODES.get(result.status, 1))


async def _run_with_progress(
    agent: Agent, prompt: str, session: str | None, choice: str, err: Console
) -> RunResult:
    stream = agent.run_stream(prompt, session_id=session, next_tool_choice=choice)
    async for event in stream:
        if event.kind != "model_delta":
            render_progress(event, err)
    assert stream.result is not None
    return stream.result
