"""The trace viewer's timeline, computed from real traces: rows, cumulative tokens and
time, tool calls (errors first), model requests, the preamble metrics, plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pi_runtime import Agent, RunResult, tool
from pi_runtime.observe import read_trace
from pi_runtime.server.timeline import PREAMBLE_METRICS, timeline
from pi_runtime.server.timeline_plans import MAX_TEXT
from pi_runtime.testing import ScriptedModel, function_call, parallel_calls, text
from serve_support import REPO


@tool
def lookup(order_id: str) -> dict[str, Any]:
    """An order.

    Args:
        order_id: the order.
    """
    return {"order_id": order_id, "total": 80}


@tool
def cancel(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id: the order.
    """
    raise PermissionError(f"order {order_id} shipped already")


def two_step_run(tmp_path: Path) -> tuple[RunResult, list[dict[str, Any]]]:
    model = ScriptedModel(
        [
            parallel_calls(
                function_call("lookup", {"order_id": "A-1"}),
                function_call("cancel", {"order_id": "A-1"}),
                text="Checking.",
                usage={"input_tokens": 120, "output_tokens": 30},
            ),
            text(
                "A-1 totals 80 and cannot be cancelled.",
                usage={"input_tokens": 200, "output_tokens": 12},
            ),
        ]
    )
    result = Agent(model, tools=[lookup, cancel], trace_dir=tmp_path).run_sync("Cancel A-1")
    assert result.trace is not None
    return result, read_trace(result.trace)


def kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


def test_rows_follow_the_trace_with_running_totals_of_tokens_and_time(tmp_path: Path) -> None:
    result, events = two_step_run(tmp_path)
    view = timeline(events)
    rows = view["rows"]

    models = [r for r in rows if r["kind"] == "model"]
    responses = kinds(events, "model_response")
    assert [(r["input_tokens"], r["output_tokens"]) for r in models] == [
        (e["message"]["usage"]["input_tokens"], e["message"]["usage"]["output_tokens"])
        for e in responses
    ]
    assert [r["stop"] for r in models] == ["tool_calls", "stop"]
    assert [r["ms"] for r in models] == [e["latency_ms"] for e in responses]
    assert [r["step"] for r in models] == [1, 2]
    assert all(r["phase"] == "think" for r in models)

    tools = [r for r in rows if r["kind"] == "tool"]
    results = kinds(events, "tool_result")
    assert [(r["name"], r["call_id"], r["ms"]) for r in tools] == [
        (e["name"], e["tool_call_id"], e["duration_ms"]) for e in results
    ]
    assert {r["name"]: r["status"] for r in tools} == {
        "lookup": "ok",
        "cancel": "permission_denied",
    }
    assert all(r["phase"] == "act" and r["step"] == 1 for r in tools)

    running_in = running_out = 0
    for row in rows[:-1]:
        running_in += row["input_tokens"] or 0
        running_out += row["output_tokens"] or 0
        assert (row["cum_input_tokens"], row["cum_output_tokens"]) == (running_in, running_out)
    times = [r["cum_ms"] for r in rows]
    assert times == sorted(times) and times[-1] == kinds(events, "run_finished")[0]["t_ms"]

    done = rows[-1]
    assert (done["kind"], done["phase"], done["stop"]) == ("done", "done", result.stop_reason)
    assert done["cum_input_tokens"] == result.usage.input_tokens == 320
    assert done["cum_output_tokens"] == result.usage.output_tokens == 42
    assert view["totals"]["input_tokens"] == 320 and view["totals"]["output_tokens"] == 42
    assert view["totals"]["model_calls"] == 2 and view["totals"]["tool_calls"] == 2
    assert view["totals"]["tool_errors"] == 1
    assert view["finished"]["status"] == "completed"
    assert view["finished"]["output"] == result.output


def test_tool_calls_carry_arguments_and_results_errors_first(tmp_path: Path) -> None:
    _, events = two_step_run(tmp_path)
    calls = timeline(events)["tool_calls"]

    assert [c["name"] for c in calls] == ["cancel", "lookup"]  # the error first
    failed, ok = calls
    assert failed["is_error"] and failed["error_kind"] == "permission_denied"
    assert failed["arguments"] == {"order_id": "A-1"}
    assert json.loads(failed["result"])["kind"] == "permission_denied"
    assert "shipped already" in failed["result"]
    assert ok["status"] == "ok" and ok["arguments"] == {"order_id": "A-1"}
    assert json.loads(ok["result"]) == {"order_id": "A-1", "total": 80}


def test_model_requests_show_context_report_prompt_version_and_tools_offered(
    tmp_path: Path,
) -> None:
    _, events = two_step_run(tmp_path)
    requests = kinds(events, "model_request")
    calls = timeline(events)["model_calls"]

    assert len(calls) == len(requests) == 2
    for call, request in zip(calls, requests, strict=True):
        assert call["context"] == request["context"] and call["context"]["tokens"]["system"] > 0
        assert call["prompt"] == request["prompt"] and call["prompt"]["version"] == 1
        assert call["tools"] == ["lookup", "cancel"]
        assert call["counted_input_tokens"] == request["input_tokens"]
    assert calls[0]["tool_calls"] == ["lookup", "cancel"] and calls[0]["text"] == "Checking."
    assert calls[1]["finish_reason"] == "stop"


