"""The neutral message model: user, assistant and tool-result messages, blocks, usage."""

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from ._codec import message_from_dict, message_to_dict, messages_from_list, messages_to_list
from ._json import MAX_ARGUMENT_DEPTH, depth_within, find_non_finite, json_path, parse_object
from ._jsonl import escape_line_breaks, json_line, read_json_lines
from ._model import (
    STOP_STATUS,
    AssistantMessage,
    Block,
    FinishReason,
    Message,
    Phase,
    RunStatus,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolErrorInfo,
    ToolResultMessage,
    Usage,
    UserMessage,
    UserOrigin,
    token_figure,
)
from ._records import quick_init
from ._redact import keep_secret, redact, redact_url
from ._text import (
    check_keywords,
    check_name,
    clipped,
    has_surrogates,
    repair_fields,
    repair_text,
    repair_value,
)
from ._tool_error import (
    TOOL_ERROR_HINTS,
    ToolErrorKind,
    error_info_of,
    error_text,
    hint_for,
    tool_error_info,
    tool_error_result,
)

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "STOP_STATUS",
    "TOOL_ERROR_HINTS",
    "AssistantMessage",
    "Block",
    "FinishReason",
    "Message",
    "Phase",
    "RunStatus",
    "StopReason",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "ToolErrorInfo",
    "ToolErrorKind",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "UserOrigin",
    "check_keywords",
    "check_name",
    "clipped",
    "depth_within",
    "error_info_of",
    "error_text",
    "escape_line_breaks",
    "find_non_finite",
    "has_surrogates",
    "hint_for",
    "json_line",
    "json_path",
    "keep_secret",
    "message_from_dict",
    "message_to_dict",
    "messages_from_list",
    "messages_to_list",
    "parse_object",
    "quick_init",
    "read_json_lines",
    "redact",
    "redact_url",
    "repair_fields",
    "repair_text",
    "repair_value",
    "token_figure",
    "tool_error_info",
    "tool_error_result",
]


_CODEC = {"message_from_dict", "message_to_dict", "messages_from_list", "messages_to_list"}


def __getattr__(name: str) -> object:
    # The codec builds pydantic adapters on import; only (de)serialising needs them.
    if name not in _CODEC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _codec

    value = getattr(_codec, name)
    globals()[name] = value
    return value
