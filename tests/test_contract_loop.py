"""Output contracts in the loop: validate, repair at most N times, then contract_violation."""

from __future__ import annotations

import json

from pydantic import BaseModel

from pi_runtime import Agent, Limits, UserMessage
from pi_runtime.contract import FULFILLMENT_EXAMPLE, fulfillment_contract
from pi_runtime.testing import ScriptedModel


class Weather(BaseModel):
    city: str
    high_c: int


def test_a_matching_answer_is_the_output_object_and_the_schema_reaches_the_model() -> None:
    model = ScriptedModel([{"text": '```json\n{"city": "北京", "high_c": 28}\n```'}])
    result = Agent(model, output=Weather, trace_dir=False).run_sync("weather?")
    assert (result.status, result.output) == ("completed", {"city": "北京", "high_c": 28})
    request = model.requests[0]
    assert request.output is not None and request.output.name == "Weather"
    assert request.output.schema["additionalProperties"] is False
    assert "Weather" in request.system  # instructions for models without structured output
    checks = [e for e in result.events if e.kind == "contract_check"]
    assert [(c.attempt, c.ok) for c in checks] == [(1, True)]


def test_a_wrong_answer_is_sent_back_with_its_errors_and_repaired() -> None:
    model = ScriptedModel(
        [
            {"text": '{"city": "北京", "high_c": "hot", "extra": 1}'},
            {"text": '{"city": "北京", "high_c": 28}'},
        ]
    )
    result = Agent(model, output=Weather, trace_dir=False).run_sync("weather?")
    assert (result.status, result.output, result.steps) == (
        "completed",
        {"city": "北京", "high_c": 28},
        2,
    )
    repair = model.requests[1].messages[-1]
    assert isinstance(repair, UserMessage)
    assert "$.high_c" in repair.content and "extra" in repair.content
    # the question stays the current user message: the runtime block is still in front of it
    assert model.requests[1].messages[0].content.endswith("weather?")


def test_repairs_are_bounded_then_the_run_ends_contract_violation() -> None:
    model = ScriptedModel([{"text": "sunny, 28 degrees"}] * 3)
    result = Agent(model, output=Weather, trace_dir=False).run_sync("weather?")
    assert (result.status, result.stop_reason, result.output) == (
        "failed",
        "contract_violation",
        None,
    )
    assert result.steps == 3  # the answer and max_repairs=2 repairs
    assert result.contract_errors and result.contract_errors[0].startswith("$")
    assert result.to_dict()["contract_errors"] == list(result.contract_errors)


def test_repairs_count_toward_max_steps() -> None:
    model = ScriptedModel([{"text": "not json"}] * 3)
    result = Agent(model, output=Weather, trace_dir=False, limits=Limits(max_steps=2)).run_sync(
        "weather?"
    )
    assert (result.status, result.stop_reason, result.steps) == ("stopped", "max_steps", 2)


def test_the_fulfillment_contract_of_seed_002_accepts_its_example() -> None:
    model = ScriptedModel([{"text": json.dumps(FULFILLMENT_EXAMPLE, ensure_ascii=False)}])
    result = Agent(model, output=fulfillment_contract(), trace_dir=False).run_sync("北京天气")
    assert result.status == "completed"
    assert result.output["fulfillment"]["intent"] == "weather_query"
