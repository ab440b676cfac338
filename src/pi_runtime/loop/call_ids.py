"""Tool call ids a run can keep: each one plain, and used once in its conversation.

A call's id comes from the model or its provider, and names everything that answers the
call: its result, its background job, the approval it waits for. An id given to another
call already would have the store refuse the call's answer (one call, one result) and
leave a durable session stuck. An id is also a URL path segment (`/approvals/{call_id}`)
and goes back to whichever provider continues the conversation (Anthropic takes only
letters, digits, `_` and `-`). So the run keeps an id only if it is new in the
conversation and plain: a letter or digit, then up to 199 letters, digits, `_` or `-`.
Any other is replaced, in the assistant message the run keeps, by one of the run's own:
`pi_<step>_<n>`, the same on a replay.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..messages import AssistantMessage, Message, ToolCall


class CallIds:
    """The call ids of one run's conversation so far (its history's included)."""

    def __init__(self, history: Sequence[Message]) -> None:
        self.used = {
            call.id for m in history if isinstance(m, AssistantMessage) for call in m.tool_calls
        }

    def kept(
        self, message: AssistantMessage, calls: tuple[ToolCall, ...], step: int
    ) -> AssistantMessage:
        """`message` (whose calls are `calls`) with each call id one the run can keep."""
        used = self.used
        fresh = {call.id for call in calls}
        if len(fresh) == len(calls) and used.isdisjoint(fresh) and all(map(plain_call_id, fresh)):
            used |= fresh
            return message
        # the calls whose ids can stay keep them, before any id is made for the rest
        keep: set[int] = set()
        for i, call in enumerate(calls):
            if call.id not in used and plain_call_id(call.id):
                used.add(call.id)
                keep.add(i)
        content = []
        i = 0
        for block in message.content:
            if isinstance(block, ToolCall):
                if i not in keep:
                    block = replace(block, id=self._own(step, i + 1))
                    used.add(block.id)
                i += 1
            content.append(block)
        return replace(message, content=tuple(content))

    def _own(self, step: int, n: int) -> str:
        candidate, again = f"pi_{step}_{n}", 1
        while candidate in self.used:  # a model may have named a call so itself
            again += 1
            candidate = f"pi_{step}_{n}_{again}"
        return candidate


_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,199}")


def plain_call_id(call_id: str) -> bool:
    """Whether the run may keep `call_id` as it came (see the module)."""
    return isinstance(call_id, str) and _PLAIN.fullmatch(call_id) is not None
