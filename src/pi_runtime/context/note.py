"""The note that stands for dropped turns: its digest lines, what it costs, how it is cut.

When the `window` step drops whole units, one note takes their place: a head saying how
many exchanges left, then a digest line per dropped tool call (name, arguments, result
head) or per dropped turn. One reply may hold a thousand parallel tool calls, so nothing
here tokenizes the growing digest once per line: that was quadratic in the lines, and
ran again before every later model call (seconds each).

Why the cost of a note can be added up line by line: every digest line starts with "- ",
and no piece of o200k_base's pre-tokenizing pattern runs on from a newline into a "-" (a
word never starts on a newline, punctuation takes only newlines and "/" after it, a run
of whitespace ends on its last newline), nor looks past one. So the tokens of
"head\\nline1\\n…\\nlineN" are those of "head\\n", "line1\\n", …, "lineN" put together,
and the sum of their counts is the exact count of the note as sent. Only `count_tokens`
is known to split so: a counter of one's own is asked about the whole text, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..memo import Bounded
from ..messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .summary import Summariser, Summary, summarise
from .tokens import count_tokens

NOTE_HEAD = "[Earlier in this conversation: {units} exchange(s) left out to fit the context.]"

LINE_MEMO = 16_384
"""Texts (a digest line, or one with its newline) whose counts a builder keeps."""


def message_text(message: Message) -> str:
    """The text of a message as a model reads it, for counting."""
    if isinstance(message, AssistantMessage):
        parts = []
        for block in message.content:
            if isinstance(block, TextBlock | ThinkingBlock):
                parts.append(block.text)
            elif isinstance(block, ToolCall):
                parts.append(f"{block.name} {block.raw}")
        return "\n".join(parts)
    return message.content


def units(messages: Sequence[Message], start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) split into units: an assistant message with its tool results, or one message."""
    found: list[tuple[int, int]] = []
    i = start
    while i < end:
        j = i + 1
        if isinstance(messages[i], AssistantMessage):
            while j < end and isinstance(messages[j], ToolResultMessage):
                j += 1
        found.append((i, j))
        i = j
    return found


def digest_lines(messages: Sequence[Message], unit: tuple[int, int]) -> list[str]:
    """One line per tool call of a unit (name, arguments, result head), or the turn's text.

    Every line starts with "- ": the note's count relies on it (see the module)."""
    first = messages[unit[0]]
    results = {
        m.tool_call_id: m
        for m in messages[unit[0] + 1 : unit[1]]
        if isinstance(m, ToolResultMessage)
    }
    if isinstance(first, AssistantMessage) and first.tool_calls:
        lines = []
        for call in first.tool_calls:
            result = results.get(call.id)
            outcome = (
                "no result"
                if result is None
                else ("error " if result.is_error else "") + " ".join(result.content.split())[:120]
            )
            lines.append(f"- {call.name}({call.raw[:160]}) → {outcome}")
        return lines
    role = "user" if isinstance(first, UserMessage) else "assistant"
    return [f"- {role}: {' '.join(message_text(first).split())[:160]}"]


