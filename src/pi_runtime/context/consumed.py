"""Proactive compression (seed 002 §3.4): results an answered request consumed become digests.

When the user asks something new, the tool results of an earlier request that ended in a
final answer have done their work: the answer holds what the model took from them, and
left whole they crowd the context and invite the model to answer the new question from
stale data. So at each new user turn each such result shrinks to its digest: the head of
its text, its size and the reference to the full text in the run record. The tool call
and its result stay paired, so every provider still accepts the conversation.

Only requests before the current one are touched, and only those whose answer was
accepted (a request a guard stopped, one still awaiting a job, one whose answer the
output contract refused, or one whose answer the output guardrails withheld — its text
replaced by a `WITHHELD` notice — keeps its results: the next question may well be to
try again).
A digest depends on its result alone, so the digested history is the same bytes on every
later request and a provider's prompt cache keeps it.

The conversation is all the builder is given, and it does not say how a request ended.
What it does say: a request ends on an assistant message without tool calls when the
model answered, and the runtime adds a `contract_repair` user turn each time the output
contract refuses an answer. A request that ran out of repairs ends on a refused answer
after its last repair turn, just as a repaired one ends on an accepted answer after it:
the two read the same. So an answer counts as accepted only when no repair turn came
before it in its request; a repaired request keeps its results whole, which costs
tokens, where a digest of a refused request's results would cost the model the data it
needs to try again. (A contract allowing no repairs refuses its first answer without a
trace in the conversation: that request still reads as answered.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..messages import AssistantMessage, Message, ToolResultMessage, UserMessage

WITHHELD = "[withheld: "
"""How the text of an answer the output guardrails withheld begins (`withheld_notice`)."""

DIGEST_CHARS = 120
"""Characters of a result's text its digest keeps (whitespace runs collapsed)."""


def digest_result(message: ToolResultMessage) -> ToolResultMessage:
    """`message` with its content cut to a digest: head, size, and where the rest is."""
    text = message.content
    head = " ".join(text.split())[:DIGEST_CHARS]
    marker = (
        f"…[digest: the answer to an earlier question used this result; "
        f"{len(text.encode())} bytes in all, full text in the run record as "
        f"result:{message.tool_call_id}]"
    )
    return replace(message, content=f"{head}\n{marker}" if head else marker)


def withheld_notice(why: str) -> str:
    """The text that stands in the conversation for an answer withheld because `why`."""
    return f"{WITHHELD}{why}]"


def consumed_results(messages: Sequence[Message], anchor: int) -> list[int]:
    """Indices of the tool results, before `anchor`, of requests whose answer was accepted.

    A request runs from a user-written turn to the next; its answer was accepted when its
    last message is an assistant message without tool calls, not withheld, and the output
    contract never sent a repair turn in it (see the module for why a repaired request
    does not count).
    """
    consumed: list[int] = []
    results: list[int] = []
    repaired = False
    end = max(0, anchor)
    for i in range(end):
        message = messages[i]
        if isinstance(message, ToolResultMessage):
            results.append(i)
        elif isinstance(message, UserMessage) and message.origin == "contract_repair":
            repaired = True
        if i + 1 == end or _starts_request(messages[i + 1]):
            answered = (
                isinstance(message, AssistantMessage)
                and not message.tool_calls
                and not message.text.startswith(WITHHELD)
            )
            if answered and not repaired:
                consumed += results
            results, repaired = [], False
    return consumed


def _starts_request(message: Message) -> bool:
    return isinstance(message, UserMessage) and message.is_request


@dataclass(slots=True)
class Digests:
    """The digests a build uses, cached by message index across the turns of a run.

    `counter` gives a message's token cost; a result whose digest would not be cheaper
    stays whole.
    """

    counter: Callable[[Message], int]
    chosen: dict[int, tuple[ToolResultMessage, int]] = field(default_factory=dict)
    """Index → (digest, its cost) for the current anchor."""
    saving: int = 0
    """Tokens the chosen digests save over the results they replace."""
    _anchor: tuple[int, Message | None] = (-1, None)
    _made: dict[int, tuple[ToolResultMessage, int] | None] = field(default_factory=dict)

    def forget(self, start: int) -> None:
        """The history changed from index `start` on: digests there are stale."""
        for i in [i for i in self._made if i >= start]:
            del self._made[i]
        if start <= self._anchor[0]:
            self._anchor = (-1, None)

    def select(self, messages: Sequence[Message], anchor: int, counts: Sequence[int]) -> None:
        """Set `chosen` and `saving` for a build whose current request starts at `anchor`."""
        key = (anchor, messages[anchor] if 0 <= anchor < len(messages) else None)
        if key[0] == self._anchor[0] and key[1] is self._anchor[1]:
            return  # the same request as the last build: nothing before it changed
        self._anchor = key
        self.chosen, self.saving = {}, 0
        for i in consumed_results(messages, anchor):
            if i not in self._made:
                result = messages[i]
                assert isinstance(result, ToolResultMessage)
                digest = digest_result(result)
                cost = self.counter(digest)
                self._made[i] = (digest, cost) if cost < counts[i] else None
            made = self._made[i]
            if made is not None:
                self.chosen[i] = made
                self.saving += counts[i] - made[1]
