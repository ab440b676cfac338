"""Pi: an agent runtime whose runs always end well-formed.

Define tools with `@tool`, build an `Agent`, and `run` it: every ending is a `RunResult`.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .context import Budget, PromptParts
    from .exceptions import (
        ModelError,
        PiError,
        SecurityViolation,
        ToolError,
        TransientError,
        UnrecoverableError,
        UserError,
    )
    from .guardrails import Allow, Deny, Guardrails, Rewrite
    from .loop import Agent, EscalationContext, Limits, RunResult, RunStream
    from .mcp import MCPServer
    from .memory import LocalMemoryStore, Memory
    from .messages import (
        AssistantMessage,
        Message,
        TextBlock,
        ThinkingBlock,
        ToolCall,
        ToolResultMessage,
        Usage,
        UserMessage,
    )
    from .models import Model, ModelRequest, ModelResponse, ToolDefinition
    from .tools import PendingApproval, ToolSpec, tool

__version__ = "0.1.0"

# Each public name is imported on first use (PEP 562), so `pi --help` and other light
# entry points do not pay for pydantic schemas, jsonschema and the loop they never touch.
_HOMES = {
    "Agent": ".loop",
    "Allow": ".guardrails",
    "AssistantMessage": ".messages",
    "Budget": ".context",
    "Deny": ".guardrails",
    "EscalationContext": ".loop",
    "Guardrails": ".guardrails",
    "Limits": ".loop",
    "LocalMemoryStore": ".memory",
    "MCPServer": ".mcp",
    "Memory": ".memory",
    "Message": ".messages",
    "Model": ".models",
    "ModelError": ".exceptions",
    "ModelRequest": ".models",
    "ModelResponse": ".models",
    "PendingApproval": ".tools",
    "PiError": ".exceptions",
    "PromptParts": ".context",
    "Rewrite": ".guardrails",
    "RunResult": ".loop",
    "RunStream": ".loop",
    "SecurityViolation": ".exceptions",
    "TextBlock": ".messages",
    "ThinkingBlock": ".messages",
    "ToolCall": ".messages",
    "ToolDefinition": ".models",
    "ToolError": ".exceptions",
    "ToolResultMessage": ".messages",
    "ToolSpec": ".tools",
    "TransientError": ".exceptions",
    "UnrecoverableError": ".exceptions",
    "Usage": ".messages",
    "UserError": ".exceptions",
    "UserMessage": ".messages",
    "tool": ".tools",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Agent",
    "Allow",
    "AssistantMessage",
    "Budget",
    "Deny",
    "EscalationContext",
    "Guardrails",
    "Limits",
    "LocalMemoryStore",
    "MCPServer",
    "Memory",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "PendingApproval",
    "PiError",
    "PromptParts",
    "Rewrite",
    "RunResult",
    "RunStream",
    "SecurityViolation",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "ToolDefinition",
    "ToolError",
    "ToolResultMessage",
    "ToolSpec",
    "TransientError",
    "UnrecoverableError",
    "Usage",
    "UserError",
    "UserMessage",
    "tool",
]
