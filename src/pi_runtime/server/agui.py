"""Pi's run events as AG-UI events (the `ag-ui-protocol` package's types).

    mapper = AguiMapper(thread_id="s1")
    for event in pi_events:
        for out in mapper.feed(event):
            send(encoder.encode(out))
    for out in mapper.finish(result):      # RUN_FINISHED or RUN_ERROR, always last
        send(encoder.encode(out))

| Pi | AG-UI |
|---|---|
| `run_started` | `RUN_STARTED` (threadId = the session, runId = the run) |
| `transition` (a loop phase) | `STEP_FINISHED` of the phase left, `STEP_STARTED` of the next (`observe` opens with the run) |
| `plan_step_started` / `_finished` | `STEP_STARTED` / `STEP_FINISHED` `plan step N` |
| `model_delta` (text) | `TEXT_MESSAGE_START` once, then `TEXT_MESSAGE_CONTENT` |
| `model_delta` (tool call) | `TOOL_CALL_START` on a call's first delta, then `TOOL_CALL_ARGS` per piece of its arguments |
| assistant `message` | `TEXT_MESSAGE_END` (or the whole text, when nothing streamed), then per tool call `TOOL_CALL_END` — after `TOOL_CALL_START` / `TOOL_CALL_ARGS` (its raw JSON) for a call that was not streamed |
| tool `message` | `TOOL_CALL_RESULT` |
| the `RunResult` | `RUN_FINISHED`: outcome `interrupt` (one per call awaiting approval), `cancelled`, or `success` with the result (no messages) — or `RUN_ERROR` for a `failed` run |

A streamed call stays open until the model's message is whole: what the final arguments
add to the streamed ones is sent then, before `TOOL_CALL_END`. Calls go out under the ids
the run keeps (`agui_calls`): one whose streamed id the run replaces is sent whole with
the message. As AG-UI's event order asks, a text message is ended before a tool call
starts, and open calls are ended before text starts again (in a new message). A model
error closes what is being streamed, so a retried call opens a new message. Thinking is
not sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from ..loop import RunResult
from ..messages import AssistantMessage, ToolResultMessage
from ..observe import (
    Event,
    MessageAppended,
    ModelDelta,
    ModelErrorEvent,
    PlanStepFinished,
    PlanStepStarted,
    RunStarted,
    Transition,
)
from .agui_calls import StreamedCalls
from .agui_interrupts import APPROVAL_REASON, DECISION_SCHEMA, interrupt
from .config import public_model

__all__ = ["APPROVAL_REASON", "DECISION_SCHEMA", "PROTOCOL_VERSION", "AguiMapper", "event_type"]

PROTOCOL_VERSION = "1.0"


class AguiMapper:
    """Turns one run's Pi events into AG-UI events, in a well-formed order.

    Args:
        thread_id: the session's id as the client knows it.
        approvals_path: where a waiting call is decided, `{call_id}` filled in per call.
        clock: seconds since the epoch (event timestamps are milliseconds).
        call_ids: the ids of the calls in the conversation before this run (the run
            replaces a streamed id that is one of them).
        trace_path: where the run's trace is served, `{run_id}` filled in: the result's
            `trace` (None: null; the trace file's path is the server's, never sent).
    """

    def __init__(
        self,
        thread_id: str,
        *,
        approvals_path: str | None = None,
        clock: Callable[[], float] = time.time,
        call_ids: Iterable[str] = (),
        trace_path: str | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.approvals_path = approvals_path
        self.trace_path = trace_path
        self.clock = clock
        self.run_id: str | None = None
        self.model: str | None = None
        self.ended = False
        self._steps: list[str] = []  # open steps, oldest first
        self._phase: str | None = None  # the loop phase open as a step
        self._text: str | None = None  # the text message being streamed
        self._message: str | None = None  # the assistant message being received
        self._texted = False  # the message's text has been streamed (or part of it)
        self._calls = StreamedCalls(call_ids)
        self._messages = 0
        self._results: set[str] = set()

    # Events as the run makes them

    def feed(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events `event` stands for (often none)."""
        if self.ended:
            return []
        if isinstance(event, RunStarted):
            return self.begin(event.run_id, event.model)
        if self.run_id is None:
            return []  # nothing goes before RUN_STARTED
        if isinstance(event, Transition):
            return self._enter(event.target)
        if isinstance(event, PlanStepStarted):
            return self._open_step(f"plan step {event.number}")
        if isinstance(event, PlanStepFinished):
            return self._close_step(f"plan step {event.number}")
        if isinstance(event, ModelDelta):
            return self._delta(event)
        if isinstance(event, ModelErrorEvent):
            out = self._end_text() + self._end_calls()
            self._calls.abandon()
            self._message, self._texted = None, False
            return out
        if isinstance(event, MessageAppended):
            if isinstance(event.message, AssistantMessage):
                return self._assistant(event.message)
            if isinstance(event.message, ToolResultMessage):
                return self.tool_result(event.message)
        return []

    def tool_result(self, message: ToolResultMessage) -> list[BaseEvent]:
        """`TOOL_CALL_RESULT` for `message` (once per call), e.g. an approved call's result
        stored before its continuation started."""
        if self.ended or self.run_id is None or message.tool_call_id in self._results:
            return []
        self._results.add(message.tool_call_id)
        return [
            ToolCallResultEvent(
                message_id=f"{message.tool_call_id}-result",
                tool_call_id=message.tool_call_id,
                content=message.content,
                role="tool",
                timestamp=self._now(),
            )
        ]

    # The end

    def finish(self, result: RunResult) -> list[BaseEvent]:
        """The closing events for `result`: what is still open, then `RUN_FINISHED`, or
        `RUN_ERROR` for a failed run."""
        if self.ended:
            return []
        out = self.begin(result.run_id) if self.run_id is None else []
        out += self._close_all()
        self.ended = True
        usage = [
            TokenUsage(
                model=public_model(self.model),
                input_tokens=result.usage.input_tokens,
                output_tokens=result.usage.output_tokens,
                cached_input_tokens=result.usage.cached_tokens,
                total_tokens=result.usage.total_tokens,
            )
        ]
        run_id = self.run_id or result.run_id
        if result.status == "failed":
            message = result.error or f"the run failed: {result.stop_reason}"
            meta = {"status": result.status, "stop_reason": result.stop_reason, "run_id": run_id}
            out.append(
                RunErrorEvent(
                    message=message,
                    code=result.stop_reason,
                    usage=usage,
                    metadata=meta,
                    timestamp=self._now(),
                )
            )
            return out
        outcome: Any
        if result.status == "awaiting" and result.pending_approvals:
            outcome = RunFinishedInterruptOutcome(
                interrupts=[interrupt(p, self.approvals_path) for p in result.pending_approvals]
            )  # fmt: skip
        elif result.stop_reason == "cancelled":
            outcome = RunFinishedCancelledOutcome()
        else:
            outcome = RunFinishedSuccessOutcome()
        out.append(
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=run_id,
                result=self.summary(result),
                outcome=outcome,
                usage=usage,
                timestamp=self._now(),
            )
        )
        return out

    def fail(self, message: str, code: str = "internal_error") -> list[BaseEvent]:
        """`RUN_ERROR` for a run that ended without a result (the server failed)."""
        if self.ended:
            return []
        out = self._close_all()
        self.ended = True
        out.append(RunErrorEvent(message=message, code=code, timestamp=self._now()))
        return out

    def summary(self, result: RunResult) -> dict[str, Any]:
        """The `RunResult` JSON without the conversation, under the client's session id,
        its `trace` where the trace is served (`trace_path`), not the file's path."""
        data = result.to_dict()
        data.pop("messages", None)
        data["session_id"] = self.thread_id
        data["trace"] = (
            self.trace_path.format(run_id=result.run_id)
            if result.trace is not None and self.trace_path is not None
            else None
        )
        return data

    def begin(self, run_id: str, model: str | None = None) -> list[BaseEvent]:
        """`RUN_STARTED` (and the first step) unless the run has begun; the stream of a
        decision that continued nothing begins here, under the waiting run's id."""
        if self.run_id is not None:
            return []  # a run started inside this one (a sub-agent) is not a new run here
        self.run_id, self.model = run_id, model
        started = RunStartedEvent(
            thread_id=self.thread_id,
            run_id=run_id,
            protocol_version=PROTOCOL_VERSION,
            timestamp=self._now(),
        )
        return [started, *self._enter("observe")]

    # Pieces

    def _enter(self, phase: str) -> list[BaseEvent]:
        """Close the phase left and open `phase` (a continuation re-enters `observe`)."""
        if phase == self._phase:
            return []
        out = self._close_step(self._phase) if self._phase is not None else []
        self._phase = None
        if phase != "done":
            self._phase = phase
            out += self._open_step(phase)
        return out

    def _open_step(self, name: str) -> list[BaseEvent]:
        self._steps.append(name)
        return [StepStartedEvent(step_name=name, timestamp=self._now())]

    def _close_step(self, name: str) -> list[BaseEvent]:
        if name not in self._steps:
            return []
        self._steps.remove(name)
        return [StepFinishedEvent(step_name=name, timestamp=self._now())]

    def _close_all(self) -> list[BaseEvent]:
        out = self._end_text() + self._end_calls()
        self._phase = None
        while self._steps:
            out += self._close_step(self._steps[-1])
        return out

    def _new_message_id(self) -> str:
        self._messages += 1
        return f"{self.run_id}-m{self._messages}"

    def _delta(self, event: ModelDelta) -> list[BaseEvent]:
        if event.channel == "tool_call":
            return self._call_delta(event)
        if event.channel != "text" or not event.delta:
            return []
        out = self._end_calls()  # a call is ended before text starts
        if self._text is None:
            if self._message is None or self._texted:
                self._message = self._new_message_id()
            self._text, self._texted = self._message, True
            out.append(
                TextMessageStartEvent(
                    message_id=self._text, role="assistant", timestamp=self._now()
                )
            )
        out.append(
            TextMessageContentEvent(message_id=self._text, delta=event.delta, timestamp=self._now())
        )
        return out

    def _call_delta(self, event: ModelDelta) -> list[BaseEvent]:
        """A piece of a tool call: its first opens it (after ending any text message)."""
        call_id = event.tool_call_id
        if not call_id:
            return []  # a call not named yet is sent whole with the message
        out: list[BaseEvent] = []
        if event.name is not None and self._calls.first(call_id, event.name):
            out += self._end_text()
            if self._message is None:
                self._message = self._new_message_id()
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call_id,
                    tool_call_name=event.name,
                    parent_message_id=self._message,
                    timestamp=self._now(),
                )
            )
        if event.delta and self._calls.piece(call_id, event.delta):
            out.append(
                ToolCallArgsEvent(tool_call_id=call_id, delta=event.delta, timestamp=self._now())
            )
        return out

    def _end_calls(self) -> list[BaseEvent]:
        """End the streamed calls still open."""
        return self._calls.end_open(self._now())

    def _end_text(self) -> list[BaseEvent]:
        if self._text is None:
            return []
        message_id, self._text = self._text, None
        return [TextMessageEndEvent(message_id=message_id, timestamp=self._now())]

    def _assistant(self, message: AssistantMessage) -> list[BaseEvent]:
        out = self._end_text()
        message_id = self._message or self._new_message_id()
        if not self._texted and message.text:
            if self._calls.open:  # streamed calls are open: text may not start inside them
                out += self._end_calls()
            now = self._now()
            out += [
                TextMessageStartEvent(message_id=message_id, role="assistant", timestamp=now),
                TextMessageContentEvent(message_id=message_id, delta=message.text, timestamp=now),
                TextMessageEndEvent(message_id=message_id, timestamp=now),
            ]
        out += self._calls.whole(message, message_id, self._now())
        self._message, self._texted = None, False
        return out

    def _now(self) -> int:
        return int(self.clock() * 1000)


def event_type(event: BaseEvent) -> str:
    """The wire name of `event`'s type (`RUN_STARTED`, …)."""
    kind = event.type
    return kind.value if isinstance(kind, EventType) else str(kind)
