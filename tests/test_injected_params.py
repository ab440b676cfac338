"""Parameters the runtime fills: never in the schema, never from the model."""

from __future__ import annotations

from pi_runtime import Agent, tool
from pi_runtime.testing import ScriptedModel

SEEN: list[tuple[str, str | None]] = []


@tool(idempotent=False)
def save_note(text: str, session_id: str, idempotency_key: str) -> str:
    """Save a note for this conversation."""
    SEEN.append((session_id, idempotency_key))
    return "saved"


def test_session_id_and_idempotency_key_are_injected_not_offered() -> None:
    assert set(save_note.parameters["properties"]) == {"text"}
    assert save_note.parameters["required"] == ["text"]
    SEEN.clear()
    model = ScriptedModel(
        [{"tool_calls": [{"name": "save_note", "arguments": {"text": "hi"}}]}, {"text": "ok"}]
    )
    result = Agent(model, tools=[save_note], trace_dir=False).run_sync(
        "note it", session_id="conv-7"
    )
    assert result.status == "completed"
    assert len(SEEN) == 1
    session, key = SEEN[0]
    assert session == "conv-7" and key is not None and key.startswith("pi-")


def test_a_model_cannot_set_an_injected_parameter() -> None:
    SEEN.clear()
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"name": "save_note", "arguments": {"text": "x", "session_id": "evil"}}
                ]
            },
            {"text": "ok"},
        ]
    )
    result = Agent(model, tools=[save_note], trace_dir=False).run_sync(
        "note it", session_id="conv-7"
    )
    refused = [m for m in result.messages if m.role == "tool"]
    assert refused[0].is_error and refused[0].error is not None
    assert refused[0].error.kind == "invalid_arguments"
    assert SEEN == []
