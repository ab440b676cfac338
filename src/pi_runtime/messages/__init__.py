"""The neutral message model: user, assistant and tool-result messages, blocks, usage."""

from ._codec import message_from_dict, message_to_dict, messages_from_list, messages_to_list
from ._json import MAX_ARGUMENT_DEPTH, depth_within, find_non_finite, json_path, parse_object
from ._jsonl import json_line, read_json_lines
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
)
from ._redact import redact, redact_url
from ._text import has_surrogates, repair_fields, repair_text, repair_value

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "STOP_STATUS",
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
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "UserOrigin",
    "depth_within",
    "find_non_finite",
    "has_surrogates",
    "json_line",
    "json_path",
    "message_from_dict",
    "message_to_dict",
    "messages_from_list",
    "messages_to_list",
    "parse_object",
    "read_json_lines",
    "redact",
    "redact_url",
    "repair_fields",
    "repair_text",
    "repair_value",
]
