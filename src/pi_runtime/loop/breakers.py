"""Circuit breakers on tool calls (seed 002 §5.2): what is refused before the gate runs.

Guards stop a run after the fact; breakers act earlier, call by call: a call past the
request's `max_tool_calls` and a call identical to the one just before it are answered
with a tool error instead of being run, so the model hears why and can change course.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import (
    ToolCall,
    ToolErrorKind,
    UserMessage,
    tool_error_info,
    tool_error_result,
)
from ..tools import ToolOutcome
from .guards import Limits

TOOL_LIMIT_NOTICE = (
    "You have used all {cap} tool calls allowed for this request; no tool will run any "
    "more. Answer the user now without calling a tool: give what you found, and say "
    "plainly what you could not do and why."
)


def screen(
    calls: Sequence[ToolCall],
    digests: Sequence[str],
    *,
    limits: Limits,
    made: int,
    previous: str | None,
) -> tuple[ToolOutcome | None, ...]:
    """For each call, the refusal that replaces running it, or None to let the gate run it.

    Args:
        calls: the calls of one model response, in order.
        digests: each call's `action_hash`.
        limits: the agent's limits.
        made: tool calls the model made for the request before these.
        previous: canonical hash of the request's last call before these, if any.
    """
    out: list[ToolOutcome | None] = []
    cap = limits.max_tool_calls
    for index, (call, digest) in enumerate(zip(calls, digests, strict=True), start=made):
        refusal = None
        if cap is not None and index >= cap:
            refusal = refuse(
                call,
                ToolErrorKind.TOOL_LIMIT,
                f"Not run: this request may make at most {cap} tool calls, and they are used up.",
                "Answer now with what you have, and say what you could not do.",
            )
        elif limits.block_repeated_calls and digest == previous and not call.truncated:
            # a truncated call is the gate's to refuse: the model must hear it was cut off
            refusal = refuse(
                call,
                ToolErrorKind.REPEATED_CALL,
                f"Not run: this call to {call.name!r} is identical to your previous call; "
                "its result is already in the conversation.",
                "Use that result, or try another way: other arguments, another tool, or "
                "answer with what you know.",
            )
        out.append(refusal)
        previous = digest
    return tuple(out)


def refuse(call: ToolCall, kind: str, message: str, hint: str) -> ToolOutcome:
    """The outcome of a call the runtime did not run: a tool error the model reads."""
    result = tool_error_result(call.id, call.name, tool_error_info(kind, message, hint))
    return ToolOutcome(call=call, message=result, error_class="semantic", executed=False)


def tool_limit_notice(cap: int) -> UserMessage:
    """The turn that tells the model its tool calls are used up and it must answer."""
    return UserMessage(content=TOOL_LIMIT_NOTICE.format(cap=cap), origin="tool_limit")
