"""The tool calls of one AG-UI stream, under the ids the run keeps.

A provider names each call as it streams it, but the run keeps a call's id only if it is
plain and new to the conversation (`loop.call_ids`: printable, at most 200 characters,
not given to an earlier call); any other it replaces with one of its own
(`pi_<step>_<n>`), known only once the model's message is whole. So a call streams live
only under an id the run keeps, by that same rule; another call's pieces are held back
and the call is sent whole, under the id the run gave it, with the message.

Every `TOOL_CALL_START` then has one `TOOL_CALL_END` and, once the call runs, its
`TOOL_CALL_RESULT`, all under one id: two calls given one id do not share one stream of
arguments, a replaced id is not left without a result, and a server numbering its calls
anew each answer (`call_0` every time) does not start a call twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from ag_ui.core import BaseEvent, ToolCallArgsEvent, ToolCallEndEvent, ToolCallStartEvent

from ..loop.call_ids import plain_call_id as keepable  # the run's own rule, not a copy
from ..messages import AssistantMessage


class StreamedCalls:
    """The calls of one stream: which stream live, which are open, which ids are used.

    Args:
        history: the ids of the calls in the conversation before this stream's run.
    """

    def __init__(self, history: Iterable[str] = ()) -> None:
        self.used: set[str] = set(history)
        self.open: dict[str, str] = {}  # live calls not ended: id → arguments sent so far
        self._ended: set[str] = set()  # live calls ended before their message was whole
        self._named: set[str] = set()  # ids named so far in the answer being streamed
        self._live: set[str] = set()  # ids whose later pieces stream live (the last named)

    def first(self, call_id: str, name: str) -> bool:
        """A call's first piece names it: whether it opens live now. It does when the run
        keeps `call_id` and the call has a name; else its pieces wait for the message."""
        kept = call_id not in self.used and call_id not in self._named and keepable(call_id)
        self._named.add(call_id)
        if kept and name and call_id not in self._ended:
            self._live.add(call_id)
            self.open[call_id] = ""
            return True
        self._live.discard(call_id)  # a second call of this id: its pieces are its own
        return False

    def piece(self, call_id: str, delta: str) -> bool:
        """A piece of `call_id`'s arguments: whether it is sent now (the call is open)."""
        if call_id not in self._live or call_id not in self.open:
            return False
        self.open[call_id] += delta
        return True

    def end_open(self, now: int) -> list[BaseEvent]:
        """`TOOL_CALL_END` for each live call still open (text starts, the answer failed)."""
        out: list[BaseEvent] = [
            ToolCallEndEvent(tool_call_id=call_id, timestamp=now) for call_id in self.open
        ]
        self._ended.update(self.open)
        self._live.difference_update(self.open)
        self.open.clear()
        return out

    def abandon(self) -> None:
        """The answer failed: a retry names its calls anew, and streams them again even
        under ids the failed answer had already ended."""
        self._named.clear()
        self._live.clear()
        self._ended.clear()

    def whole(self, message: AssistantMessage, message_id: str, now: int) -> list[BaseEvent]:
        """The message's calls, as the run keeps them: the rest of each live call's
        arguments, each held call whole, and `TOOL_CALL_END` for every call still open."""
        out: list[BaseEvent] = []
        for call in message.tool_calls:
            self.used.add(call.id)
            if call.id in self._ended:
                continue  # streamed and already ended
            sent = self.open.pop(call.id, None)
            if sent is None:
                start = ToolCallStartEvent(
                    tool_call_id=call.id,
                    tool_call_name=call.name,
                    parent_message_id=message_id,
                    timestamp=now,
                )
                out.append(start)
                sent = ""
            if call.raw.startswith(sent) and len(call.raw) > len(sent):
                rest = call.raw[len(sent) :]  # what the final arguments add to the streamed
                out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=rest, timestamp=now))
            out.append(ToolCallEndEvent(tool_call_id=call.id, timestamp=now))
        out += self.end_open(now)  # streamed calls the final message does not hold
        self.abandon()  # the answer is whole: the next one names its calls anew
        return out
