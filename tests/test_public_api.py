"""The public surface: `pi_runtime.__all__` is exactly what the package exports, and the
test doubles users rely on are public (after httpx `tests/test_exported_members.py`)."""

from __future__ import annotations

import importlib.metadata
import inspect
import types

import pytest

import pi_runtime
import pi_runtime.testing


def public_attributes(module: types.ModuleType) -> set[str]:
    """Names a user sees on `module` (`dir`, which includes names imported on first use):
    not private, not a submodule."""
    return {
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    }


def test_all_is_sorted_without_duplicates() -> None:
    names = list(pi_runtime.__all__)
    assert names == sorted(names)
    assert len(names) == len(set(names))


def test_all_is_exactly_the_public_surface() -> None:
    exported = set(pi_runtime.__all__)
    public = public_attributes(pi_runtime)

    assert public - exported == set(), "public names missing from __all__"
    assert exported - public == set(), "__all__ names the package does not define"


def test_every_name_in_all_is_importable() -> None:
    namespace: dict[str, object] = {}
    exec("from pi_runtime import *", namespace)

    for name in pi_runtime.__all__:
        assert namespace[name] is getattr(pi_runtime, name)


def test_exported_classes_and_functions_are_pi_runtime_own() -> None:
    for name in pi_runtime.__all__:
        value = getattr(pi_runtime, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("pi_runtime."), (name, value.__module__)


def test_version_is_the_installed_distribution_version() -> None:
    assert isinstance(pi_runtime.__version__, str)
    assert pi_runtime.__version__ == importlib.metadata.version("pi-runtime")


@pytest.mark.parametrize(
    "name",
    ["Agent", "RunResult", "tool", "ToolSpec", "UserError", "ToolError", "Limits", "Usage"],
)
def test_the_names_the_design_promises_are_exported(name: str) -> None:
    assert name in pi_runtime.__all__


def test_testing_exposes_the_model_doubles() -> None:
    from pi_runtime.models.function import FunctionModel
    from pi_runtime.models.scripted import ScriptedModel

    assert pi_runtime.testing.ScriptedModel is ScriptedModel
    assert pi_runtime.testing.FunctionModel is FunctionModel
    assert {"ScriptedModel", "FunctionModel"} <= set(pi_runtime.testing.__all__)


def test_testing_all_is_sorted_and_importable() -> None:
    names = list(pi_runtime.testing.__all__)
    assert names == sorted(names)
    assert set(names) == public_attributes(pi_runtime.testing)


def test_test_doubles_drive_an_agent_to_a_final_answer() -> None:
    @pi_runtime.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = pi_runtime.testing.ScriptedModel(
        [
            {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
            {"text": "5"},
        ]
    )
    result = pi_runtime.Agent(model, tools=[add], trace_dir=False).run_sync("2+3?")

    assert result.status == "completed"
    assert result.output == "5"
    tool_results = [m for m in result.messages if m.role == "tool"]
    assert [m.content for m in tool_results] == ["5"]


def test_function_model_answers_from_a_function() -> None:
    def respond(request: pi_runtime.ModelRequest) -> pi_runtime.ModelResponse:
        return pi_runtime.ModelResponse(
            content=(pi_runtime.TextBlock(text=f"step {request.step}"),), finish_reason="stop"
        )

    agent = pi_runtime.Agent(pi_runtime.testing.FunctionModel(respond), trace_dir=False)
    result = agent.run_sync("hi")

    assert result.status == "completed"
    assert result.output == "step 0"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Agnet'"):
        pi_runtime.Agnet  # noqa: B018
