"""Pi: an agent runtime whose runs always end well-formed.

Define tools with `@tool`, build an `Agent`, and `run` it: every ending is a `RunResult`.
"""

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
from .loop import Agent, Limits, RunResult, RunStream
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
from .tools import ToolSpec, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AssistantMessage",
    "Budget",
    "Limits",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "PiError",
    "PromptParts",
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
