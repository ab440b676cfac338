"""Events on the wire: one adapter writes and reads them, and a trace keeps every line
of a run however it ends (its lines are buffered between step boundaries)."""

from __future__ import annotations

import asyncio
import json
import typing
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Discriminator, TypeAdapter

from pi_runtime import Agent, tool
from pi_runtime.messages import (
    AssistantMessage,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_runtime.models import ModelRequest, ModelResponse
from pi_runtime.observe import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    ChildRun,
    ContractChecked,
    Escalated,
    Event,
    GuardrailTripped,
    GuardTriggered,
    JobStarted,
    LoopPhase,
    MemoryRecalled,
    MemoryWritten,
    MessageAppended,
    ModelDelta,
    ModelErrorEvent,
    ModelRequested,
    ModelResponded,
    PlanCreated,
    PlannedStep,
    PlanStepFinished,
    PlanStepStarted,
    Replanned,
    RouteChosen,
    RunFinished,
    RunStarted,
    SecurityAudit,
    ToolResult,
    ToolRetried,
    ToolsSelected,
    Transition,
    event_from_dict,
    event_to_json,
    read_events,
    read_trace,
)
from pi_runtime.observe.trace import Recorder
from pi_runtime.testing import FunctionModel

CALL = ToolCall(id="c1", name="noop", raw='{"i":1}', arguments={"i": 1})
ANSWER = AssistantMessage(
    content=(TextBlock(text="a\u2028b", phase="commentary"), CALL),
    finish_reason="tool_calls",
    usage=Usage(input_tokens=10),
)
ONE_OF_EACH: list[Event] = [
    RunStarted(run_id="r", session_id="s", model="m", system="", tools=("noop",), limits={}),
    Transition(source="observe", target="think", step=1),
    MessageAppended(index=0, message=UserMessage(content="hi")),
    MessageAppended(index=1, message=UserMessage(content="fix it", origin="contract_repair")),
    MessageAppended(
        index=2, message=ToolResultMessage(tool_call_id="c1", name="noop", content="1")
    ),
    MessageAppended(index=3, message=ANSWER),
    ModelRequested(turn=1, step=1, message_count=1, tool_choice="auto", tools=("noop",)),
    ModelResponded(turn=1, step=1, message=ANSWER, raw={"id": "x"}, latency_ms=0.25),
    ModelErrorEvent(turn=1, step=1, message="busy", transient=True, attempt=1, retry_in_ms=5.0),
    ToolRetried(tool_call_id="c1", name="noop", attempt=1, error_kind="transient", retry_in_ms=1),
    ToolResult(tool_call_id="c1", name="noop", executed=True, is_error=False, attempts=1),
    GuardTriggered(guard="max_steps", detail="10 steps"),
    ContractChecked(contract="c", attempt=1, ok=False, errors=("missing 'a'",)),
    ToolsSelected(turn=1, method="all", selected=("noop",), scores={"noop": 0.5}),
    JobStarted(tool_call_id="c1", name="noop", job_id="j"),
    ApprovalRequested(tool_call_id="c1", name="noop", arguments={"i": 1}, fingerprint="ab"),
    ApprovalGranted(
        tool_call_id="c1", name="noop", fingerprint="ab", arguments={"i": 2}, edited=True
    ),
    ApprovalRejected(tool_call_id="c1", name="noop", fingerprint="ab", reason="不 — no"),
    ChildRun(
        tool_call_id="c1",
        name="noop",
        run_id="r2",
        trace="r2.jsonl",
        status="completed",
        stop_reason="final_answer",
        usage=Usage(input_tokens=3, output_tokens=1),
    ),
    RunStarted(
        run_id="r2",
        session_id="s2",
        model="m",
        system="",
        tools=(),
        limits={},
        parent_run_id="r",
        parent_call_id="c1",
    ),
    MessageAppended(
        index=4,
        message=ToolResultMessage(
            tool_call_id="c1", name="noop", content="1", usage=Usage(input_tokens=3)
        ),
    ),
    SecurityAudit(tool_call_id="c1", name="noop", detail="denied"),
    GuardrailTripped(
        guardrail="sql_select_only",
        stage="tool",
        verdict="deny",
        reason="`DROP` is not allowed",
        tool="run_sql",
        tool_call_id="c1",
        excerpt='{"sql": "DROP TABLE t"}',
    ),
    GuardrailTripped(guardrail="no_pii", stage="input", verdict="rewrite", reason="masked"),
    Escalated(hook="page_oncall", value={"ticket": "T-1"}),
    Escalated(hook="page_oncall", error="the hook raised RuntimeError: down"),
    PlanCreated(steps=(PlannedStep(goal="look \u2028up", tools=("noop",)),), revision=1),
    PlanStepStarted(number=1, total=2, goal="look up", tools=("noop",)),
    PlanStepFinished(number=1, outcome="step_limit", done=False, replan=True, reason="cut"),
    Replanned(number=1, reason="cut", replans=1, max_replans=2),
    RouteChosen(mode="plan", confidence=0.75),
    ModelDelta(turn=1, delta="a"),
    MemoryRecalled(
        scope="user:alice",
        via="prompt",
        method="embedding",
        fact_ids=("fact-1",),
        scores={"fact-1": 0.5},
        tokens=40,
        left_out=("fact-2",),
    ),
    MemoryWritten(scope="user:alice", via="end", fact_ids=("fact-1",), known=("fact-1",)),
    RunFinished(
        status="completed",
        stop_reason="final_answer",
        steps=1,
        output={"a": 1},
        usage=Usage(),
        metrics={"wall_ms": 1.5},
    ),
]


