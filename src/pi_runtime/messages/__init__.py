"""The neutral message model: user, assistant and tool-result messages, blocks, usage."""

from ._codec import message_from_dict, message_to_dict, messages_from_list, messages_to_list
from ._json import MAX_ARGUMENT_DEPTH, depth_within, parse_object
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
from ._text import has_surrogates, repair_text, repair_value

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
    "has_surrogates",
    "message_from_dict",
    "message_to_dict",
    "messages_from_list",
    "messages_to_list",
    "parse_object",
    "repair_text",
    "repair_value",
]
