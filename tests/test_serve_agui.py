"""Pi's run events as AG-UI events: the order a client relies on, each Pi outcome's
terminal event, and the events the package's own types validate (no server here)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ag_ui.core import Event as AguiEvent
from pydantic import TypeAdapter

from pi_runtime import Agent, tool
from pi_runtime.loop import RunResult
from pi_runtime.messages import AssistantMessage, TextBlock, ToolCall, Usage
from pi_runtime.observe import (
    MessageAppended,
    ModelDelta,
    ModelErrorEvent,
    PlanStepFinished,
    PlanStepStarted,
    RunStarted,
    Transition,
)
from pi_runtime.server.agui import APPROVAL_REASON, AguiMapper
from pi_runtime.testing import ScriptedModel, function_call, text

ADAPTER: TypeAdapter[Any] = TypeAdapter(AguiEvent)


@tool
def lookup(order_id: str) -> dict[str, object]:
    """An order.

    Args:
        order_id: the order.
    """
    return {"order_id": order_id, "total": 80}


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id: the order.
    """
    return "refunded"


def mapped(agent: Agent, prompt: str) -> tuple[list[dict[str, Any]], RunResult]:
    """Run `agent` streaming, map every event; the AG-UI events as wire JSON."""

    async def go() -> tuple[list[Any], RunResult]:
        mapper = AguiMapper("thread-1", approvals_path="/v1/sessions/thread-1/approvals/{call_id}")
        out: list[Any] = []
        stream = agent.run_stream(prompt)
        async for event in stream:
            out += mapper.feed(event)
        assert stream.result is not None
        out += mapper.finish(stream.result)
        return out, stream.result

    events, result = asyncio.run(go())
    return wired(events), result


def wired(events: list[Any]) -> list[dict[str, Any]]:
    """`events` as wire JSON, each one the protocol's own types accept, in an order its
    event verifier accepts."""
    wire = [e.model_dump(mode="json", by_alias=True) for e in events]
    for data in wire:
        ADAPTER.validate_python(data)
    assert_agui_order(wire)
    return wire


