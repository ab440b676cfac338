"""Agent-loop overhead of peer frameworks, measured in-process with a scripted model.

Workload (the same one Pi runs): one tool ``noop(i: int) -> int`` returning ``i``.
For a run of ``T`` turns the scripted model answers calls ``1..T-1`` with a single
``noop`` call with arguments ``{"i": <call index>}`` and call ``T`` with the text
``"done"``. Overhead per turn = wall time of the run / ``T``, in microseconds.

The scripted models do nothing but build the canned response (they report a fixed
usage so no token estimation runs, and they keep no history copies). The tool and
the model are ``async`` so neither framework hops to a worker thread per call.
The peer libraries are imported lazily so this module imports without them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from typing import Any

PEERS: tuple[str, ...] = ("pydantic-ai", "openai-agents")

# Number of ``noop`` executions in the most recent ``run_peer`` call (for checks).
LAST_TOOL_CALLS: int = 0

_IMPORT_NAMES = {"pydantic-ai": "pydantic_ai", "openai-agents": "agents"}
_INSTALL_HINT = "pip install 'pi-runtime[bench]'"
_PROMPT = "go"
_FINAL_TEXT = "done"


def module_of(system: str) -> str:
    """The module a peer system is imported as (`pydantic_ai` for `pydantic-ai`)."""
    return _IMPORT_NAMES[system]


def peer_available(system: str) -> str | None:
    """Return ``None`` if ``system`` is importable, else an install hint."""
    if system not in _IMPORT_NAMES:
        raise ValueError(f"unknown peer system {system!r}; expected one of {PEERS}")
    if importlib.util.find_spec(_IMPORT_NAMES[system]) is None:
        return _INSTALL_HINT
    return None


def run_peer(system: str, turns: int) -> float:
    """Run the workload once on ``system``; return overhead per turn in microseconds."""
    if turns < 1:
        raise ValueError("turns must be >= 1")
    if system == "pydantic-ai":
        runner = _pydantic_ai_run
    elif system == "openai-agents":
        runner = _openai_agents_run
    else:
        raise ValueError(f"unknown peer system {system!r}; expected one of {PEERS}")
    elapsed, tool_calls = asyncio.run(runner(turns))
    if tool_calls != turns - 1:
        raise RuntimeError(f"{system}: expected {turns - 1} tool calls, got {tool_calls}")
    global LAST_TOOL_CALLS
    LAST_TOOL_CALLS = tool_calls
    return elapsed / turns * 1e6


async def _pydantic_ai_run(turns: int) -> tuple[float, int]:
    """Time one PydanticAI run driven by a ``FunctionModel``."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    calls = 0
    tool_calls = 0

    async def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        if calls < turns:
            part = ToolCallPart("noop", {"i": calls}, tool_call_id=f"call_{calls}")
            return ModelResponse(parts=[part], usage=usage)
        return ModelResponse(parts=[TextPart(_FINAL_TEXT)], usage=usage)

    async def noop(i: int) -> int:
        """Return ``i``."""
        nonlocal tool_calls
        tool_calls += 1
        return i

    agent = Agent(FunctionModel(model_fn), tools=[noop])
    limits = UsageLimits(request_limit=None, tool_calls_limit=None)
    start = time.perf_counter()
    result = await agent.run(_PROMPT, usage_limits=limits)
    elapsed = time.perf_counter() - start
    if result.output != _FINAL_TEXT or calls != turns:
        raise RuntimeError(f"pydantic-ai: bad run (output={result.output!r}, calls={calls})")
    return elapsed, tool_calls


async def _openai_agents_run(turns: int) -> tuple[float, int]:
    """Time one OpenAI Agents SDK run driven by a minimal canned ``Model``."""
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    calls = 0
    tool_calls = 0

    class _Canned(Model):
        """Answers with a ``noop`` call until the last turn, then ``"done"``."""

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            usage = Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)
            item: Any
            if calls < turns:
                item = ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{calls}",
                    call_id=f"call_{calls}",
                    name="noop",
                    arguments=f'{{"i":{calls}}}',
                )
            else:
                text = ResponseOutputText(type="output_text", text=_FINAL_TEXT, annotations=[])
                item = ResponseOutputMessage(
                    type="message",
                    id="msg_final",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            return ModelResponse(output=[item], usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    @function_tool
    async def noop(i: int) -> int:
        """Return ``i``."""
        nonlocal tool_calls
        tool_calls += 1
        return i

    agent: Any = Agent(name="bench", model=_Canned(), tools=[noop])
    config = RunConfig(tracing_disabled=True)
    start = time.perf_counter()
    result = await Runner.run(agent, _PROMPT, max_turns=turns + 5, run_config=config)
    elapsed = time.perf_counter() - start
    if result.final_output != _FINAL_TEXT or calls != turns:
        output = result.final_output
        raise RuntimeError(f"openai-agents: bad run (output={output!r}, calls={calls})")
    return elapsed, tool_calls
