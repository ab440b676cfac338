"""`RunSpans`: one run's events, as they are emitted, turned into GenAI spans and metrics.

Events carry what a span needs except wall-clock times, so each is stamped when it
arrives (events are emitted as things happen): a `chat` span runs from its response's
arrival back by the call's `latency_ms` (a failed attempt, from the request or the end
of its retry wait). Tool calls are `_tools`' part.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from ...messages import AssistantMessage, Message, redact
from .. import events as ev
from . import _content as content
from . import session_span_id, session_trace_id
from ._names import ModelRef, model_error_type, model_ref
from ._tools import OpenCall, ToolSpans

if TYPE_CHECKING:
    from opentelemetry.context import Context

    from ._bounded import BoundedSpan
    from ._telemetry import Telemetry

log = logging.getLogger("pi_runtime.observe.otel")


class RunSpans(ToolSpans):
    """The spans of one run under way (see the module)."""

    def __init__(
        self, telemetry: Telemetry, agent_name: str | None, history: Sequence[Message] = ()
    ) -> None:
        self.telemetry, self.agent_name = telemetry, agent_name
        self.messages: dict[int, Message] = dict(enumerate(history))
        """The conversation by index, kept only when content is captured."""
        self.run: BoundedSpan | None = None
        self.context: Context | None = None
        self.ref = ModelRef(provider="_OTHER", model="unknown")
        self.session_id = self.run_id = ""
        self.attempt_start_ns: int | None = None
        self.message_count = self.step = self.attempts = 0
        self.response: AssistantMessage | None = None
        self.tools: dict[str, OpenCall] = {}
        self.guard: str | None = None
        self.broken = False

    def on_event(self, event: ev.Event) -> None:
        handle = _HANDLERS.get(event.kind)
        if handle is None or self.broken:
            return
        try:
            handle(self, event)
        except Exception:  # telemetry must never break a run: this run exports no more
            self.broken = True
            self.telemetry.runs.pop(self.run_id, None)
            log.warning("OpenTelemetry export of run %s failed", self.run_id, exc_info=True)

    # -- the run ------------------------------------------------------------------------

    def _run_started(self, e: ev.RunStarted) -> None:
        self.ref, self.session_id, self.run_id = model_ref(e.model), e.session_id, e.run_id
        parent, links = self._parent(e)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": self.ref.provider,
            "gen_ai.request.model": self.ref.model,
            "gen_ai.conversation.id": e.session_id,
            "pi.run.id": e.run_id,
            **_prompt(e.prompt),
        }
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        if e.parent_run_id:
            attributes["pi.parent_run.id"] = e.parent_run_id
        if self.telemetry.capture_content:
            attributes["gen_ai.system_instructions"] = content.system_instructions(e.system)
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        self.run = self.telemetry.start_span(
            name,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
            start_time=time.time_ns(),
        )
        self.context = trace.set_span_in_context(self.run.span)
        self.telemetry.runs[e.run_id] = self

    def _parent(self, e: ev.RunStarted) -> tuple[Context | None, list[Link]]:
        """A sub-agent's run: the call that started it. An application's span current
        here: that span, linked to the session. Otherwise the session itself."""
        if e.parent_run_id is not None:
            parent = self.telemetry.runs.get(e.parent_run_id)
            call = parent.tools.get(e.parent_call_id or "") if parent is not None else None
            if call is not None:
                self.agent_name = call.name  # a sub-agent is its tool
                return trace.set_span_in_context(call.span.span), []
            if parent is not None:
                return parent.context, []
        session = SpanContext(
            trace_id=int(session_trace_id(e.session_id), 16),
            span_id=int(session_span_id(e.session_id), 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        if trace.get_current_span().get_span_context().is_valid:
            return None, [Link(session, {"pi.link": "session"})]
        return trace.set_span_in_context(NonRecordingSpan(session)), []

    def _run_finished(self, e: ev.RunFinished) -> None:
        now = time.time_ns()
        self._end_tools(now, unfinished="cancelled")
        started = self.attempt_start_ns
        if started is not None and started <= now:  # a model call cut off (the clock)
            detail = f"the call was cut off: {e.stop_reason}"
            self._failed_call(now, e.stop_reason, detail, self.attempts + 1)
        run = self.run
        if run is None:
            return
        run.set_attributes(
            {
                "gen_ai.usage.input_tokens": e.usage.input_tokens,
                "gen_ai.usage.output_tokens": e.usage.output_tokens,
                "pi.status": e.status,
                "pi.stop_reason": e.stop_reason,
                "pi.steps": e.steps,
                "pi.truncation_count": int(e.metrics.get("tool_argument_truncation_count", 0)),
            }
        )
        if e.usage.cached_tokens:
            run.set_attribute("gen_ai.usage.cache_read.input_tokens", e.usage.cached_tokens)
        if e.usage.cost_usd is not None:
            run.set_attribute("pi.usage.cost_usd", e.usage.cost_usd)
        if self.guard is not None:
            run.set_attribute("pi.guard", self.guard)
        if self.response is not None:
            run.set_attribute("gen_ai.response.finish_reasons", [self.response.finish_reason])
        if self.telemetry.capture_content and e.output is not None:
            text = e.output if isinstance(e.output, str) else content.dumps(e.output)
            answer = {"role": "assistant", "parts": [{"type": "text", "content": redact(text)}]}
            run.set_attribute("gen_ai.output.messages", content.dumps([answer]))
        if e.status == "failed":
            run.set_attribute("error.type", e.stop_reason)
            run.set_status(Status(StatusCode.ERROR, redact(e.error or e.stop_reason)))
        run.end(end_time=now)
        self.telemetry.runs.pop(self.run_id, None)

    def _mark(self, name: str, attributes: dict[str, Any]) -> None:
        if self.run is not None:
            self.run.add_event(name, {k: v for k, v in attributes.items() if v is not None})

    # -- model calls --------------------------------------------------------------------

    def _model_request(self, e: ev.ModelRequested) -> None:
        self.attempt_start_ns, self.message_count = time.time_ns(), e.message_count
        self.step, self.attempts = e.step, 0

    def _chat(self, start_ns: int, step: int) -> BoundedSpan:
        ref = self.ref
        attributes: dict[str, Any] = {
            **self._metric_attributes(),
            "gen_ai.conversation.id": self.session_id,
            "pi.step": step,
        }
        if self.telemetry.capture_content:
            sent = (self.messages[i] for i in range(self.message_count) if i in self.messages)
            attributes["gen_ai.input.messages"] = content.input_messages(sent, self.telemetry.limit)
        return self.telemetry.start_span(
            f"chat {ref.model}",
            context=self.context,
            kind=SpanKind.INTERNAL if ref.in_process else SpanKind.CLIENT,
            attributes=attributes,
            start_time=start_ns,
        )

    def _metric_attributes(self) -> dict[str, Any]:
        ref = self.ref
        out: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": ref.provider,
            "gen_ai.request.model": ref.model,
        }
        if ref.server_address is not None:
            out["server.address"] = ref.server_address
            out["server.port"] = ref.server_port
        return out

    def _model_response(self, e: ev.ModelResponded) -> None:
        end = time.time_ns()
        start = end - int(e.latency_ms * 1e6)
        message, usage = e.message, e.message.usage
        span = self._chat(start, e.step)
        span.set_attributes(
            {
                "gen_ai.response.finish_reasons": [message.finish_reason],
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "pi.usage_source": e.usage_source,
            }
        )
        if usage.cached_tokens:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens)
        if message.model:
            span.set_attribute("gen_ai.response.model", message.model)
        if self.telemetry.capture_content:
            span.set_attribute("gen_ai.output.messages", content.output_messages(message))
        span.end(end_time=end)
        measured = self._metric_attributes()
        if message.model:
            measured["gen_ai.response.model"] = message.model
        self.telemetry.duration.record(e.latency_ms / 1000, measured)
        for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
            self.telemetry.token_usage.record(count, {**measured, "gen_ai.token.type": kind})
        self.response, self.attempt_start_ns = message, None

    def _model_error(self, e: ev.ModelErrorEvent) -> None:
        end = time.time_ns()
        error_type = model_error_type(e.message, transient=e.transient)
        self.attempts = e.attempt
        self._failed_call(end, error_type, e.message, e.attempt)
        # a retry starts once its wait is over
        retry = e.retry_in_ms
        self.attempt_start_ns = None if retry is None else end + int(retry * 1e6)

    def _failed_call(self, end: int, error_type: str, detail: str, attempt: int) -> None:
        start = min(end, self.attempt_start_ns if self.attempt_start_ns is not None else end)
        span = self._chat(start, self.step)
        span.set_attributes({"error.type": error_type, "pi.attempt": attempt})
        span.set_status(Status(StatusCode.ERROR, detail))
        span.end(end_time=end)
        failed = {**self._metric_attributes(), "error.type": error_type}
        self.telemetry.duration.record((end - start) / 1e9, failed)
        self.attempt_start_ns = None

    # -- what else happened, as events of the run's span --------------------------------

    def _guard(self, e: ev.GuardTriggered) -> None:
        self.guard = e.guard
        self._mark("pi.guard", {"pi.guard": e.guard})


def _prompt(ref: dict[str, Any]) -> dict[str, Any]:
    out = {}
    if ref.get("name"):
        out["pi.prompt.name"] = str(ref["name"])
    if ref.get("version") is not None:
        out["pi.prompt.version"] = str(ref["version"])
    return out


def _marker(name: str, fields: tuple[str, ...]) -> Callable[[RunSpans, Any], None]:
    """A handler adding event `name` to the run's span with these scalar fields of the
    Pi event (never free text: content stays off spans unless captured)."""

    def mark(spans: RunSpans, event: Any) -> None:
        spans._mark(name, {f"pi.{f}": getattr(event, f) for f in fields})

    return mark


_HANDLERS: dict[str, Callable[[RunSpans, Any], None]] = {
    "run_started": RunSpans._run_started,
    "run_finished": RunSpans._run_finished,
    "message": RunSpans._message,
    "model_request": RunSpans._model_request,
    "model_response": RunSpans._model_response,
    "model_error": RunSpans._model_error,
    "transition": RunSpans._transition,
    "tool_retry": RunSpans._tool_retry,
    "tool_result": RunSpans._tool_result,
    "job_started": RunSpans._tool_waits,
    "approval_requested": RunSpans._tool_waits,
    "guard": RunSpans._guard,
    "approval_granted": _marker("pi.approval_granted", ("tool_call_id", "name", "edited")),
    "approval_rejected": _marker("pi.approval_rejected", ("tool_call_id", "name")),
    "security_audit": _marker("pi.security_audit", ("tool_call_id", "name")),
    "guardrail_tripped": _marker("pi.guardrail_tripped", ("guardrail", "stage", "verdict", "tool")),
    "contract_check": _marker("pi.contract_check", ("contract", "attempt", "ok")),
    "route_chosen": _marker("pi.route_chosen", ("mode", "fallback")),
    "plan_created": _marker("pi.plan_created", ("revision", "fallback")),
    "replanned": _marker("pi.replanned", ("number", "replans")),
}
"""What each event kind does to the spans (kinds not named here change nothing)."""
