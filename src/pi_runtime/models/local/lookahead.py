"""Prompt-lookup drafting: guess the next tokens from the conversation, check them in one pass.

A reply copies much of what it was shown: a city and a date from the user's message into
a call's arguments, a result's words into the answer, the call tags and field names of
earlier calls. When the last few tokens written also occur earlier in the context, the
tokens that followed them there are a draft. One forward pass over the token just chosen
plus the draft gives the logits after each of them, for about the price of one token:
writing one token reads the whole model from memory, and a handful more in the same pass
adds little. The decoder then chooses each next token from those logits exactly as it
would have one at a time, and keeps the draft only as far as its choices agree with it.

The reply is what one token at a time chooses (up to the last bits of the arithmetic,
which a batched pass may order differently), in fewer passes: the weather demo's run took
30.2 s instead of 42.7, with the same calls and answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...exceptions import ModelError

__all__ = ["DRAFT_TOKENS", "Batch", "draft"]

DRAFT_TOKENS = 3
"""Tokens drafted per pass. A pass's cost grows with the tokens it returns logits for
(here, idle: 75 ms for one, 103 for four, 137 for five); replaying the demo's replies
against those costs, drafts of three came out best, idle and with the other core busy."""

_MATCHES = (3, 2)
"""The n-grams looked up, longest first: a bigram alone finds a draft more often, a
trigram a better one."""


def draft(context: np.ndarray, limit: int) -> list[int]:
    """Up to `limit` tokens that followed the latest earlier occurrence of `context`'s last
    tokens (3, else 2 of them); none when they never occurred before."""
    size = len(context)
    for n in _MATCHES:
        if size <= n or limit <= 0:
            continue
        tail = context[size - n :]
        # windows that start at 0 .. size-n-1: every earlier position, not the tail itself
        hits = np.ones(size - n, dtype=bool)
        for k in range(n):
            hits &= context[k : size - n + k] == tail[k]
        found = np.flatnonzero(hits)
        if len(found):
            start = int(found[-1]) + n
            return [int(t) for t in context[start : start + limit]]
    return []


class Batch:
    """One llama.cpp batch whose every token yields logits, for checking a draft."""

    def __init__(self, lib: Any, ctx: Any, n_vocab: int, capacity: int) -> None:
        self.lib = lib
        self.ctx = ctx
        self.n_vocab = n_vocab
        self.capacity = capacity
        self.batch = lib.llama_batch_init(capacity, 0, 1)

    def logits(self, tokens: Sequence[int], position: int) -> list[np.ndarray]:
        """Evaluate `tokens` at `position` onward; the logits after each of them (copies)."""
        if not 0 < len(tokens) <= self.capacity:
            raise ValueError(f"a batch holds 1 to {self.capacity} tokens, got {len(tokens)}")
        batch = self.batch
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = position + i
            batch.seq_id[i][0] = 0
            batch.n_seq_id[i] = 1
            batch.logits[i] = True
        status = self.lib.llama_decode(self.ctx, batch)
        if status != 0:
            raise ModelError(
                f"the local model could not evaluate the reply (llama_decode {status})"
            )
        return [
            np.ctypeslib.as_array(
                self.lib.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,)
            ).copy()
            for i in range(len(tokens))
        ]

    def close(self) -> None:
        if self.batch is not None:
            self.lib.llama_batch_free(self.batch)
            self.batch = None