def test_every_event_class_is_in_the_union_once_with_kind_first() -> None:
    classes = typing.get_args(Event)
    kinds = [fields(cls)[0].default for cls in classes]

    assert all(fields(cls)[0].name == "kind" for cls in classes)
    assert len(set(kinds)) == len(kinds) == len(classes)
    assert {type(e) for e in ONE_OF_EACH} == set(classes)


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: e.kind)
def test_an_event_reads_back_as_itself_through_the_one_adapter(event: Event) -> None:
    line = event_to_json(event)

    assert line.startswith(b'{"kind":"%s"' % event.kind.encode())
    assert event_from_dict(json.loads(line)) == event


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: e.kind)
def test_an_event_is_written_as_the_union_adapter_writes_it(event: Event) -> None:
    union = TypeAdapter[Event](Annotated[Event, Discriminator("kind")])

    written = union.dump_json(event, fallback=str, warnings=False)

    # ANSWER's text holds a U+2028, which every trace line escapes
    assert event_to_json(event) == written.replace("\u2028".encode(), b"\\u2028")


def test_an_answer_written_in_its_response_and_its_message_lines_is_the_same_in_both() -> None:
    # the second line reuses the message's JSON from the first; the next message is new
    union = TypeAdapter[Event](Annotated[Event, Discriminator("kind")])
    later = AssistantMessage(content=(TextBlock(text="done"),))
    events: list[Event] = [
        ModelResponded(turn=2, step=3, message=ANSWER, raw=None, latency_ms=1.5),
        MessageAppended(index=4, message=ANSWER),
        MessageAppended(index=5, message=later),
        ModelResponded(turn=3, step=4, message=later, raw={"id": "y"}, latency_ms=2.0),
    ]

    for event in events:
        written = union.dump_json(event, fallback=str, warnings=False)
        assert event_to_json(event) == written.replace("\u2028".encode(), b"\\u2028")


def test_a_trace_line_is_byte_for_byte_the_line_written_before_the_adapter() -> None:
    # The line the hand-rolled writer produced for this event, kept verbatim.
    before = (
        '{"kind":"model_response","turn":1,"step":1,"message":{"content":[{"text":"a\\u2028b",'
        '"phase":"commentary","kind":"text"},{"id":"c1","name":"noop","raw":"{\\"i\\":1}",'
        '"arguments":{"i":1},"truncated":false,"kind":"tool_call"}],"finish_reason":'
        '"tool_calls","usage":{"input_tokens":10,"output_tokens":0,"cached_tokens":0},'
        '"model":null,"role":"assistant"},"raw":{"id":"x","n":[1,2.5]},"latency_ms":0.25,'
        '"first_tool_call_at_ms":null,"usage_source":"provider"}'
    )
    event = ModelResponded(
        turn=1, step=1, message=ANSWER, raw={"id": "x", "n": [1, 2.5]}, latency_ms=0.25
    )

    assert event_to_json(event).decode() == before


def test_a_plain_user_turn_is_written_without_its_default_origin() -> None:
    plain = json.loads(event_to_json(MessageAppended(index=0, message=UserMessage(content="hi"))))
    added = UserMessage(content="x", origin="tool_limit")

    assert plain["message"] == {"content": "hi", "role": "user"}
    assert json.loads(event_to_json(MessageAppended(index=0, message=added)))["message"] == {
        "content": "x",
        "origin": "tool_limit",
        "role": "user",
    }


def test_an_unknown_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="tool_finished"):
        event_from_dict({"kind": "tool_finished", "name": "x"})


