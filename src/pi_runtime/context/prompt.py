"""The default system prompt: a role line and the output discipline (seed 000, layer one)."""

from __future__ import annotations

DEFAULT_ROLE = "You are Pi, an agent that completes the user's task by calling tools."

OUTPUT_DISCIPLINE = """\
- When your next step is a tool call, call the tool directly.
- Do not restate the input, attachments or the arguments you are about to send.
- Say what you are doing only when the user must know, in one sentence at most.
- When a tool returns an error, read its kind and hint; change the call, don't repeat it."""


def render_system_prompt(instructions: str | None = None, *, discipline: bool = True) -> str:
    """The system layer: the caller's instructions (or the default role) plus the rules."""
    parts = [(instructions or DEFAULT_ROLE).strip()]
    if discipline:
        parts.append("## Tool use\n" + OUTPUT_DISCIPLINE)
    return "\n\n".join(parts)
