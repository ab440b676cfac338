"""An MCP tool's result as the value Pi's gate encodes, like any tool's return value.

- `structuredContent` (a JSON object), when the server sent one and every content block
  is text: the text is then its rendering, and the object says the same more exactly;
- otherwise the content blocks, one per line: text as it is; images and audio as a short
  placeholder (`[image: image/png, 5120 bytes]`: the model cannot see them through a tool
  result, and base64 would fill its context); a resource link as its URI; an embedded
  text resource as its text;
- `isError: true` raises a `ToolError` carrying the server's words: the model reads it as
  a `tool_error` and the run goes on.

Everything the server sent is outside text: cut to `MAX_ERROR_CHARS` in an error and
left to the gate's byte limit in a result.
"""

from __future__ import annotations

import base64
from typing import Any

from ..exceptions import ToolError
from ..messages import ToolErrorKind, clipped

MAX_ERROR_CHARS = 2_000


def result_value(result: Any, *, tool: str) -> Any:
    """The value of a `CallToolResult` (its `is_error` raised as a ToolError)."""
    blocks = list(getattr(result, "content", None) or [])
    lines = [_block_text(block) for block in blocks]
    if getattr(result, "is_error", False):
        message = "\n".join(line for line in lines if line).strip()
        if not message:
            message = f"{tool} reported an error without saying what it was"
        raise ToolError(clipped(message, MAX_ERROR_CHARS), kind=ToolErrorKind.TOOL_ERROR)
    structured = getattr(result, "structured_content", None)
    if structured is not None and all(getattr(b, "type", None) == "text" for b in blocks):
        return structured
    if len(lines) == 1:
        return lines[0]
    return "\n".join(lines)


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", None) or "unknown type"
        return f"[{kind}: {mime}, {_decoded_size(getattr(block, 'data', ''))} bytes]"
    if kind == "resource_link":
        name = getattr(block, "name", None)
        uri = getattr(block, "uri", "")
        return f"[resource: {uri}]" if not name else f"[resource {name}: {uri}]"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return text
        mime = getattr(resource, "mime_type", None) or "unknown type"
        size = _decoded_size(getattr(resource, "blob", ""))
        return f"[resource: {getattr(resource, 'uri', '')}, {mime}, {size} bytes]"
    return f"[{kind or 'unknown'} content]"


def _decoded_size(data: Any) -> int:
    if isinstance(data, bytes):
        return len(data)
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data)