def test_the_four_preamble_metrics_are_the_runs(tmp_path: Path) -> None:
    result, events = two_step_run(tmp_path)
    metrics = timeline(events)["metrics"]
    assert metrics == {k: result.metrics[k] for k in PREAMBLE_METRICS}
    assert metrics["mixed_text_tool_message_rate"] == 1.0  # "Checking." beside the calls


def test_plans_steps_verdicts_and_replans_of_the_plan_example(tmp_path: Path) -> None:
    agent = Agent.from_file(REPO / "examples" / "plan" / "agent.toml", trace_dir=tmp_path)
    result = agent.run_sync(
        "我 12 月 5 日去北京出差，6 日去上海。查一下两地天气，哪天下雨就提醒我带伞。"
    )
    assert result.trace is not None
    events = read_trace(result.trace)
    view = timeline(events)

    created = kinds(events, "plan_created")
    assert [p["revision"] for p in view["plans"]] == [p["revision"] for p in created] == [0, 1]
    first, second = view["plans"]
    assert first["steps"][0]["replan"] is True and first["steps"][0]["done"] is False
    assert "started" not in first["steps"][1]  # never reached: the plan was replaced
    assert all(s["done"] for s in second["steps"])
    assert [s["goal"] for s in second["steps"]] == [s["goal"] for s in created[1]["steps"]]
    assert view["replans"] == [
        {k: e[k] for k in ("number", "replans", "max_replans", "reason")}
        for e in kinds(events, "replanned")
    ]
    roles = [r["name"] for r in view["rows"] if r["kind"] == "model"]
    assert roles[:3] == ["planner", "executor", "executor"] and "reflector" in roles
    assert sum(r["kind"] == "replan" for r in view["rows"]) == 1
    assert view["rows"][-1]["cum_input_tokens"] == result.usage.input_tokens


def test_a_trace_cut_mid_run_shows_what_was_written(tmp_path: Path) -> None:
    _, events = two_step_run(tmp_path)
    end = next(i for i, e in enumerate(events) if e["kind"] == "tool_result")
    view = timeline(events[:end])

    assert view["finished"] is None and view["metrics"] is None
    assert [r["kind"] for r in view["rows"]] == ["model"]
    assert (
        view["tool_calls"][0]["status"] == "requested" and view["tool_calls"][0]["result"] is None
    )
    assert view["totals"]["input_tokens"] == 120


def test_a_decided_call_shows_its_stored_result_and_a_child_runs_tokens_count(
    tmp_path: Path,
) -> None:
    events: list[dict[str, Any]] = [
        {"kind": "run_started", "run_id": "run-2", "model": "m", "tools": ["refund"]},
        {"kind": "approval_granted", "tool_call_id": "c1", "name": "refund", "fingerprint": "f",
         "arguments": {"order_id": "A-1"}, "edited": True, "t_ms": 0.5},
        {"kind": "child_run", "tool_call_id": "c2", "name": "helper", "run_id": "run-3",
         "trace": None, "status": "completed", "stop_reason": "final_answer",
         "usage": {"input_tokens": 7, "output_tokens": 3}, "t_ms": 1.0},
    ]  # fmt: skip
    stored = {"c1": {"content": '{"refunded": 48}', "is_error": False}}
    view = timeline(events, results=stored)

    refund = next(c for c in view["tool_calls"] if c["call_id"] == "c1")
    assert refund["status"] == "approved" and refund["arguments"] == {"order_id": "A-1"}
    assert refund["result"] == '{"refunded": 48}'
    assert view["rows"][0]["detail"] == "approved with edited arguments"
    assert (view["rows"][1]["cum_input_tokens"], view["rows"][1]["cum_output_tokens"]) == (7, 3)


def test_unknown_damaged_and_hostile_lines_render_as_data(tmp_path: Path) -> None:
    hostile = '<img src=x onerror="alert(1)">' + "x" * (MAX_TEXT + 50)
    events: list[Any] = [
        "not an object",
        {"kind": "from_a_newer_pi", "t_ms": 1.0},
        {"kind": "model_response", "step": "two", "message": "not an object"},
        {"kind": "model_response", "step": 1, "message": {"content": [7, {"kind": "text", "text": hostile}]}},
        {"kind": "message", "message": {"role": "tool", "tool_call_id": "c9", "content": hostile}},
        {"kind": "run_finished", "status": "completed", "usage": "lots", "metrics": None},
    ]  # fmt: skip
    view = timeline(events)

    result = view["tool_calls"][0]["result"]
    assert result.startswith('<img src=x onerror="alert(1)">')  # verbatim: the page escapes it
    assert result.endswith(f"… [{len(hostile) - MAX_TEXT} more characters in the raw trace]")
    assert len(result) < MAX_TEXT + 100
    assert [r["kind"] for r in view["rows"]] == ["model", "model", "done"]
    assert view["rows"][-1]["cum_input_tokens"] == 0
