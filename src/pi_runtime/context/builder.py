"""The layered context builder: system / tools / context / user under one token budget.

Only the context layer (earlier turns) is ever compressed; the system layer, the tool
definitions and the current user message are sent whole. The memory layer (long-term
facts, `memory`) goes in front of the current user message within its own budget, and
only in the room those three leave: it never crowds them out. The budget is the model's
own window (`context_window_of`) unless `Budget.context_window` says otherwise.

At each new user turn, the tool results of earlier requests that ended in an answer shrink
to their digest (`digest_consumed`, seed 002 §3.4; see `consumed`), whether or not the
request would fit. Further compression runs only when the request would not fit, cheapest
step first (seed 001 §6):

1. `truncate_results` — old tool results longer than `max_result_tokens` keep their head,
   their total size and a reference (`result:<tool_call_id>`) to the full text in the record;
2. `window` — the oldest whole units (an assistant message with all its tool results, or a
   user message) leave the request; a digest line per dropped tool call keeps its name, key
   arguments and the head of its result;
3. `summary` — if the digest itself does not fit, a summariser (a model call) condenses it,
   once per dropped prefix; without one, the oldest digest lines go. A summary that is
   empty, failed or does not fit the room left gives way to that trimmed digest
   (`summary_fallback` says why), so a summariser never takes the request over budget.

Token counts are cached per message index, so building turn N counts only new messages.
The fixed layers' counts (system prompt, tool definitions, runtime block) are also kept
for the process, so a short run does not tokenize the same prompt again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..memo import ByIdentity, chars, small_texts
from ..messages import Message, ToolResultMessage, Usage, UserMessage, quick_init
from ..models import ToolDefinition
from .budget import DEFAULT_CONTEXT_WINDOW, Budget
from .consumed import Digests
from .note import Notes, digest_lines, ranges, units
from .note import message_text as message_text  # where it was always imported from
from .summary import Summariser
from .tokens import count_tokens

MESSAGE_OVERHEAD = 4
"""Tokens a chat format spends around each message (role markers); o200k chat ≈ 3–4."""

MemoryLayer = Callable[[int], str]
"""Gives the memory layer's block that fits in a number of tokens ("" for none)."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltContext:
    """The messages to send and how they were made to fit."""

    messages: tuple[Message, ...]
    layers: dict[str, int]
    anchor: int = -1
    steps: tuple[str, ...] = ()
    dropped: tuple[tuple[int, int], ...] = ()
    truncated: tuple[int, ...] = ()
    digested: tuple[int, ...] = ()
    summary: str | None = None
    summariser: dict[str, Any] | None = None
    """The template the summary was written under (`summariser@1`), when one was."""
    window: int = DEFAULT_CONTEXT_WINDOW
    """The context window the request was budgeted for."""

    over_budget: bool = False
    """The parts never compressed (system, tools, user, recent turns) alone exceed the room."""
    summary_fallback: str | None = None
    """Why the trimmed digest stands for the dropped turns though a summariser was asked:
    its summary was empty, failed, or did not fit the room left."""
    summary_usage: Usage | None = None
    """What the summary call this build made reported spending (None: no call, or a
    summariser that does not say); the run adds it to its usage and budgets."""

    @property
    def total_tokens(self) -> int:
        return sum(self.layers.values())

    def report(self) -> dict[str, Any]:
        """What traces record about the build."""
        report: dict[str, Any] = {
            "anchor": self.anchor,
            "tokens": self.layers,
            "steps": list(self.steps),
            "dropped": list(map(list, self.dropped)),
            "truncated": list(self.truncated),
            "digested": list(self.digested),
            "window": self.window,
            "over_budget": self.over_budget,
        }
        if self.summariser is not None:
            report["summariser"] = self.summariser
        if self.summary_fallback is not None:
            report["summary_fallback"] = self.summary_fallback
        if self.summary_usage is not None:  # the run bills it with the call it preceded
            usage = self.summary_usage
            report["summary_usage"] = {"input": usage.input_tokens, "output": usage.output_tokens}
        return report


@small_texts(256, chars)
def _shared_count(text: str) -> int:
    """`count_tokens(text)`, remembered for texts of up to 64 KiB (so at most about 16 MiB
    of text is kept): the runs of an agent send the same system prompt and tool
    definitions, and tokenizing them was a tenth of a one-turn run."""
    return count_tokens(text)


_TOOLS_TEXTS: ByIdentity[str] = ByIdentity(64)  # MCP tools, listed afresh each run, go


def _shared_tools_text(tools: Sequence[ToolDefinition]) -> str:
    """The tool definitions as the tools layer counts them, written once for the process:
    each run offers new definition objects of the same tools, with the same schemas. The
    same text object also makes its count's lookup free (a string keeps its hash)."""
    schemas = [t.parameters for t in tools]
    named = tuple((t.name, t.description) for t in tools)
    text = _TOOLS_TEXTS.get(schemas, named)
    if text is None:
        text = json.dumps(
            [t.parameters | {"name": t.name, "description": t.description} for t in tools],
            sort_keys=True,
        )
        _TOOLS_TEXTS.put(schemas, text, named)
    return text