def assert_agui_order(events: list[dict[str, Any]]) -> None:
    """AG-UI's ordering rules: a message or call id starts once, its content or arguments
    come while it is open, a text message ends before a tool call starts, a call ends
    before text starts, and nothing is open when the run finishes."""
    kinds = {"TEXT_MESSAGE": "messageId", "TOOL_CALL": "toolCallId"}
    opened: dict[str, set[str]] = {kind: set() for kind in kinds}
    seen: set[str] = set()
    for event in events:
        family, _, part = event["type"].rpartition("_")
        if family not in kinds:
            if part in ("FINISHED", "ERROR") and family == "RUN":
                assert not any(opened.values()), opened
            continue
        key = event[kinds[family]]
        if part == "START":
            other = next(kind for kind in kinds if kind != family)
            assert not opened[other], f"{event['type']} inside open {other}s {opened[other]}"
            assert key not in seen, event
            seen.add(key)
            opened[family].add(key)
        elif part in ("CONTENT", "ARGS", "END"):
            assert key in opened[family], event
            if part == "END":
                opened[family].remove(key)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_a_tool_run_streams_started_steps_calls_result_text_and_finished_in_order() -> None:
    model = ScriptedModel(
        [function_call("lookup", {"order_id": "A-1"}), text("Order A-1 totals 80.")]
    )
    events, result = mapped(Agent(model, tools=[lookup], trace_dir=False), "total of A-1?")

    assert types(events) == [
        "RUN_STARTED",
        "STEP_STARTED",  # observe
        "STEP_FINISHED",
        "STEP_STARTED",  # think
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STEP_FINISHED",
        "STEP_STARTED",  # act
        "TOOL_CALL_RESULT",
        "STEP_FINISHED",
        "STEP_STARTED",  # reflect
        "STEP_FINISHED",
        "STEP_STARTED",  # observe
        "STEP_FINISHED",
        "STEP_STARTED",  # think
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    assert [e["stepName"] for e in events if e["type"] == "STEP_STARTED"] == [
        "observe",
        "think",
        "act",
        "reflect",
        "observe",
        "think",
    ]
    started, finished = events[0], events[-1]
    assert started["threadId"] == finished["threadId"] == "thread-1"
    assert started["runId"] == finished["runId"] == result.run_id
    call = next(e for e in events if e["type"] == "TOOL_CALL_START")
    args = next(e for e in events if e["type"] == "TOOL_CALL_ARGS")
    answer = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert call["toolCallName"] == "lookup" and args["delta"] == '{"order_id":"A-1"}'
    assert answer["toolCallId"] == call["toolCallId"] and '"total":80' in answer["content"]
    streamed = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert streamed == "Order A-1 totals 80."
    assert finished["outcome"] == {"type": "success"}
    assert finished["result"]["status"] == "completed" and "messages" not in finished["result"]
    assert finished["result"]["session_id"] == "thread-1"
    assert finished["usage"][0]["inputTokens"] == result.usage.input_tokens


def test_an_approval_pause_finishes_with_one_interrupt_per_waiting_call() -> None:
    model = ScriptedModel([function_call("refund", {"order_id": "A-1"})])
    events, result = mapped(Agent(model, tools=[refund], trace_dir=False), "refund A-1")

    assert result.stop_reason == "awaiting_approval"
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    outcome = finished["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    pending = result.pending_approvals[0]
    assert interrupt["id"] == interrupt["toolCallId"] == pending.call_id
    assert interrupt["reason"] == APPROVAL_REASON
    assert interrupt["metadata"]["fingerprint"] == pending.fingerprint
    assert interrupt["metadata"]["decide"] == f"/v1/sessions/thread-1/approvals/{pending.call_id}"
    assert interrupt["responseSchema"]["required"] == ["decision"]
    # the call was announced, and (not run) has no result
    assert "TOOL_CALL_START" in types(events) and "TOOL_CALL_RESULT" not in types(events)


def test_a_failed_run_ends_with_run_error_carrying_its_stop_reason() -> None:
    model = ScriptedModel([])  # asking past the script's end is a model error
    events, result = mapped(Agent(model, trace_dir=False), "hello")

    assert result.status == "failed"
    assert types(events)[0] == "RUN_STARTED" and types(events)[-1] == "RUN_ERROR"
    assert "RUN_FINISHED" not in types(events)
    assert events[-1]["code"] == result.stop_reason
    assert events[-1]["metadata"]["run_id"] == result.run_id


def test_a_cancelled_run_finishes_with_the_cancelled_outcome() -> None:
    mapper = AguiMapper("t")
    mapper.feed(started())
    result = finished_result(status="stopped", stop_reason="cancelled")

    *closing, finished = [e.model_dump(by_alias=True) for e in mapper.finish(result)]
    assert [e["type"] for e in closing] == ["STEP_FINISHED"]  # observe, open since the start
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"] == {"type": "cancelled"}


def test_a_retried_answer_streams_its_call_again_under_the_same_id() -> None:
    # a server numbering calls anew each answer (`call_0`) retried after a reset: the
    # retry's call was taken for the failed one (already ended) and never sent
    mapper = AguiMapper("t")
    out = mapper.feed(started())
    piece = {"turn": 0, "channel": "tool_call", "tool_call_id": "call_0"}
    out += mapper.feed(ModelDelta(**piece, delta='{"order_id": "O-', name="place_order"))
    out += mapper.feed(ModelErrorEvent(turn=0, step=1, message="reset", transient=True, attempt=1))
    out += mapper.feed(ModelDelta(**piece, delta='{"order_id": "O-7"}', name="place_order"))
    call = ToolCall(id="call_0", name="place_order", raw='{"order_id": "O-7"}')
    out += mapper.feed(MessageAppended(index=1, message=AssistantMessage(content=(call,))))
    wire = [e.model_dump(by_alias=True) for e in out]

    starts = [e for e in wire if e["type"] == "TOOL_CALL_START"]
    ends = [e for e in wire if e["type"] == "TOOL_CALL_END"]
    assert [e["toolCallId"] for e in starts] == ["call_0", "call_0"] and len(ends) == 2
    # after the retry's start, the retry's whole arguments
    retried = wire.index(starts[1])
    sent = [e["delta"] for e in wire[retried:] if e["type"] == "TOOL_CALL_ARGS"]
    assert "".join(sent) == '{"order_id": "O-7"}'


def test_a_model_error_closes_the_streamed_text_so_the_retry_opens_a_new_message() -> None:
    mapper = AguiMapper("t")
    out = mapper.feed(started())
    out += mapper.feed(ModelDelta(turn=0, delta="Hel"))
    out += mapper.feed(ModelErrorEvent(turn=0, step=1, message="reset", transient=True, attempt=1))
    out += mapper.feed(ModelDelta(turn=0, delta="Hello"))
    message = AssistantMessage(content=(TextBlock(text="Hello"),))
    out += mapper.feed(MessageAppended(index=1, message=message))
    wire = [e.model_dump(by_alias=True) for e in out]

    starts = [e["messageId"] for e in wire if e["type"] == "TEXT_MESSAGE_START"]
    ends = [e["messageId"] for e in wire if e["type"] == "TEXT_MESSAGE_END"]
    assert len(starts) == 2 and starts[0] != starts[1] and ends == starts
    # the whole message did not repeat the text that was streamed
    assert [e["delta"] for e in wire if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["Hel", "Hello"]


def test_plan_steps_are_steps_and_everything_open_is_closed_before_the_end() -> None:
    mapper = AguiMapper("t")
    out = mapper.feed(started())
    out += mapper.feed(PlanStepStarted(number=1, total=2, goal="look it up"))
    out += mapper.feed(Transition(source="observe", target="think", step=0))
    out += mapper.feed(
        PlanStepFinished(number=1, outcome="answered", done=False, replan=False, reason="")
    )
    out += mapper.feed(PlanStepStarted(number=2, total=2, goal="answer"))
    out += mapper.feed(ModelDelta(turn=1, delta="partial"))
    out += mapper.finish(finished_result(status="stopped", stop_reason="max_steps"))
    wire = [e.model_dump(by_alias=True) for e in out]

    opened = [e["stepName"] for e in wire if e["type"] == "STEP_STARTED"]
    closed = [e["stepName"] for e in wire if e["type"] == "STEP_FINISHED"]
    assert "plan step 1" in opened and "plan step 2" in opened
    assert sorted(opened) == sorted(closed)
    assert [e["type"] for e in wire][-2:] == ["STEP_FINISHED", "RUN_FINISHED"]
    assert sum(e["type"] == "TEXT_MESSAGE_END" for e in wire) == 1


def test_nothing_is_sent_before_run_started_or_after_the_end() -> None:
    mapper = AguiMapper("t")
    assert mapper.feed(ModelDelta(turn=0, delta="early")) == []
    mapper.feed(started())
    assert mapper.feed(started("run-child")) == []  # a run inside this one is not a new run
    mapper.finish(finished_result())
    assert mapper.feed(ModelDelta(turn=0, delta="late")) == []
    assert mapper.finish(finished_result()) == [] and mapper.fail("x") == []


def test_a_server_failure_ends_the_stream_with_run_error_and_closes_what_is_open() -> None:
    mapper = AguiMapper("t")
    mapper.feed(started())
    mapper.feed(ModelDelta(turn=0, delta="Hi"))
    wire = [e.model_dump(by_alias=True) for e in mapper.fail("the store failed", "unavailable")]

    assert [e["type"] for e in wire] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_ERROR"]
    assert wire[-1]["code"] == "unavailable"


@pytest.mark.parametrize("status", ["completed", "awaiting"])
def test_a_decision_that_continued_nothing_still_opens_with_run_started(status: str) -> None:
    mapper = AguiMapper("t")
    out = mapper.finish(finished_result(status=status, stop_reason="awaiting_tool"))
    assert out[0].model_dump(by_alias=True)["type"] == "RUN_STARTED"


def started(run_id: str = "run-1") -> RunStarted:
    return RunStarted(run_id=run_id, session_id="s", model="m", system="", tools=(), limits={})


def finished_result(*, status: str = "completed", stop_reason: str = "final_answer") -> RunResult:
    return RunResult(
        status=status,  # type: ignore[arg-type]
        stop_reason=stop_reason,  # type: ignore[arg-type]
        output=None,
        steps=1,
        usage=Usage(),
        metrics={},
        messages=(),
        trace=None,
        run_id="run-1",
        session_id="s",
    )


# --- tool calls streamed as they arrive ------------------------------------------------


def call_delta(call_id: str, delta: str = "", name: str | None = None) -> ModelDelta:
    return ModelDelta(turn=0, delta=delta, channel="tool_call", tool_call_id=call_id, name=name)


def calling(raw: str, text_before: str = "") -> MessageAppended:
    content: list[Any] = [TextBlock(text=text_before)] if text_before else []
    content.append(ToolCall(id="c1", name="lookup", raw=raw, arguments=None))
    return MessageAppended(index=1, message=AssistantMessage(content=tuple(content)))


def test_a_streamed_call_opens_at_its_first_delta_and_the_message_adds_what_is_left() -> None:
    mapper = AguiMapper("t")
    mapper.feed(started())

    opened = mapper.feed(call_delta("c1", name="lookup"))
    piece = mapper.feed(call_delta("c1", '{"order_id":'))
    # the provider's last piece never came as a delta: the whole message holds it
    closed = mapper.feed(calling('{"order_id":"A-1"}'))

    assert [e.type for e in opened] == ["TOOL_CALL_START"]
    assert opened[0].tool_call_name == "lookup"
    assert [(e.type, e.delta) for e in piece] == [("TOOL_CALL_ARGS", '{"order_id":')]
    assert [e.type for e in closed] == ["TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert piece[0].delta + closed[0].delta == '{"order_id":"A-1"}'
    wired([*opened, *piece, *closed])


def test_text_streamed_before_a_call_ends_before_the_call_starts_under_its_message() -> None:
    mapper = AguiMapper("t")
    out = mapper.feed(started())
    out += mapper.feed(ModelDelta(turn=0, delta="Looking it up."))
    out += mapper.feed(call_delta("c1", name="lookup"))
    out += mapper.feed(call_delta("c1", '{"order_id":"A-1"}'))
    out += mapper.feed(calling('{"order_id":"A-1"}', text_before="Looking it up."))

    events = [e for e in wired(out) if e["type"] != "STEP_STARTED"][1:]
    assert types(events) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    assert events[3]["parentMessageId"] == events[0]["messageId"]
    assert events[4]["delta"] == '{"order_id":"A-1"}'  # not sent again with the message


def test_text_after_a_streamed_call_ends_the_call_first_and_nothing_is_sent_twice() -> None:
    mapper = AguiMapper("t")
    out = mapper.feed(started())
    out += mapper.feed(call_delta("c1", '{"order_id":"A-1"}', name="lookup"))
    out += mapper.feed(ModelDelta(turn=0, delta="Done."))
    out += mapper.feed(calling('{"order_id":"A-1"}', text_before="Done."))
    out += mapper.finish(finished_result())  # closes the run: nothing left open

    events = wired(out)
    assert types(events).count("TOOL_CALL_START") == types(events).count("TOOL_CALL_END") == 1
    assert types(events).count("TEXT_MESSAGE_START") == 1
    ended = types(events).index("TOOL_CALL_END")
    assert ended < types(events).index("TEXT_MESSAGE_START")


def test_a_call_delta_without_an_id_waits_for_the_whole_message() -> None:
    mapper = AguiMapper("t")
    out = mapper.feed(started())
    assert mapper.feed(ModelDelta(turn=0, delta='{"order_id":', channel="tool_call")) == []
    out += mapper.feed(calling('{"order_id":"A-1"}'))
    assert [e.type for e in out][-3:] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    wired(out)


def test_a_model_error_ends_a_call_being_streamed() -> None:
    mapper = AguiMapper("t")
    out = mapper.feed(started())
    out += mapper.feed(call_delta("c1", '{"order', name="lookup"))
    out += mapper.feed(ModelErrorEvent(turn=0, step=1, message="reset", transient=True, attempt=1))
    out += mapper.feed(call_delta("c2", '{"order_id":"A-1"}', name="lookup"))
    assert types(wired(out)).count("TOOL_CALL_END") == 1  # c1 ended; c2 still open


@pytest.mark.parametrize(
    "events",
    [
        [("TEXT_MESSAGE_START", "m1"), ("TOOL_CALL_START", "c1")],  # text still open
        [("TOOL_CALL_START", "c1"), ("TEXT_MESSAGE_START", "m1")],  # call still open
        [("TOOL_CALL_ARGS", "c1")],  # arguments of a call never started
        [("TOOL_CALL_START", "c1"), ("TOOL_CALL_END", "c1"), ("TOOL_CALL_START", "c1")],
        [("TEXT_MESSAGE_START", "m1"), ("RUN_FINISHED", "")],  # finished with text open
    ],
)
def test_the_order_check_refuses_what_ag_ui_refuses(events: list[tuple[str, str]]) -> None:
    wire = [{"type": kind, "messageId": key, "toolCallId": key} for kind, key in events]
    with pytest.raises(AssertionError):
        assert_agui_order(wire)
