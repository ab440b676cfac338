"""Earlier prompts' KV caches, kept so a conversation that comes back is not read again.

The engine's KV cache holds one sequence: the last prompt and its reply. A turn of an
agent alternates prompts: its calls read the system prompt, the tools and the
conversation, and the answer after them reads a short prompt without the tools
(`chat.answer_messages`). So the next user turn of the same session, or another session
of the same agent, found the tools prompt gone and read it all again: about 700 tokens,
8-9 s on two cores for the weather demo's agent.

Before a prompt that shares little with the cache replaces it, the cache's sequence is
copied out (`llama_state_seq_get_data`: about 12 KB a token for the default model, 3 ms
for 250 tokens). A later prompt that shares more with a kept copy than with the cache gets
that copy back (`llama_state_seq_set_data`, about 1 ms), then reads only what follows.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KEEP_BYTES", "WORTH_TOKENS", "Kept", "Prefixes", "shared"]

WORTH_TOKENS = 64
"""A sequence is kept, and a kept one restored, only for at least this many tokens: below
it, reading them again costs about as little as the copy."""

KEEP_BYTES = 256 << 20
"""What the kept copies may take in all; the least recently used go first."""


def shared(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens `a` and `b` begin with in common."""
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


@dataclass(slots=True)
class Kept:
    """One sequence's tokens and the KV cache llama.cpp holds for them."""

    tokens: list[int]
    state: Any  # a ctypes uint8 array


class Prefixes:
    """Copies of sequence 0 of one llama.cpp context, most recently used last."""

    def __init__(self, lib: Any, ctx: Any, budget: int = KEEP_BYTES) -> None:
        self._lib = lib
        self._ctx = ctx
        self._budget = budget
        self.kept: list[Kept] = []

    def keep(self, tokens: list[int]) -> None:
        """Copy out the cache, which holds exactly `tokens`. A copy of a prefix of them is
        dropped: this one serves every prompt that one did."""
        if len(tokens) < WORTH_TOKENS:
            return
        state = self.copy(self._budget)
        if state is not None:
            self.adopt(Kept(list(tokens), state))

    def copy(self, budget: int) -> Any:
        """The cache's sequence as llama.cpp writes it out (a ctypes uint8 array), or None
        when it is empty, larger than `budget` or llama.cpp fails to copy it."""
        size = int(self._lib.llama_state_seq_get_size(self._ctx, 0))
        if size <= 0 or size > budget:
            return None
        state = (ctypes.c_uint8 * size)()
        if int(self._lib.llama_state_seq_get_data(self._ctx, state, size, 0)) != size:
            return None
        return state

    def adopt(self, kept: Kept) -> None:
        """Hold `kept` as the most recently used copy; copies of a prefix of it go."""
        self.kept = [k for k in self.kept if shared(k.tokens, kept.tokens) < len(k.tokens)]
        self.kept.append(kept)
        while sum(len(k.state) for k in self.kept) > self._budget:
            self.kept.pop(0)

    def best(self, prompt: Sequence[int]) -> tuple[Kept, int] | None:
        """The kept copy sharing the longest beginning with `prompt`, and how long."""
        found = max(
            ((k, shared(k.tokens, prompt)) for k in self.kept), key=lambda f: f[1], default=None
        )
        return found if found is not None and found[1] > 0 else None

    def restore(self, kept: Kept) -> bool:
        """Put `kept` (held or not) back as the cache's sequence, now the most recently used
        copy. False when llama.cpp refuses it: the sequence is then empty, and the copy is
        dropped."""
        self.kept = [k for k in self.kept if k is not kept]
        size = len(kept.state)
        if int(self._lib.llama_state_seq_set_data(self._ctx, kept.state, size, 0)) != size:
            return False
        self.adopt(kept)
        return True

    def clear(self) -> None:
        self.kept.clear()
