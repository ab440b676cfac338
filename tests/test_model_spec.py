"""Model spec strings resolve to the right adapter, and contracts reach OpenAI-style APIs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_runtime import UserError
from pi_runtime.models import ModelRequest, OutputFormat, resolve_model
from pi_runtime.models._openai_request import chat_params
from pi_runtime.models.providers import VENDORS


def test_anthropic_spec_builds_the_anthropic_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    model = resolve_model("anthropic:claude-sonnet-4-6")
    assert type(model).__name__ == "AnthropicModel"
    with pytest.raises(UserError, match="anthropic:MODEL"):
        resolve_model("anthropic:")


def test_text_spec_wraps_another_spec(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('{"steps": [{"text": "hi"}]}')
    model = resolve_model(f"text:scripted:{script}")
    assert type(model).__name__ == "TextProtocolModel"
    assert model.name == f"text:scripted:{script}"
    with pytest.raises(UserError, match="name the model to wrap"):
        resolve_model("text:")


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(UserError, match="DEEPSEEK_API_KEY"):
        resolve_model("deepseek:deepseek-chat")


def test_an_output_contract_becomes_a_response_format() -> None:
    output = OutputFormat(name="Weather", schema={"type": "object", "properties": {}}, strict=True)
    request = ModelRequest(system="s", messages=(), output=output)
    openai = chat_params(request, model="gpt", vendor=VENDORS["openai"])
    assert openai["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Weather", "schema": output.schema, "strict": True},
    }
    # DeepSeek has no json_schema format: JSON mode, the schema stays in the system prompt
    deepseek = chat_params(request, model="deepseek-chat", vendor=VENDORS["deepseek"])
    assert deepseek["response_format"] == {"type": "json_object"}
    assert "response_format" not in chat_params(
        ModelRequest(system="s", messages=()), model="gpt", vendor=VENDORS["openai"]
    )


def test_a_strict_contract_becomes_anthropic_structured_output() -> None:
    from pi_runtime.models._anthropic_request import anthropic_body

    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    strict = ModelRequest(system="s", messages=(), output=OutputFormat(name="W", schema=schema))
    body = anthropic_body(strict, model="claude", max_tokens=64, thinking=None, cache=False)
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    loose = ModelRequest(
        system="s", messages=(), output=OutputFormat(name="W", schema=schema, strict=False)
    )
    body = anthropic_body(loose, model="claude", max_tokens=64, thinking=None, cache=False)
    assert "output_config" not in body
