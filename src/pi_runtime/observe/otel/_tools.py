"""Tool calls as `execute_tool {tool}` spans (a part of `RunSpans`).

A span opens when ACT begins: the model's calls run concurrently from there. It lasts the
call's `duration_ms` plus its retry waits (the `tool_result` event arrives once every
call of the step is done), and ends when ACT does, so content capture can still add the
result that joins the conversation after the `tool_result` event.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.trace import SpanKind, Status, StatusCode

from ...messages import AssistantMessage, Message, ToolResultMessage, redact
from .. import events as ev
from . import _content as content

if TYPE_CHECKING:
    from opentelemetry.context import Context

    from ._bounded import BoundedSpan
    from ._telemetry import Telemetry


@dataclass(slots=True)
class OpenCall:
    span: BoundedSpan
    name: str
    start_ns: int
    waits_ns: int = 0
    end_ns: int | None = None
    """Set once the call's outcome is known; the span ends when ACT does."""


class ToolSpans:
    """The tool calls of a run's current step; `RunSpans` holds the rest."""

    telemetry: Telemetry
    context: Context | None
    session_id: str
    response: AssistantMessage | None
    """The model's latest answer: its calls are the ones ACT runs."""
    messages: dict[int, Message]
    tools: dict[str, OpenCall]

    def _transition(self, e: ev.Transition) -> None:
        if e.target == "act" and self.response is not None:
            now = time.time_ns()
            for call in self.response.tool_calls:
                self.tools[call.id] = self._open_tool(call.id, call.name, now)
                if self.telemetry.capture_content:
                    arguments = content.tool_arguments(call)
                    self.tools[call.id].span.set_attribute("gen_ai.tool.call.arguments", arguments)
        elif e.source == "act":
            self._end_tools(time.time_ns(), unfinished="cancelled")

    def _open_tool(self, call_id: str, name: str, now: int) -> OpenCall:
        span = self.telemetry.start_span(
            f"execute_tool {name}",
            context=self.context,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
                "gen_ai.conversation.id": self.session_id,
            },
            start_time=now,
        )
        return OpenCall(span=span, name=name, start_ns=now)

    def _tool(self, call_id: str, name: str) -> OpenCall:
        known = self.tools.get(call_id)
        if known is None:  # a call ACT did not announce (none so far): its span opens now
            known = self.tools[call_id] = self._open_tool(call_id, name, time.time_ns())
        return known

    def _tool_retry(self, e: ev.ToolRetried) -> None:
        call = self._tool(e.tool_call_id, e.name)
        call.waits_ns += int(e.retry_in_ms * 1e6)
        call.span.add_event(
            "pi.tool_retry", {"pi.attempt": e.attempt, "pi.error_kind": e.error_kind}
        )

    def _tool_result(self, e: ev.ToolResult) -> None:
        call = self._tool(e.tool_call_id, e.name)
        now = time.time_ns()
        call.end_ns = min(now, call.start_ns + int(e.duration_ms * 1e6) + call.waits_ns)
        call.span.set_attributes(
            {
                "pi.tool.outcome": "error" if e.is_error else "ok",
                "pi.tool.executed": e.executed,
                "pi.tool.attempts": e.attempts,
                "pi.tool.result_bytes": e.result_bytes,
                "pi.tool.result_truncated": e.result_truncated,
            }
        )
        if e.is_error:
            error_type = e.error_kind or "_OTHER"
            call.span.set_attribute("error.type", error_type)
            if e.error_class:
                call.span.set_attribute("pi.tool.error_class", e.error_class)
            call.span.set_status(Status(StatusCode.ERROR, error_type))

    def _tool_waits(self, e: ev.JobStarted | ev.ApprovalRequested) -> None:
        call = self._tool(e.tool_call_id, e.name)
        call.end_ns = time.time_ns()
        if isinstance(e, ev.JobStarted):
            call.span.set_attributes({"pi.tool.outcome": "job", "pi.job.id": e.job_id})
        else:
            call.span.set_attribute("pi.tool.outcome", "awaiting_approval")

    def _message(self, e: ev.MessageAppended) -> None:
        if not self.telemetry.capture_content:
            return
        self.messages[e.index] = e.message
        message = e.message
        if isinstance(message, ToolResultMessage) and message.tool_call_id in self.tools:
            result = redact(message.content)
            self.tools[message.tool_call_id].span.set_attribute("gen_ai.tool.call.result", result)

    def _end_tools(self, now: int, *, unfinished: str) -> None:
        for call in self.tools.values():
            if call.end_ns is None:  # no outcome: cut off (the clock, a breaker's stop)
                call.span.set_attributes({"pi.tool.outcome": unfinished, "error.type": unfinished})
                call.span.set_status(Status(StatusCode.ERROR, unfinished))
            call.span.end(end_time=call.end_ns or now)
        self.tools.clear()
