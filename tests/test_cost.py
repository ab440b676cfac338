"""What runs cost: `Usage.cost_usd` from the offline price table, None when unknown (never
0), summed so that one unknown call makes the total unknown; `Limits.cost_budget`."""

from __future__ import annotations

from pathlib import Path

import genai_prices
import pytest

from pi_runtime import Agent, Limits, UserError, tool
from pi_runtime.loop.agentfile import read_agent_file
from pi_runtime.loop.carry import carry
from pi_runtime.messages import AssistantMessage, TextBlock, Usage, UserMessage
from pi_runtime.models import ModelRequest, ModelResponse
from pi_runtime.models.pricing import cost_usd
from pi_runtime.observe import GuardTriggered
from pi_runtime.testing import FunctionModel, ScriptedModel, function_call, text


@tool
def ping(n: int) -> str:
    """Answer pong."""
    return f"pong {n}"


def table_price(model: str, provider: str, usage: Usage) -> float:
    """The price as the package itself computes it."""
    found = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cached_tokens,
        ),
        model_ref=model,
        provider_id=provider,
    )
    return float(found.total_price)


def test_unknown_plus_known_is_unknown_and_known_costs_add() -> None:
    known = Usage(input_tokens=1, cost_usd=0.25)

    assert (known + Usage(input_tokens=2)).cost_usd is None
    assert (Usage(input_tokens=2) + known).cost_usd is None
    assert (known + known).cost_usd == 0.5
    assert (known + known).input_tokens == 2


def test_a_listed_provider_model_is_priced_from_the_table() -> None:
    usage = Usage(input_tokens=12_000, output_tokens=800, cached_tokens=2_000)

    price = cost_usd("openai:gpt-4o", usage)

    assert price is not None and price > 0
    assert price == pytest.approx(table_price("gpt-4o", "openai", usage))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("local", 0.0),  # the embedded model: free, and known to be
        ("local:/models/x.gguf", 0.0),
        ("scripted:run.json", None),
        ("replay:trace.jsonl", None),
        ("function:respond", None),
        ("ollama:qwen2.5:7b", None),
        ("openai:gpt-4o@http://127.0.0.1:8080/v1", None),  # some other server
        ("openai:no-such-model-anywhere", None),
        ("anthropic:", None),
        (None, None),
    ],
)
def test_models_without_a_known_price_cost_none_never_zero(
    name: str | None, expected: float | None
) -> None:
    assert cost_usd(name, Usage(input_tokens=1_000, output_tokens=100)) == expected


def test_a_cost_the_adapter_or_script_gave_is_kept() -> None:
    assert cost_usd("scripted:x.json", Usage(input_tokens=5, cost_usd=0.125)) == 0.125


def test_a_scripted_run_costs_none_in_its_result_json(tmp_path: Path) -> None:
    model = ScriptedModel([function_call("ping", {"n": 1}), text("done")])
    result = Agent(model, tools=[ping], trace_dir=tmp_path).run_sync("go")

    assert result.usage.cost_usd is None
    assert result.to_dict()["usage"]["cost_usd"] is None
    assert result.metrics["cost_usd"] is None


def test_a_run_on_a_priced_model_sums_the_price_of_every_call(tmp_path: Path) -> None:
    # a stand-in named as OpenAI's model is priced as that model: no network needed
    steps = [
        function_call("ping", {"n": 1}, usage={"input_tokens": 1_500, "output_tokens": 40}),
        text("pong", usage={"input_tokens": 1_800, "output_tokens": 60}),
    ]
    model = FunctionModel(lambda request: steps[request.step], name="openai:gpt-4o-mini")

    result = Agent(model, tools=[ping], trace_dir=tmp_path).run_sync("go")

    expected = sum(
        table_price("gpt-4o-mini", "openai", Usage(**s.usage.model_dump())) for s in steps
    )
    assert expected > 0
    assert result.usage.cost_usd == pytest.approx(expected)
    assert result.to_dict()["usage"]["cost_usd"] == pytest.approx(expected)
    assert result.metrics["time_to_first_token_ms"] is not None


def test_one_unpriced_call_makes_the_run_total_unknown(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call("ping", {"n": 1}, usage={"input_tokens": 10, "cost_usd": 0.002}),
            text("done", usage={"input_tokens": 12}),
        ]
    )
    result = Agent(model, tools=[ping], trace_dir=tmp_path).run_sync("go")

    assert result.usage.cost_usd is None


