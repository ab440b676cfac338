"""One tool-error wire format: every kind the runtime raises is registered with a hint,
and every error result is the same `{kind, message, hint}` JSON."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from pi_runtime.messages import (
    TOOL_ERROR_HINTS,
    AssistantMessage,
    ToolCall,
    ToolErrorKind,
    error_info_of,
    error_text,
    hint_for,
    tool_error_info,
    tool_error_result,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "pi_runtime"
RAISERS = {
    "ToolErrorInfo",
    "ToolFailure",
    "ToolError",
    "TransientError",
    "UnrecoverableError",
    "SecurityViolation",
    "tool_error_info",
    "refuse",
    "_refuse",
    "reference_error",
    "cursor_error",
}

KIND_POSITION = {  # where a raiser takes the kind positionally
    "ToolErrorInfo": 0,
    "tool_error_info": 0,
    "reference_error": 0,
    "cursor_error": 0,
    "refuse": 1,
    "_refuse": 1,
}


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def raised_kinds() -> dict[str, str]:
    """Every literal error kind in the source → where it is (kind=…, a raiser's first
    argument, `{"kind": …, "message": …}` dicts, `default_kind = …`)."""
    found: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            literals: list[ast.expr] = []
            if isinstance(node, ast.Call) and _name(node.func) in RAISERS:
                literals += [k.value for k in node.keywords if k.arg == "kind"]
                position = KIND_POSITION.get(_name(node.func))
                if position is not None and len(node.args) > position:
                    literals.append(node.args[position])
            elif isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if {"kind", "message"} <= keys:
                    literals += [
                        v
                        for k, v in zip(node.keys, node.values, strict=True)
                        if isinstance(k, ast.Constant) and k.value == "kind"
                    ]
            elif isinstance(node, ast.Assign) and any(
                _name(t) == "default_kind" for t in node.targets
            ):
                literals.append(node.value)
            for lit in literals:
                if isinstance(lit, ast.Constant) and isinstance(lit.value, str):
                    found[lit.value] = f"{path.relative_to(SRC)}:{lit.lineno}"
    return found


def test_every_kind_raised_in_the_source_is_registered() -> None:
    kinds = raised_kinds()
    assert {"tool_error", "transient", "unrecoverable", "security"} <= kinds.keys()  # not vacuous
    unregistered = {k: where for k, where in kinds.items() if k not in set(ToolErrorKind)}
    assert unregistered == {}


def test_every_registered_kind_has_a_hint() -> None:
    assert set(TOOL_ERROR_HINTS) == set(ToolErrorKind)
    assert all(hint.strip() for hint in TOOL_ERROR_HINTS.values())


def test_a_kind_of_a_tools_own_gets_the_generic_hint() -> None:
    assert hint_for("rate_limited") == TOOL_ERROR_HINTS[ToolErrorKind.TOOL_ERROR]
    assert tool_error_info("rate_limited", "slow down", "wait a minute").hint == "wait a minute"


def test_the_constructor_writes_the_one_wire_format() -> None:
    info = tool_error_info(ToolErrorKind.CANCELLED, "arrêté — 停止")
    message = tool_error_result("c1", "search", info)

    assert message.is_error and message.error == info
    assert type(message.error.kind) is str and message.error.kind == "cancelled"
    assert json.loads(message.content) == {
        "kind": "cancelled",
        "message": "arrêté — 停止",
        "hint": TOOL_ERROR_HINTS[ToolErrorKind.CANCELLED],
    }
    assert "停止" in message.content  # not \\u escapes


def test_a_stored_job_error_reads_with_a_hint() -> None:
    info = error_info_of({"kind": "attempts_exhausted", "message": "interrupted 3 times"})
    assert info.hint == TOOL_ERROR_HINTS[ToolErrorKind.ATTEMPTS_EXHAUSTED]
    assert error_info_of(None).kind == "tool_error"


def test_an_unanswered_call_of_a_stopped_session_run_keeps_its_words() -> None:
    """`unanswered` (durable sessions', once) built its JSON by hand (without
    `ensure_ascii=False`, and no hint)."""
    from pi_runtime.loop.run_result import unanswered

    call = ToolCall(id="c1", name="météo", arguments={}, raw="{}")
    new = [AssistantMessage(content=(call,))]
    stopped = _StubResult(status="failed", messages=())
    (answer,) = unanswered(stopped, new)  # type: ignore[arg-type]
    assert answer.name == "météo" and answer.error is not None
    assert answer.error.kind == "cancelled"
    assert answer.content == error_text(answer.error)
    assert json.loads(answer.content)["hint"] == TOOL_ERROR_HINTS[ToolErrorKind.CANCELLED]


class _StubResult:
    def __init__(self, *, status: str, messages: tuple[object, ...]) -> None:
        self.status = status
        self.messages = messages