def test_a_raw_response_no_json_can_spell_leaves_a_line_saying_so(tmp_path: Path) -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    recorder = Recorder(tmp_path, "run")
    recorder.emit(ModelResponded(turn=0, step=0, message=ANSWER, raw=cycle, latency_ms=0.0))
    recorder.emit(GuardTriggered(guard="g", detail="d"))
    recorder.close()

    first, second = read_trace(tmp_path / "run.jsonl")
    assert first["kind"] == "model_response"
    assert "cannot write a model_response event" in first["error"]
    assert (second["kind"], second["seq"]) == ("guard", 1)


def test_lines_are_held_until_a_step_begins(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path, "run")
    trace = tmp_path / "run.jsonl"

    recorder.emit(GuardTriggered(guard="g", detail="d"))
    held = trace.read_bytes()
    recorder.emit(Transition(source="observe", target="think", step=1))
    written = read_trace(trace)
    recorder.close()

    assert held == b""
    assert [e["kind"] for e in written] == ["guard", "transition"]


# --- every ending of a run leaves the whole trace -----------------------------------


@tool
async def noop(i: int) -> int:
    """Return i."""
    return i


def call_then_answer(request: ModelRequest) -> dict[str, Any]:
    if request.step == 0:
        return {"tool_calls": [{"name": "noop", "arguments": {"i": 1}}]}
    return {"text": "done"}


def test_a_completed_run_reads_back_as_the_events_it_emitted(tmp_path: Path) -> None:
    result = Agent(FunctionModel(call_then_answer), tools=[noop], trace_dir=tmp_path).run_sync("go")

    assert result.trace is not None
    assert read_events(result.trace) == list(result.events)


def test_a_bug_in_pi_mid_run_still_writes_every_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("pi_runtime.loop.transitions.reflect", broken)
    result = Agent(FunctionModel(call_then_answer), tools=[noop], trace_dir=tmp_path).run_sync("go")

    assert result.stop_reason == "internal_error"
    assert result.trace is not None
    kinds = [e["kind"] for e in read_trace(result.trace)]
    assert kinds == [e.kind for e in result.events]
    assert "tool_result" in kinds and kinds[-1] == "run_finished"


def test_a_bug_while_ending_a_failed_run_still_writes_the_events_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    # The step breaks after its tool ran, then closing the run breaks too.
    monkeypatch.setattr("pi_runtime.loop.transitions.reflect", broken)
    monkeypatch.setattr("pi_runtime.loop.lifecycle.compute_metrics", broken)
    agent = Agent(FunctionModel(call_then_answer), tools=[noop], trace_dir=tmp_path)

    with pytest.raises(RuntimeError, match="a bug"):
        agent.run_sync("go")

    (trace,) = tmp_path.glob("*.jsonl")
    kinds = [e["kind"] for e in read_trace(trace)]
    assert kinds[-3:] == ["tool_result", "message", "transition"]


def test_a_cancelled_run_writes_every_event_and_its_ending(tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait for ever."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    def call_wait(request: ModelRequest) -> ModelResponse | dict[str, Any]:
        return {"tool_calls": [{"name": "wait", "arguments": {}}]}

    agent = Agent(FunctionModel(call_wait), tools=[wait], trace_dir=tmp_path)

    async def cancel_mid_tool() -> None:
        task = asyncio.create_task(agent.run("go"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_mid_tool())

    (trace,) = tmp_path.glob("*.jsonl")
    events = read_trace(trace)
    assert "model_response" in [e["kind"] for e in events]
    assert (events[-1]["kind"], events[-1]["stop_reason"]) == ("run_finished", "cancelled")


def test_a_lines_t_ms_is_spelled_as_the_float_of_its_microseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # whole ms and a table of decimals stand in for repr(µs / 1000): the same spelling
    from pi_runtime.observe import trace

    recorder = Recorder(tmp_path, "run")
    writer = recorder.writer
    assert writer is not None
    microseconds = [0, 1, 10, 100, 500, 999, 1000, 1001, 12_340, 3_600_000_123, 86_400_000_000]
    for us in microseconds:
        monkeypatch.setattr(trace.time, "perf_counter", lambda us=us: writer._t0 + us / 1e6)
        recorder.emit(GuardTriggered(guard="g", detail="d"))
    recorder.close()

    lines = (tmp_path / "run.jsonl").read_bytes().splitlines()
    spelled = [line.rsplit(b'"t_ms":', 1)[1].rstrip(b"}") for line in lines]
    assert spelled == [repr(round(us) / 1000).encode() for us in microseconds]


def test_every_transition_line_is_the_union_adapters() -> None:
    # transitions are written as a format, four a turn: the same bytes as pydantic's
    union = TypeAdapter[Event](Annotated[Event, Discriminator("kind")])
    phases = typing.get_args(LoopPhase)

    for source in phases:
        for target in phases:
            for step in (0, 7, 10**12):
                event = Transition(source=source, target=target, step=step)
                assert event_to_json(event) == union.dump_json(event)