def ranges(dropped: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Adjacent units merged into ranges of message indices."""
    merged: list[list[int]] = []
    for a, b in dropped:
        if merged and merged[-1][1] == a:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return tuple((a, b) for a, b in merged)


class NoteCost:
    """Tokens of `"\\n".join([head, *lines])` as lines join the note, each line counted
    once: with `count_tokens`, from the counts of its lines (kept in `memo` across
    builds); with another counter, by counting the whole text when asked."""

    def __init__(self, counter: Callable[[str], int], head: str, memo: Bounded[str, int]) -> None:
        self._counter = counter
        self._additive = counter is count_tokens
        self._memo = memo
        self._lines: list[str] = []
        self._closed = self._count(head + "\n") if self._additive else 0
        """Tokens of the head and every line but the last, each with its newline."""
        self._head = head
        self._tokens: int | None = None

    def _count(self, text: str) -> int:
        count = self._memo.get(text)
        if count is None:
            count = self._memo.put(text, self._counter(text))
        return count

    def add(self, lines: Sequence[str]) -> None:
        if not lines:
            return
        if self._additive:
            if self._lines:
                self._closed += self._count(self._lines[-1] + "\n")
            for line in lines[:-1]:
                self._closed += self._count(line + "\n")
        self._lines += lines
        self._tokens = None

    def tokens(self) -> int:
        """The note's tokens as it stands."""
        if self._tokens is None:
            if not self._additive:
                self._tokens = self._counter("\n".join([self._head, *self._lines]))
            elif self._lines:
                self._tokens = self._closed + self._count(self._lines[-1])
            else:
                self._tokens = self._count(self._head)
        return self._tokens


def fit_lines(
    counter: Callable[[str], int], head: str, lines: Sequence[str], limit: int
) -> tuple[str, int, bool]:
    """`head` and the newest `lines` that fit in `limit` tokens (the oldest go first; just
    `head` when none fits), the text's tokens, and whether every line fitted.

    It gallops back from the newest line (1, 2, 4, … lines), then halves the gap, counting
    only texts at most about twice the size of what fits: the answer is the one dropping
    the oldest line at a time would give, as a note costs more with every line it keeps.
    """

    def text(kept: int) -> str:
        return "\n".join([head, *lines[len(lines) - kept :]]) if kept else head

    fits, fits_tokens = 0, -1  # the most lines known to fit (0: the head alone, always sent)
    over = len(lines) + 1  # the fewest known not to
    kept = 1
    while kept < over:
        tokens = counter(text(kept))
        if tokens > limit:
            over = kept
            break
        fits, fits_tokens = kept, tokens
        if kept == len(lines):
            break
        kept = min(2 * kept, len(lines))
    while over - fits > 1:
        kept = (fits + over) // 2
        tokens = counter(text(kept))
        if tokens > limit:
            over = kept
        else:
            fits, fits_tokens = kept, tokens
    if fits == 0:
        fits_tokens = counter(head)
        return head, fits_tokens, not lines and fits_tokens <= limit
    return text(fits), fits_tokens, fits == len(lines)


@dataclass(frozen=True, slots=True)
class Note:
    """The note a build sends for its dropped turns, and how it was written."""

    text: str
    tokens: int
    summarised: bool = False
    fallback: str | None = None
    """Why the trimmed digest stands though a summariser was asked."""
    usage: Usage | None = None
    """What the summary call made for this note reported spending."""


class Notes:
    """Writes the notes of one builder's requests; keeps the counts of digest lines and
    the summary of each dropped prefix between them."""

    def __init__(
        self, counter: Callable[[str], int], summariser: Summariser | None, digest_tokens: int
    ) -> None:
        self.counter = counter
        self.summariser = summariser
        self.digest_tokens = digest_tokens
        self._lines: Bounded[str, int] = Bounded(LINE_MEMO)
        self._summaries: dict[int, Summary] = {}

    def cost(self) -> NoteCost:
        """The cost of a note as lines join it, under the template's head."""
        return NoteCost(self.counter, NOTE_HEAD, self._lines)

    async def write(self, digest: list[str], dropped: int, room: int) -> Note:
        """The note for `dropped` units: the digest if it fits, else the summary if there is
        a summariser and its summary fits the room, else the newest digest lines that fit."""
        head = NOTE_HEAD.format(units=dropped)
        limit = min(room, self.digest_tokens)
        trimmed, tokens, whole = fit_lines(self.counter, head, digest, limit)
        if whole or self.summariser is None:
            return Note(trimmed, tokens)
        key, usage = len(digest), None
        made = self._summaries.get(key)
        if made is None:  # once per dropped prefix: a failed call is not retried every turn
            text = "\n".join([head, *digest])
            made = self._summaries[key] = await summarise(self.summariser, text)
            usage = made.usage
        fallback = made.failure
        if fallback is None and not made.text.strip():
            fallback = "the summary was empty"
        if fallback is None:
            text = f"{head}\n{made.text}"
            written = self.counter(text)
            if written <= room:
                return Note(text, written, summarised=True, usage=usage)
            fallback = f"the summary took {written} tokens, more than the {room} left"
        return Note(trimmed, tokens, fallback=fallback, usage=usage)