def _count_fixed(counter: Callable[[str], int], text: str) -> int:
    # only the default counter is shared: a counter of the caller's own might hold a model
    return _shared_count(text) if counter is count_tokens else counter(text)


class ContextBuilder:
    """Builds each request of one run; keeps per-message token counts between turns.

    Args:
        budget: the budget of each request.
        counter: counts the tokens of a text.
        summariser: condenses dropped turns whose digest does not fit.
        model_window: the window the model reports (`context_window_of`); the budget's
            own `context_window`, when set, wins.
        memory: the memory layer (long-term facts), fitted to the room left each request.
    """

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        counter: Callable[[str], int] = count_tokens,
        summariser: Summariser | None = None,
        model_window: int | None = None,
        memory: MemoryLayer | None = None,
    ) -> None:
        self.budget = budget or Budget()
        self.memory = memory
        self.window = self.budget.window_for(model_window)
        self.reserve = self.budget.reserve_for(self.window)
        self.counter = counter
        self.summariser = summariser
        self._counts: list[int] = []
        self._seen: list[Message] = []
        self._sums: list[int] = [0]  # prefix sums of _counts: any total is O(1)
        self._fixed: dict[tuple[str, str], int] = {}
        self._notes = Notes(counter, summariser, self.budget.digest_tokens)
        self._tools: tuple[Sequence[ToolDefinition], str] | None = None
        self._digests = Digests(lambda m: counter(message_text(m)) + MESSAGE_OVERHEAD)
        self._anchored: tuple[Message, str, UserMessage] | None = None
        self._answer: tuple[str | None, int] = (None, 0)
        """The text of the last answer `count_answer` counted, and its tokens: the same
        text is counted again when the answer joins the history."""

    def count_answer(self, message: Message) -> int:
        """Tokens of a model answer's text (its output, when the provider reported none);
        remembered, so the history does not count the same text a second time."""
        text = message_text(message)
        self._answer = (text, self.counter(text))
        return self._answer[1]

    def count(self, messages: Sequence[Message]) -> list[int]:
        """Token counts of `messages`, counting only those not counted before."""
        known = len(self._counts)
        if known and (known > len(messages) or messages[known - 1] is not self._seen[known - 1]):
            # not an extension of what was counted: find where the history changed
            for i in range(min(known, len(messages))):
                if messages[i] is not self._seen[i]:
                    break
            else:
                i = min(known, len(messages))
            del self._counts[i:], self._seen[i:], self._sums[i + 1 :]
            self._digests.forget(i)
        answer, answer_tokens = self._answer
        for message in messages[len(self._counts) :]:
            text = message_text(message)
            # long hostile answers cost far more to tokenize than to compare
            size = (answer_tokens if text == answer else self.counter(text)) + MESSAGE_OVERHEAD
            self._counts.append(size)
            self._seen.append(message)
            self._sums.append(self._sums[-1] + size)
        return self._counts

    def _tools_text(self, tools: Sequence[ToolDefinition]) -> str:
        # a run offers the very same tools every turn: written out once, not per call
        if self._tools is not None and self._tools[0] is tools:
            return self._tools[1]
        text = _shared_tools_text(tools)
        self._tools = (tools, text)
        return text

    def _fixed_count(self, layer: str, text: str) -> int:
        # keyed by (layer, text), not by their concatenation: a new string every turn
        # would be hashed whole, prompt and tool schemas included
        key = (layer, text)
        count = self._fixed.get(key)
        if count is None:
            count = self._fixed[key] = _count_fixed(self.counter, text) + MESSAGE_OVERHEAD
        return count

    async def build(
        self,
        *,
        system: str,
        tools: Sequence[ToolDefinition],
        messages: Sequence[Message],
        anchor: int,
        runtime: str = "",
    ) -> BuiltContext:
        """The request's messages for `messages`, whose current user message is `anchor`.

        The runtime block goes in front of the current user message, after the
        cache-stable prefix (system + tools).
        """
        counts = self.count(messages)
        tools_text = self._tools_text(tools)
        layers = {
            "system": self._fixed_count("system", system),
            "tools": self._fixed_count("tools", tools_text) if tools else 0,
            "user": (counts[anchor] if anchor >= 0 else 0)
            + (self._fixed_count("runtime", runtime) - MESSAGE_OVERHEAD if runtime else 0),
        }
        memory = self._memory(layers) if anchor >= 0 else ""
        if memory:
            layers["memory"] = self._fixed_count("memory", memory) - MESSAGE_OVERHEAD
            runtime = f"{runtime}\n\n{memory}" if runtime else memory
        available = self.window - self.reserve - sum(layers.values())
        context_tokens = self._sums[len(messages)] - (counts[anchor] if anchor >= 0 else 0)
        out = list(messages)
        digests = self._digests
        if self.budget.digest_consumed and anchor > 0:
            digests.select(messages, anchor, counts)
            context_tokens -= digests.saving
            for i, (digest, _) in digests.chosen.items():
                out[i] = digest
            digested = tuple(digests.chosen)
        else:
            digested = ()
        if anchor >= 0 and runtime:
            out[anchor] = self._with_runtime(messages[anchor], runtime)
        if context_tokens <= available:
            return BuiltContext(
                messages=tuple(out),
                layers=layers | {"context": context_tokens},
                anchor=anchor,
                steps=("digest_consumed",) if digested else (),
                digested=digested,
                window=self.window,
            )
        if digested:
            counts = list(counts)
            for i in digested:
                counts[i] = digests.chosen[i][1]
        return await self._compress(out, counts, anchor, available, layers, digested)

    def _memory(self, layers: dict[str, int]) -> str:
        """The memory block, in the room the system, tools and user layers leave."""
        if self.memory is None:
            return ""
        # less the blank line joining it to the rest of the message
        return self.memory(self.window - self.reserve - sum(layers.values()) - 2)

    def _with_runtime(self, user: Message, runtime: str) -> UserMessage:
        # the same question with the same block every turn of a run: prefixed once
        if self._anchored is not None and self._anchored[:2] == (user, runtime):
            return self._anchored[2]
        assert isinstance(user, UserMessage)
        anchored = replace(user, content=f"{runtime}\n\n{user.content}")
        self._anchored = (user, runtime, anchored)
        return anchored

    async def _compress(
        self,
        out: list[Message],
        counts: list[int],
        anchor: int,
        available: int,
        layers: dict[str, int],
        digested: tuple[int, ...],
    ) -> BuiltContext:
        budget = self.budget
        all_units = (
            units(out, 0, anchor) + units(out, anchor + 1, len(out))
            if anchor >= 0
            else units(out, 0, len(out))
        )
        protected = set(all_units[-budget.keep_recent :]) if budget.keep_recent else set()
        sizes = {i: counts[i] for i in range(len(out)) if i != anchor}
        steps: list[str] = ["digest_consumed"] if digested else []
        truncated: list[int] = []
        for unit in all_units:
            if unit in protected:
                continue
            for i in range(*unit):
                message = out[i]
                if isinstance(message, ToolResultMessage) and sizes[i] > budget.max_result_tokens:
                    out[i], sizes[i] = self._cut(message, budget.max_result_tokens)
                    truncated.append(i)
        if truncated:
            steps.append("truncate_results")
        total = sum(sizes.values())
        dropped: list[tuple[int, int]] = []
        digest: list[str] = []
        # the note's cost as the template's head has it, before it is trimmed to the room
        cost = self._notes.cost()
        for unit in all_units:
            note_cost = cost.tokens() + MESSAGE_OVERHEAD if dropped else 0
            if total + note_cost <= available:
                break  # fits, note for the dropped turns included
            if unit in protected:
                continue
            dropped.append(unit)
            lines = digest_lines(out, unit)
            digest += lines
            cost.add(lines)
            total -= sum(sizes[i] for i in range(*unit))
        summary = note = None
        if dropped:
            steps.append("window")
            room = max(0, available - total - MESSAGE_OVERHEAD)
            note = await self._notes.write(digest, len(dropped), room)
            if note.summarised:
                steps.append("summary")
            summary = note.text
            total += note.tokens + MESSAGE_OVERHEAD
        gone = {i for a, b in dropped for i in range(a, b)}
        kept = [m for i, m in enumerate(out) if i not in gone]
        if summary is not None:
            # the note stands where the last dropped exchange stood, keeping the order of events
            position = sum(1 for i in range(dropped[-1][0]) if i not in gone)
            kept.insert(position, UserMessage(content=summary))
        return BuiltContext(
            messages=tuple(kept),
            layers=layers | {"context": total},
            anchor=anchor,
            over_budget=total > available,
            steps=tuple(steps),
            dropped=ranges(dropped),
            truncated=tuple(truncated),
            digested=digested,
            summary=summary,
            summariser=getattr(self.summariser, "prompt", None) if "summary" in steps else None,
            window=self.window,
            summary_fallback=None if note is None else note.fallback,
            summary_usage=None if note is None else note.usage,
        )

    def _cut(self, message: ToolResultMessage, max_tokens: int) -> tuple[ToolResultMessage, int]:
        text = message.content
        size = len(text.encode())
        head = text[: max_tokens * 3]  # ~3 chars a token for mixed text: a safe first cut
        while head and self.counter(head) > max_tokens - 40:
            head = head[: len(head) * 3 // 4]
        marker = f"\n…[cut: {size} bytes in all; full text in the run record as result:{message.tool_call_id}]"
        content = head + marker
        return replace(message, content=content), self.counter(content) + MESSAGE_OVERHEAD
