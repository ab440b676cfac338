"""The user projection shows progress, one sentence of commentary and the answer only."""

from __future__ import annotations

from pi_runtime import Agent, Limits, tool
from pi_runtime.observe import first_sentence, project_for_user
from pi_runtime.testing import ScriptedModel


@tool
def import_rows(table: str) -> str:
    """Import a table of rows."""
    return "imported 3 rows"


PREAMBLE = (
    "I will now import the table. It has rows A, B and C with values 1, 2, 3. Then I summarise."
)


def _updates() -> list[tuple[str, str]]:
    model = ScriptedModel(
        [
            {
                "text": PREAMBLE,
                "tool_calls": [{"name": "import_rows", "arguments": {"table": "A|1\nB|2\nC|3"}}],
            },
            {"text": "Imported three rows."},
        ]
    )
    result = Agent(model, tools=[import_rows], trace_dir=False).run_sync("import this")
    return [(u.kind, u.text) for e in result.events for u in project_for_user(e)]


def test_user_projection_keeps_one_sentence_of_commentary_and_no_arguments() -> None:
    updates = _updates()
    assert updates == [
        ("commentary", "I will now import the table."),
        ("progress", "import_rows: done"),
        ("answer", "Imported three rows."),
        ("ended", "completed · final_answer · 2 steps"),
    ]
    shown = " ".join(text for _, text in updates)
    assert "A|1" not in shown and "imported 3 rows" not in shown  # no arguments, no results


def test_first_sentence_handles_cjk_punctuation_and_long_text() -> None:
    assert first_sentence("先查天气。然后创建提醒。") == "先查天气。"
    assert first_sentence("  many   spaces here  ") == "many spaces here"
    long = "x" * 500
    assert first_sentence(long, limit=20) == "x" * 19 + "…"
    assert first_sentence("") == ""


def test_failed_tools_and_guards_appear_as_progress() -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "import_rows", "arguments": {"table": 5}}]}])
    result = Agent(
        model, tools=[import_rows], trace_dir=False, limits=Limits(max_steps=1)
    ).run_sync("go")
    updates = [(u.kind, u.text) for e in result.events for u in project_for_user(e)]
    assert ("progress", "import_rows: failed (invalid_arguments)") in updates
    assert any(kind == "progress" and text.startswith("stopping:") for kind, text in updates)
    assert updates[-1] == ("ended", "stopped · max_steps · 1 steps")
