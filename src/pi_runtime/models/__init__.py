"""Models: the `Model` protocol, requests and responses, and the built-in adapters."""

from ._deltas import stream_replays_complete
from ._repair import repair_response, repaired_stream, stream_is_repaired
from .base import (
    TOOL_CHOICE_MODES,
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputFormat,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolChoice,
    ToolDefinition,
    complete_from_stream,
    context_window_of,
)
from .function import FunctionModel
from .replay import ReplayModel
from .scripted import ScriptedModel, ScriptStep, load_script
from .spec import resolve_model
from .windows import KNOWN_WINDOWS, known_window

__all__ = [
    "KNOWN_WINDOWS",
    "TOOL_CHOICE_MODES",
    "FunctionModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputFormat",
    "ReplayModel",
    "ResponseDone",
    "ScriptStep",
    "ScriptedModel",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolChoice",
    "ToolDefinition",
    "complete_from_stream",
    "context_window_of",
    "known_window",
    "load_script",
    "repair_response",
    "repaired_stream",
    "resolve_model",
    "stream_is_repaired",
    "stream_replays_complete",
]
