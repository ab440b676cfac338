"""Test doubles for Pi's tests and yours: deterministic models and script builders.

model = ScriptedModel([function_call("get_weather", {"city": "Oslo"}), text("Sunny.")])
result = Agent(model, tools=[get_weather]).run_sync("Weather in Oslo?")
model.assert_complete()
assert model.calls[1].messages[-1].role == "tool"
"""

from .models.function import FunctionModel
from .models.replay import ReplayModel
from .models.script_builders import (
    function_call,
    parallel_calls,
    plan_answer,
    reflection_answer,
    route_answer,
    text,
    tool_call,
)
from .models.scripted import ScriptedModel, ScriptStep, load_script

__all__ = [
    "FunctionModel",
    "ReplayModel",
    "ScriptStep",
    "ScriptedModel",
    "function_call",
    "load_script",
    "parallel_calls",
    "plan_answer",
    "reflection_answer",
    "route_answer",
    "text",
    "tool_call",
]