def script_costing(per_step: float, steps: int) -> ScriptedModel:
    return ScriptedModel(
        [
            function_call("ping", {"n": i}, usage={"input_tokens": 100, "cost_usd": per_step})
            for i in range(steps)
        ]
        + [text("done", usage={"input_tokens": 100, "cost_usd": per_step})]
    )


def test_cost_budget_stops_a_run_with_the_budget_stop_reason(tmp_path: Path) -> None:
    agent = Agent(
        script_costing(0.01, 6), tools=[ping], limits=Limits(cost_budget=0.025), trace_dir=tmp_path
    )

    result = agent.run_sync("go")

    assert result.stop_reason == "token_budget"
    assert result.status == "stopped"
    assert result.steps == 3  # 0.03 > 0.025 after the third call
    assert result.usage.cost_usd == pytest.approx(0.03)
    (guard,) = [e for e in result.events if isinstance(e, GuardTriggered)]
    assert guard.guard == "cost_budget"
    assert "cost budget of $0.025" in (result.error or "")


def test_a_run_within_its_cost_budget_completes(tmp_path: Path) -> None:
    agent = Agent(
        script_costing(0.01, 2), tools=[ping], limits=Limits(cost_budget=1.0), trace_dir=tmp_path
    )

    assert agent.run_sync("go").stop_reason == "final_answer"


def test_a_continuation_counts_what_earlier_runs_of_the_request_spent() -> None:
    spent = (
        UserMessage(content="go"),
        AssistantMessage(content=(), usage=Usage(input_tokens=5, cost_usd=0.01)),
        AssistantMessage(content=(), usage=Usage(input_tokens=5, cost_usd=0.02)),
    )
    unknown = (*spent, AssistantMessage(content=(), usage=Usage(input_tokens=5)))

    assert carry(spent).cost_usd == pytest.approx(0.03)
    assert carry(unknown).cost_usd is None


@pytest.mark.parametrize("bad", [0, -1.5, float("inf"), "1", True])
def test_a_cost_budget_must_be_a_positive_number(bad: object) -> None:
    with pytest.raises(UserError, match="cost_budget"):
        Limits(cost_budget=bad)  # type: ignore[arg-type]


def test_an_agent_file_sets_the_cost_budget_and_false_turns_it_off(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('model = "local"\n[limits]\ncost_budget = 0.5\n', "utf-8")
    (tmp_path / "b.toml").write_text('model = "local"\n[limits]\ncost_budget = false\n', "utf-8")
    (tmp_path / "c.toml").write_text('model = "local"\n[limits]\ncost_budget = "lots"\n', "utf-8")

    assert read_agent_file(tmp_path / "a.toml").limits == {"cost_budget": 0.5}
    assert read_agent_file(tmp_path / "b.toml").limits == {"cost_budget": None}
    with pytest.raises(UserError, match=r"c\.toml:3: limits\.cost_budget"):
        read_agent_file(tmp_path / "c.toml")


@pytest.mark.parametrize(
    "reported",
    [
        {"input_tokens": 100, "output_tokens": 5, "cached_tokens": -7},  # priced: raised
        {"input_tokens": "lots", "output_tokens": [1], "cached_tokens": 0},  # compared: raised
        {"input_tokens": 1.5e300, "output_tokens": -3, "cached_tokens": 10**40},
    ],
)
def test_usage_a_provider_garbles_counts_as_unreported_and_the_answer_stands(
    reported: dict[str, object],
) -> None:
    # an adapter passes a provider's figures on; a bad one ended the run internal_error
    # and dropped the answer (Usage's fields are not checked as it is built)
    def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(
            content=(TextBlock(text="pong"),), finish_reason="stop", usage=Usage(**reported)
        )

    model = FunctionModel(answer, name="openai:gpt-4o-mini")
    result = Agent(model, trace_dir=False).run_sync("go")

    assert (result.status, result.output) == ("completed", "pong"), result.error
    usage = result.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0  # counted by Pi instead
    assert type(usage.input_tokens) is int and type(usage.output_tokens) is int
    assert usage.cached_tokens == 0  # none of these is a count of cached tokens
    assert usage.cost_usd is not None and usage.cost_usd > 0  # priced from the counts
