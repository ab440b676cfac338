"""Plan-then-execute (seed 001 §9) and routed runs, with a scripted model: plan → execute
→ reflect → replan → answer, contracts repaired or fallen back on, the shared guards."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import (
    Agent,
    AssistantMessage,
    Limits,
    RunResult,
    ToolResultMessage,
    UserError,
    UserMessage,
    tool,
)
from pi_runtime.context import load_template
from pi_runtime.loop.plan import FALLBACK_GOAL
from pi_runtime.observe import (
    GuardTriggered,
    PlanCreated,
    PlannedStep,
    PlanStepFinished,
    PlanStepStarted,
    Replanned,
    RouteChosen,
    read_trace,
)
from pi_runtime.testing import (
    ScriptedModel,
    ScriptStep,
    function_call,
    plan_answer,
    reflection_answer,
    route_answer,
    text,
)

CALLED: list[tuple[str, dict[str, Any]]] = []


@tool
def lookup(city: str) -> dict[str, str]:
    """Weather of a city.

    Args:
        city: the city's English name, capitalised.
    """
    CALLED.append(("lookup", {"city": city}))
    if city != "Chengdu":
        raise ValueError(f"unknown city {city!r}")
    return {"city": city, "sky": "rain"}


@tool(idempotent=False)
def remind(text: str) -> str:
    """Create a reminder.

    Args:
        text: what to remind of.
    """
    CALLED.append(("remind", {"text": text}))
    return "reminder set"


@tool
def delete_all() -> str:
    """Delete everything."""
    CALLED.append(("delete_all", {}))
    return "gone"


PROMPT = "Will it rain in Chengdu? If so, remind me of an umbrella."
TWO_STEPS = plan_answer(("weather in Chengdu", ["lookup"]), ("umbrella reminder", ["remind"]))
# an executor's work: rain found; the reminder set and judged done; a one-step plan done
RAIN = [function_call("lookup", {"city": "Chengdu"}), text("Rain.")]
REMINDED = [
    function_call("remind", {"text": "umbrella"}),
    text("Set."),
    reflection_answer(True, "ok"),
]
WEATHER = [plan_answer(("weather", ["lookup"])), *RAIN, reflection_answer(True, "ok")]


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLED.clear()


def plan_agent(
    steps: list[ScriptStep], tmp_path: Path, **options: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(steps)
    options.setdefault("tools", [lookup, remind, delete_all])
    options.setdefault("allow", ["lookup", "remind"])
    options.setdefault("mode", "plan")
    return Agent(model, trace_dir=tmp_path, **options), model


def run_plan(
    steps: list[ScriptStep], tmp_path: Path, prompt: str = PROMPT, **options: Any
) -> tuple[RunResult, ScriptedModel]:
    """`plan_agent(steps, tmp_path, **options)` run once on `prompt`: its result and model."""
    agent, model = plan_agent(steps, tmp_path, **options)
    return agent.run_sync(prompt), model


def kinds(result: RunResult, *wanted: str) -> list[str]:
    return [e.kind for e in result.events if e.kind in wanted]


def of(result: RunResult, cls: type) -> list[Any]:
    return [e for e in result.events if isinstance(e, cls)]


def prompts(result: RunResult) -> list[str]:
    """The template each model call was rendered from, in order."""
    return [e.prompt["name"] for e in result.events if e.kind == "model_request"]


def assert_alternates(result: RunResult) -> None:
    """No two assistant messages in a row: providers that demand turns get them."""
    roles = [m.role for m in result.messages]
    assert all(a != "assistant" or b != "assistant" for a, b in itertools.pairwise(roles))


REPLANNED = [
    TWO_STEPS,
    function_call("lookup", {"city": "chengdu"}),
    text("lookup failed: it does not know 'chengdu'."),
    reflection_answer(False, "the city must be capitalised", replan=True),
    plan_answer(("weather in Chengdu, capitalised", ["lookup"]), ("umbrella reminder", ["remind"])),
    function_call("lookup", {"city": "Chengdu"}),
    text("Rain in Chengdu."),
    reflection_answer(True, "got the weather"),
    function_call("remind", {"text": "umbrella"}),
    text("Reminder set."),
    reflection_answer(True, "reminder created"),
    text("It will rain in Chengdu; I set a reminder to take an umbrella."),
]


def test_a_failed_step_is_replanned_and_the_run_answers(tmp_path: Path) -> None:
    result, model = run_plan(REPLANNED, tmp_path)

    model.assert_complete()
    assert result.status == "completed" and result.stop_reason == "final_answer"
    assert result.output == "It will rain in Chengdu; I set a reminder to take an umbrella."
    assert CALLED == [
        ("lookup", {"city": "chengdu"}),
        ("lookup", {"city": "Chengdu"}),
        ("remind", {"text": "umbrella"}),
    ]
    assert kinds(
        result, "plan_created", "plan_step_started", "plan_step_finished", "replanned"
    ) == [
        "plan_created",
        "plan_step_started",
        "plan_step_finished",
        "replanned",
        "plan_created",
        "plan_step_started",
        "plan_step_finished",
        "plan_step_started",
        "plan_step_finished",
    ]
    first, second = of(result, PlanCreated)
    assert first.revision == 0 and second.revision == 1 and not first.fallback
    assert second.steps[0] == PlannedStep(goal="weather in Chengdu, capitalised", tools=("lookup",))
    failed = of(result, PlanStepFinished)[0]
    assert (failed.done, failed.replan, failed.outcome, failed.model_calls) == (
        False,
        True,
        "answered",
        2,
    )
    assert of(result, Replanned) == [
        Replanned(number=1, reason="the city must be capitalised", replans=1, max_replans=2)
    ]
    assert prompts(result) == [
        "planner",
        "executor",
        "executor",
        "reflector",
        "planner",
        *["executor", "executor", "reflector"] * 2,
        "system",
    ]
    # every call counts: the planner, executors, reflector and the answer
    assert result.steps == len(REPLANNED) == result.metrics["model_calls"]
    assert_alternates(result)


def test_the_plan_phases_write_runtime_turns_that_never_start_a_request(tmp_path: Path) -> None:
    result, _ = run_plan(REPLANNED, tmp_path)

    users = [m for m in result.messages if isinstance(m, UserMessage)]
    assert [m for m in users if m.is_request] == [UserMessage(content=PROMPT)]
    assert {m.origin for m in users if not m.is_request} == {"plan"}
    briefs = [m.content for m in users if m.origin == "plan"]
    assert briefs[0].startswith("Step 1 of 2: weather in Chengdu\nTools for this step: lookup.")
    assert briefs[1] == "Judge step 1: weather in Chengdu"
    assert briefs[2].startswith("Step 1 was not done: the city must be capitalised")
    assert briefs[-1].startswith("Every step of the plan is done.")


def test_each_step_offers_and_allows_only_its_own_tools(tmp_path: Path) -> None:
    result, model = run_plan(
        [
            plan_answer(("weather", ["lookup"])),
            function_call("remind", {"text": "not this step's tool"}),
            text("I could not remind: not allowed here."),
            reflection_answer(True, "fine"),
            text("Done."),
        ],
        tmp_path,
    )

    assert result.ok
    assert CALLED == []  # remind was not this step's: refused, never run
    refused = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    assert refused.is_error and refused.error is not None
    assert refused.error.kind == "permission_denied"
    offered = [tuple(d.name for d in r.tools) for r in model.calls]
    # planner, the step's two executor calls, reflector, answer
    assert offered == [(), ("lookup",), ("lookup",), (), ()]


def test_an_invalid_plan_is_sent_back_for_repair_then_used(tmp_path: Path) -> None:
    result, _ = run_plan(
        [
            text("First I will look up the weather, then remind you."),
            plan_answer(("weather", ["lookup", "delete_all"])),  # a tool the agent may not use
            *WEATHER,
            text("Rain in Chengdu."),
        ],
        tmp_path,
    )

    assert result.ok and result.output == "Rain in Chengdu."
    checks = [e for e in result.events if e.kind == "contract_check" and e.contract == "plan"]
    assert [c.ok for c in checks] == [False, False, True]
    assert any("delete_all" in error for error in checks[1].errors)
    repairs = [
        m for m in result.messages if isinstance(m, UserMessage) and m.origin == "contract_repair"
    ]
    assert len(repairs) == 2
    (plan,) = of(result, PlanCreated)
    assert plan.steps == (PlannedStep(goal="weather", tools=("lookup",)),) and not plan.fallback


def test_a_plan_missing_its_contract_after_repairs_falls_back_to_one_step_with_every_tool(
    tmp_path: Path,
) -> None:
    result, model = run_plan(
        [
            text("no plan"),
            text("{not json"),
            text('{"steps": []}'),
            function_call("lookup", {"city": "Chengdu"}),
            function_call("remind", {"text": "umbrella"}),
            text("Rain; reminder set."),
            reflection_answer(True, "ok"),
            text("Rain in Chengdu; reminder set."),
        ],
        tmp_path,
    )

    model.assert_complete()
    assert result.ok and result.output == "Rain in Chengdu; reminder set."
    (plan,) = of(result, PlanCreated)
    assert plan.fallback
    assert plan.steps == (PlannedStep(goal=FALLBACK_GOAL, tools=("lookup", "remind")),)
    assert [name for name, _ in CALLED] == ["lookup", "remind"]
    assert result.contract_errors == ()  # the plan's misses are not the answer's


def test_an_unreadable_reflection_counts_a_reported_step_as_done(tmp_path: Path) -> None:
    result, _ = run_plan(
        [
            plan_answer(("weather", ["lookup"])),
            *RAIN,
            text("looks good"),
            text("yes"),
            text('{"done": "yes"}'),
            text("Rain in Chengdu."),
        ],
        tmp_path,
    )

    assert result.ok
    (finished,) = of(result, PlanStepFinished)
    assert finished.fallback and finished.done and not finished.replan
    assert "missed its contract" in finished.reason


def test_replans_exhausted_stop_the_run_well_formed(tmp_path: Path) -> None:
    failing = [
        function_call("lookup", {"city": "chengdu"}),
        text("lookup failed."),
        reflection_answer(False, "still the wrong city", replan=True),
    ]
    result, model = run_plan(
        [TWO_STEPS, *failing, TWO_STEPS, *failing],
        tmp_path,
        max_replans=1,
    )

    model.assert_complete()
    assert (result.status, result.stop_reason, result.output) == ("stopped", "max_steps", None)
    assert result.error is not None
    assert "plan step 1 was not done after 1 replan(s): still the wrong city" in result.error
    assert of(result, GuardTriggered) == [GuardTriggered(guard="max_replans", detail=result.error)]
    assert len(of(result, Replanned)) == 1
    assert ("remind", {"text": "umbrella"}) not in CALLED
    assert result.trace is not None
    lines = read_trace(result.trace)
    assert lines[-1]["kind"] == "run_finished" and lines[-1]["stop_reason"] == "max_steps"


def test_no_replans_allowed_stops_at_the_first_failed_step(tmp_path: Path) -> None:
    result, _ = run_plan(
        [
            TWO_STEPS,
            function_call("lookup", {"city": "chengdu"}),
            text("lookup failed."),
            reflection_answer(False, "wrong city", replan=True),
        ],
        tmp_path,
        max_replans=0,
    )

    assert result.stop_reason == "max_steps" and of(result, Replanned) == []
    assert of(result, GuardTriggered)[0].guard == "max_replans"


def test_a_done_step_whose_result_changes_the_plan_is_replanned(tmp_path: Path) -> None:
    result, model = run_plan(
        [
            TWO_STEPS,
            *RAIN,
            reflection_answer(True, "rain: the reminder needs a time", replan=True),
            plan_answer(("umbrella reminder for 8am", ["remind"])),
            function_call("remind", {"text": "umbrella at 8am"}),
            text("Set."),
            reflection_answer(True, "ok"),
            text("Rain; reminder at 8am."),
        ],
        tmp_path,
    )

    model.assert_complete()
    assert result.ok
    assert [e.number for e in of(result, PlanStepStarted)] == [1, 1]
    assert "Step 1 is done, but the plan must change" in str(
        [m for m in result.messages if isinstance(m, UserMessage)]
    )


def test_a_step_out_of_model_calls_is_judged_and_the_run_goes_on(tmp_path: Path) -> None:
    result, _ = run_plan(
        [
            TWO_STEPS,
            function_call("lookup", {"city": "chengdu"}),
            function_call("lookup", {"city": "Chengdu"}),
            reflection_answer(True, "the second lookup worked"),
            *REMINDED,
            text("Rain; reminder set."),
        ],
        tmp_path,
        step_max_steps=2,
    )

    assert result.ok and result.output == "Rain; reminder set."
    first = of(result, PlanStepFinished)[0]
    assert (first.outcome, first.model_calls, first.done) == ("step_limit", 2, True)
    # the step's own limit ends the step, not the run: no guard event, the trace says so
    assert of(result, GuardTriggered) == []
    judge = [m.content for m in result.messages if isinstance(m, UserMessage)][2]
    assert judge.startswith("Judge step 1") and "used all 2 model calls" in judge


def test_a_guard_stop_mid_plan_ends_the_whole_run(tmp_path: Path) -> None:
    result, _ = run_plan(
        [
            TWO_STEPS,
            *RAIN,
            reflection_answer(True, "never asked for"),
        ],
        tmp_path,
        limits=Limits(max_steps=3),
    )

    assert (result.status, result.stop_reason) == ("stopped", "max_steps")
    assert result.steps == 3 and result.output is None
    assert of(result, GuardTriggered) == [
        GuardTriggered(guard="max_steps", detail="3 model calls made of 3")
    ]
    assert kinds(result, "plan_step_finished") == []  # stopped before its reflection
    assert isinstance(result.messages[-1], AssistantMessage)  # no brief left dangling


def test_the_token_budget_counts_every_phase(tmp_path: Path) -> None:
    spend = {"usage": {"input_tokens": 400, "output_tokens": 100}}
    result, _ = run_plan(
        [
            plan_answer(("weather", ["lookup"]), **spend),
            function_call("lookup", {"city": "Chengdu"}, **spend),
            text("Rain.", **spend),
            reflection_answer(True, "never asked for", **spend),
        ],
        tmp_path,
        limits=Limits(token_budget=1200),
    )

    assert result.stop_reason == "token_budget"
    assert result.usage.input_tokens == 1200 and result.steps == 3


def test_the_wall_clock_stops_a_plan_mid_step(tmp_path: Path) -> None:
    result, _ = run_plan(
        [
            plan_answer(("weather", ["lookup"])),
            function_call("lookup", {"city": "Chengdu"}, delay_ms=5000),
        ],
        tmp_path,
        limits=Limits(wall_clock_s=0.3),
    )

    assert (result.status, result.stop_reason) == ("stopped", "wall_clock")
    assert result.trace is not None
    assert read_trace(result.trace)[-1]["stop_reason"] == "wall_clock"


def test_a_plan_mode_output_contract_checks_the_composed_answer(tmp_path: Path) -> None:
    from pydantic import BaseModel

    class Forecast(BaseModel):
        city: str
        rain: bool

    result, _ = run_plan(
        [
            *WEATHER,
            text('{"city": "Chengdu", "rain": true}'),
        ],
        tmp_path,
        output=Forecast,
    )

    assert result.ok and result.output == {"city": "Chengdu", "rain": True}
    contracts = [e.contract for e in result.events if e.kind == "contract_check"]
    assert contracts == ["plan", "reflection", "Forecast"]


def test_the_trace_records_the_template_of_every_model_call(tmp_path: Path) -> None:
    agent, model = plan_agent(REPLANNED, tmp_path)

    result = agent.run_sync(PROMPT)

    assert result.trace is not None
    requests = [line for line in read_trace(result.trace) if line["kind"] == "model_request"]
    assert len(requests) == result.steps
    for line in requests:
        template = load_template(line["prompt"]["name"])
        assert line["prompt"] == template.ref
        assert template.version == 1
    sent = zip(requests, model.calls, strict=True)
    systems = {line["prompt"]["name"]: request.system for line, request in sent}
    assert systems["system"] == agent.system
    assert systems["planner"].startswith(agent.system.splitlines()[0])  # the agent's role
    assert '{"steps": [{"goal"' in systems["planner"]
    assert "Use only the tools offered for this step." in systems["executor"]
    assert '"done": true | false' in systems["reflector"]


def test_a_continuation_of_a_plan_mode_agent_goes_on_as_react(tmp_path: Path) -> None:
    agent, _ = plan_agent([text("unused"), text("Carrying on: rain.")], tmp_path)
    history = (UserMessage(content=PROMPT), AssistantMessage(content=()))

    result = agent.run_sync(None, history=history)

    assert result.ok and result.output == "Carrying on: rain."
    assert kinds(result, "plan_created") == []
    assert prompts(result) == ["system"]


def test_react_stays_the_default_and_composes_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([*RAIN])
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync(PROMPT)

    assert agent.mode == "react" and agent.composition is None
    assert result.ok and prompts(result) == ["system", "system"]
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"mode": "plans"}, "mode must be one of react, plan, auto"),
        ({"mode": "plan", "max_replans": -1}, "max_replans must be an integer >= 0"),
        ({"mode": "plan", "max_replans": True}, "max_replans must be an integer >= 0"),
        ({"mode": "plan", "step_max_steps": 0}, "step_max_steps must be an integer >= 1"),
    ],
)
def test_a_bad_mode_or_plan_limit_is_refused_before_any_run(
    options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(UserError, match=problem):
        Agent(ScriptedModel([]), tools=[lookup], trace_dir=False, **options)


# --- routing (mode "auto") -----------------------------------------------------------------


def test_the_router_choosing_direct_answers_without_tools(tmp_path: Path) -> None:
    result, model = run_plan(
        [route_answer("direct", 0.95), text("Hello! Ask me about the weather.")],
        tmp_path,
        mode="auto",
        prompt="hi",
    )

    assert result.ok and result.output == "Hello! Ask me about the weather."
    assert of(result, RouteChosen) == [RouteChosen(mode="direct", confidence=0.95)]
    assert [tuple(r.tools) for r in model.calls] == [(), ()]
    assert prompts(result) == ["router", "system"]
    assert [m.origin for m in result.messages if isinstance(m, UserMessage)] == ["user", "route"]


def test_the_router_choosing_react_runs_the_plain_loop(tmp_path: Path) -> None:
    result, model = run_plan(
        [route_answer("react"), *RAIN],
        tmp_path,
        mode="auto",
    )

    assert result.ok and CALLED == [("lookup", {"city": "Chengdu"})]
    assert prompts(result) == ["router", "system", "system"]
    assert [d.name for d in model.calls[1].tools] == ["lookup", "remind"]
    assert kinds(result, "plan_created") == []


def test_the_router_choosing_plan_plans(tmp_path: Path) -> None:
    result, model = run_plan(
        [
            route_answer("plan", 0.7),
            *WEATHER,
            text("Rain in Chengdu."),
        ],
        tmp_path,
        mode="auto",
    )

    model.assert_complete()
    assert result.ok
    assert prompts(result)[:2] == ["router", "planner"]
    assert kinds(result, "route_chosen", "plan_created") == ["route_chosen", "plan_created"]
    assert_alternates(result)


def test_an_unreadable_route_falls_back_to_react(tmp_path: Path) -> None:
    result, _ = run_plan(
        [
            text("plan, I think"),
            text('{"mode": "maybe", "confidence": 2}'),
            text('{"mode": "plan"}'),
            text("It may rain."),
        ],
        tmp_path,
        mode="auto",
    )

    assert result.ok and result.output == "It may rain."
    assert of(result, RouteChosen) == [RouteChosen(mode="react", confidence=None, fallback=True)]


def test_plan_mode_answers_from_an_agent_file_with_a_stored_script(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(
        json.dumps({"steps": [s.model_dump(exclude_defaults=True) for s in REPLANNED]}),
        encoding="utf-8",
    )
    (tmp_path / "agent.toml").write_text(
        'model = "scripted:script.json"\n'
        'tools = ["test_plan_mode:lookup", "test_plan_mode:remind"]\n'
        'mode = "plan"\nmax_replans = 1\nstep_max_steps = 3\n',
        encoding="utf-8",
    )
    agent = Agent.from_file(tmp_path / "agent.toml", trace_dir=tmp_path)

    result = agent.run_sync(PROMPT)

    assert (agent.mode, agent.max_replans, agent.step_max_steps) == ("plan", 1, 3)
    assert result.ok and len(of(result, Replanned)) == 1


def test_the_requests_tool_choice_goes_to_the_first_executor_call_not_the_planner(
    tmp_path: Path,
) -> None:
    result, model = run_plan(
        [
            TWO_STEPS,
            *RAIN,
            reflection_answer(True, "ok"),
            *REMINDED,
            text("Rain; reminder set."),
        ],
        tmp_path,
        tool_choice="lookup",
    )

    assert result.ok
    choices = [r.tool_choice for r in model.calls]
    # a role answering JSON is never forced to call a tool it is not offered
    assert choices == ["auto", "lookup", "auto", "auto", "auto", "auto", "auto", "auto"]


def test_a_forced_tool_the_first_step_does_not_offer_is_not_forced(tmp_path: Path) -> None:
    result, model = run_plan(
        [
            plan_answer(("umbrella reminder", ["remind"])),
            *REMINDED,
            text("Reminder set."),
        ],
        tmp_path,
        tool_choice="lookup",
    )

    assert result.ok and {r.tool_choice for r in model.calls} == {"auto"}


def test_guardrails_check_the_request_once_and_only_the_final_answer(tmp_path: Path) -> None:
    from pi_runtime import Allow, Guardrails, Rewrite

    seen: dict[str, list[Any]] = {"input": [], "output": []}

    def inputs(value: Any) -> Allow:
        seen["input"].append(value)
        return Allow()

    def outputs(value: Any) -> Rewrite:
        seen["output"].append(value)
        return Rewrite(str(value).replace("Chengdu", "C***"), reason="no city names")

    result, _ = run_plan(
        REPLANNED, tmp_path, guardrails=Guardrails(input=[inputs], output=[outputs])
    )
    assert result.stop_reason == "final_answer"
    # the planner's plan, the executors' reports and the verdicts are the runtime's own
    # JSON: a PII rewrite must not reach them, only the answer the user reads
    assert seen["input"] == [PROMPT]
    assert seen["output"] == ["It will rain in Chengdu; I set a reminder to take an umbrella."]
    assert result.output == "It will rain in C***; I set a reminder to take an umbrella."
    assert len(of(result, PlanCreated)) == 2
