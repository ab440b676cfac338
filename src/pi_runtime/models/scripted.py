"""`ScriptedModel`: answers from a script, one step per assistant message already sent."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..exceptions import ModelError, UserError
from ..messages import Block, TextBlock, ThinkingBlock, ToolCall, Usage
from ..userfiles import MiB, UserFileError, read_user_text
from ._deltas import parse_arguments, replays_complete, stream_response
from ._repair import repair_response, trust_stream
from .base import ModelRequest, ModelResponse, StreamEvent

MAX_SCRIPT_BYTES = 32 * MiB
"""The largest script file read: far past any test's or demo's, short of a memory blow-up."""


class _ScriptCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class _ScriptUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(default=0, ge=0)
    cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """What the step cost, when a script stands in for a priced model (None: unknown)."""


class ScriptStep(BaseModel):
    """One scripted assistant message (the script file's `steps[i]`)."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = None
    thinking: str | None = None
    tool_calls: list[_ScriptCall] = Field(default_factory=list)
    finish_reason: Literal["stop", "tool_calls", "length"] | None = None
    usage: _ScriptUsage = Field(default_factory=_ScriptUsage)
    delay_ms: int = Field(default=0, ge=0)


class _Script(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: list[ScriptStep]


def load_script(path: str | Path) -> list[ScriptStep]:
    """Read and check a script file; a bad file is a `UserError` naming what is wrong."""
    p = Path(path)
    try:
        data = json.loads(read_user_text(p, what="script", max_bytes=MAX_SCRIPT_BYTES))
    except UserFileError as exc:
        raise UserError(f"cannot read script {p}: {exc.reason}") from None
    except ValueError as exc:
        raise UserError(f"script {p} is not valid JSON: {exc}") from exc
    except RecursionError:  # json recurses once per nested array or object
        raise UserError(f"script {p} is nested too deeply to read") from None
    try:
        return _Script.model_validate(data).steps
    except ValidationError as exc:
        raise UserError(f"script {p} does not match the script format:\n{exc}") from exc


def step_response(step: ScriptStep, index: int, model: str) -> ModelResponse:
    """The neutral response a script step stands for."""
    finish = step.finish_reason or ("tool_calls" if step.tool_calls else "stop")
    content: list[Block] = []
    if step.thinking:
        content.append(ThinkingBlock(text=step.thinking))
    if step.text:
        content.append(
            TextBlock(text=step.text, phase="commentary" if step.tool_calls else "final")
        )
    for i, call in enumerate(step.tool_calls):
        if isinstance(call.arguments, str):
            raw = call.arguments
        else:
            raw = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
        content.append(
            ToolCall(
                id=call.id or f"call_{index}_{i}",
                name=call.name,
                raw=raw,
                arguments=parse_arguments(raw),
                truncated=finish == "length",
            )
        )
    return ModelResponse(
        content=tuple(content),
        finish_reason=finish,
        usage=Usage(**step.usage.model_dump()),
        model=model,
        raw=step.model_dump(mode="json", exclude_defaults=True),
    )


class ScriptedModel:
    """Deterministic model for tests and demos.

    The step used for a call is the number of assistant messages already in the
    conversation, so a scripted session resumes correctly in another process.

    Args:
        steps: script steps (dicts in the script-file shape, or `ScriptStep`s).
        name: the model name recorded in traces.
        context_window: the window the model reports (None: unknown, the builder's
            default applies), to test how a run budgets for a small model.
        keep_calls: keep each request (`requests`, `calls`). Off, it keeps none: a model
            a worker or server builds from a spec serves every run it does, and nothing
            reads them back there.
    """

    def __init__(
        self,
        steps: Sequence[ScriptStep | dict[str, Any]],
        *,
        name: str = "scripted",
        context_window: int | None = None,
        keep_calls: bool = True,
    ) -> None:
        try:
            self.steps = [
                s if isinstance(s, ScriptStep) else ScriptStep.model_validate(s) for s in steps
            ]
        except ValidationError as exc:
            raise UserError(f"bad script step:\n{exc}") from exc
        self.name = name
        self.context_window = context_window
        self.keep_calls = keep_calls
        self._asked: set[int] = set()  # the steps asked for, kept calls or not
        self.requests: list[ModelRequest] = []
        self.calls: list[ModelRequest] = []
        """A detached copy of each request, in order: later changes to what the caller
        passed (tool schemas, argument dicts) do not alter what the test reads here."""

    @classmethod
    def from_file(cls, path: str | Path, *, keep_calls: bool = True) -> ScriptedModel:
        return cls(load_script(path), name=f"scripted:{path}", keep_calls=keep_calls)

    def assert_complete(self) -> None:
        """Fail unless every step of the script was asked for (a step asked again after a
        retry is fine; a step never reached means the run ended earlier than scripted)."""
        unused = sorted(set(range(len(self.steps))) - self._asked)
        if unused:
            raise AssertionError(
                f"script has {len(self.steps)} steps; steps {unused} were never asked for"
            )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.keep_calls:
            self.requests.append(request)
            self.calls.append(copy.deepcopy(request))
        index = request.step
        if index >= len(self.steps):
            raise ModelError(f"script has {len(self.steps)} steps; step {index + 1} was asked for")
        self._asked.add(index)
        step = self.steps[index]
        if step.delay_ms:
            await asyncio.sleep(step.delay_ms / 1000)
        return repair_response(step_response(step, index, self.name))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        response = await self.complete(request)
        # closing the inner stream with this one spares the loop a finaliser wake-up
        async with contextlib.aclosing(stream_response(response)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        return None


# stream yields the deltas of what complete returns, and complete repairs it
trust_stream(ScriptedModel.stream, ScriptedModel.complete)
replays_complete(ScriptedModel.stream)
