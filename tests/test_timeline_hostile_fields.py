"""The timeline of a trace whose fields have types it does not expect (a newer Pi's trace,
a damaged line): a field of the wrong type reads as absent, and the builder never raises.
Also: a step event finds its plan's step without walking every plan."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_runtime.server.timeline import timeline
from pi_runtime.server.timeline_plans import PlanLog

PLAN = {"kind": "plan_created", "revision": 0, "steps": [{"goal": "g", "tools": ["x"]}]}


@pytest.mark.parametrize(
    "event",
    [
        {"kind": "model_request", "step": 1, "tools": 5},
        {"kind": "plan_created", "steps": 5},
        {"kind": "plan_created", "steps": [{"goal": "g", "tools": 5}]},
        {"kind": "model_request", "step": 1e400},
        {"kind": "model_request", "step": math.nan},
        {"kind": "model_response", "step": math.inf, "message": {"usage": {"input_tokens": 1e400}}},
        {"kind": "contract_check", "ok": False, "errors": 3},
        {"kind": "plan_step_started", "revision": 0, "number": [1]},
    ],
)
def test_a_timeline_field_of_the_wrong_type_reads_as_absent(event: dict[str, Any]) -> None:
    view = timeline([PLAN, event])

    typed(view)
    assert view["plans"][0]["steps"][0]["tools"] == ["x"]
    assert all(call["tools"] == [] for call in view["model_calls"])
    for plan in view["plans"][1:]:
        assert all(step["tools"] == [] for step in plan["steps"])
    assert all(row["step"] in (0, 1) for row in view["rows"])


def typed(view: dict[str, Any]) -> None:
    """What the builder computes itself is of its type, and every number is finite."""
    for row in view["rows"]:
        for key in ("step", "cum_input_tokens", "cum_output_tokens"):
            assert type(row[key]) is int
        assert math.isfinite(row["cum_ms"])
        assert row["ms"] is None or math.isfinite(row["ms"])
        assert isinstance(row["detail"], str) and isinstance(row["stop"], str)
    for call in view["model_calls"]:
        assert type(call["step"]) is int and isinstance(call["tools"], list)
    for plan in view["plans"]:
        assert all(isinstance(step["tools"], list) for step in plan["steps"])
    assert math.isfinite(view["totals"]["ms"])
    json.dumps(view)  # the server can answer it


def test_a_timeline_tokens_and_times_of_the_wrong_type_count_as_nothing() -> None:
    events = [
        {"kind": "model_request", "step": 1},
        {"kind": "model_response", "step": 1, "t_ms": math.inf, "latency_ms": "fast",
         "message": {"usage": {"input_tokens": math.nan, "output_tokens": "7"}}},
        {"kind": "model_response", "step": 1, "t_ms": 4.0, "latency_ms": 3,
         "message": {"usage": {"input_tokens": 10, "output_tokens": 2}}},
    ]  # fmt: skip
    view = timeline(events)

    first, second = view["rows"]
    assert (first["ms"], first["cum_ms"], first["cum_input_tokens"]) == (None, 0, 0)
    assert (second["ms"], second["cum_input_tokens"], second["cum_output_tokens"]) == (3, 10, 2)
    assert view["totals"]["ms"] == 4.0


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities too: Python's JSON reader accepts them
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
KINDS = [
    "run_started", "model_request", "model_response", "model_error", "tool_result",
    "message", "approval_requested", "approval_granted", "approval_rejected", "job_started",
    "child_run", "run_finished", "plan_created", "plan_step_started", "plan_step_finished",
    "replanned", "route_chosen", "guard", "security_audit", "guardrail_tripped",
    "escalated", "contract_check", "tool_retry",
]  # fmt: skip
FIELDS = [
    "step", "t_ms", "tools", "prompt", "tool_choice", "message_count", "input_tokens",
    "context", "summary", "message", "latency_ms", "transient", "tool_call_id", "name",
    "error_kind", "is_error", "executed", "duration_ms", "attempts", "result_bytes",
    "result_truncated", "arguments", "edited", "reason", "job_id", "fingerprint", "usage",
    "status", "stop_reason", "run_id", "steps", "wall_ms", "error", "output", "metrics",
    "guard", "guardrail", "hook", "contract", "errors", "attempt", "detail", "ok",
    "number", "total", "goal", "revision", "fallback", "outcome", "done", "replan",
    "model_calls", "replans", "max_replans", "mode",
]  # fmt: skip
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["tool", "assistant"]) | JSON_VALUES,
        "content": st.lists(
            st.fixed_dictionaries(
                {"kind": st.sampled_from(["text", "tool_call"])},
                optional={k: JSON_VALUES for k in ("text", "id", "name", "raw", "truncated")},
            )
            | JSON_VALUES,
            max_size=3,
        )
        | JSON_VALUES,
        "usage": st.dictionaries(st.sampled_from(["input_tokens", "output_tokens"]), JSON_VALUES)
        | JSON_VALUES,
        **{k: JSON_VALUES for k in ("finish_reason", "tool_call_id", "name", "is_error")},
    },
)
EVENTS = st.builds(
    lambda kind, fields, message: {"kind": kind, **fields, "message": message},
    st.sampled_from(KINDS) | JSON_VALUES,
    st.fixed_dictionaries({}, optional=dict.fromkeys(FIELDS, JSON_VALUES)),
    MESSAGES | JSON_VALUES,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENTS, max_size=6))
def test_a_timeline_of_events_with_any_json_in_any_field_never_raises(
    events: list[dict[str, Any]],
) -> None:
    typed(timeline([PLAN, *events]))


# Plans


class Unwalkable(list[dict[str, Any]]):
    """The plans, refusing to be walked: a step's lookup must go straight to its plan."""

    def __iter__(self) -> Any:
        raise AssertionError("walked every plan to find one step")

    def __reversed__(self) -> Any:
        raise AssertionError("walked every plan to find one step")


def test_a_plan_step_event_finds_its_step_without_walking_the_plans() -> None:
    log = PlanLog()
    for revision in range(500):
        log.feed({"kind": "plan_created", "revision": revision, "steps": [{"goal": "g"}] * 3})
    log.plans = Unwalkable(log.plans)

    log.feed({"kind": "plan_step_started", "revision": 0, "number": 2})
    log.feed({"kind": "plan_step_finished", "revision": 0, "number": 2, "done": True})
    log.feed({"kind": "plan_step_started", "revision": 3, "number": 99})  # no such step

    first = list.__getitem__(log.plans, 0)
    assert first["steps"][1]["started"] is True and first["steps"][1]["done"] is True


def test_a_plan_step_event_names_the_latest_plan_of_its_revision() -> None:
    log = PlanLog()
    log.feed({"kind": "plan_created", "revision": 1, "steps": [{"goal": "old"}]})
    log.feed({"kind": "plan_created", "revision": 1, "steps": [{"goal": "new"}]})
    log.feed({"kind": "plan_created", "revision": 2, "steps": [{"goal": "later"}]})
    log.feed({"kind": "plan_step_started", "revision": 1, "number": 1})

    assert ["started" in plan["steps"][0] for plan in log.plans] == [False, True, False]
