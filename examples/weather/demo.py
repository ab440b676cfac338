"""The weather + reminder demo (seeds 001/002) on the embedded model, offline.

    python -m examples.weather.demo                        # the embedded Qwen2.5-Coder-0.5B
    python -m examples.weather.demo --model openai:gpt-4o-mini
    python -m examples.weather.demo --base-url http://127.0.0.1:8080/v1

It prints progress lines, the answer, how the run ended and where its trace is: the
weather of Beijing on the user's date, and a reminder because it storms (`make demo` runs
the same agent from `agent.toml`, in a stored session). Any well-formed ending exits 0;
a misuse, such as a missing package or key, exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from rich.console import Console

from pi_runtime import Agent, RunResult, UserError
from pi_runtime.cli.progress import render_progress

AGENT_FILE = Path(__file__).with_name("agent.toml")
PROMPT = "北京 12 月 5 日天气怎么样？如果下雨，提醒我带伞。"


async def run(agent: Agent, prompt: str, console: Console) -> RunResult:
    stream = agent.run_stream(prompt)
    async for event in stream:
        render_progress(event, console)
    assert stream.result is not None
    return stream.result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="?", default=PROMPT)
    parser.add_argument("--model", default="local", help="model spec (default: local)")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for the run")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    try:
        # the agent `agent.toml` defines (its instructions, allow-list and budget), on
        # the model asked for
        agent = Agent.from_file(
            AGENT_FILE,
            model=args.model,
            base_url=args.base_url,
            limits={"max_steps": args.max_steps, "wall_clock_s": args.timeout},
        )
    except UserError as exc:
        console.print(f"[red]error:[/] {exc}", highlight=False)
        return 2
    console.print(f"[bold]{args.prompt}[/]  [dim](model: {agent.model.name})[/]", highlight=False)
    result = asyncio.run(run(agent, args.prompt, console))
    if result.output is not None:
        print(result.output)
    console.print(
        f"ended {result.status} ({result.stop_reason}) after {result.steps} step(s); "
        f"trace: {result.trace}",
        highlight=False,
        soft_wrap=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
