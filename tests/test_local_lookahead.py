"""Prompt-lookup drafting on the embedded model: drafts from the context, checked in one pass."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from examples.weather.tools import TOOLS

from pi_runtime.messages import UserMessage
from pi_runtime.models import ModelRequest, ResponseDone
from pi_runtime.models.local import LocalModel
from pi_runtime.models.local.lookahead import DRAFT_TOKENS, Batch, draft


def tokens(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.intc)


def test_a_draft_is_what_followed_the_latest_earlier_trigram() -> None:
    #                 trigram 1 2 3 -> 9 8;  again -> 4 5 6 7; then the tail 1 2 3
    context = tokens(1, 2, 3, 9, 8, 0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3)

    assert draft(context, 3) == [4, 5, 6]
    assert draft(context, 10) == [4, 5, 6, 7, 1, 2, 3]  # up to the end, not past it


def test_without_an_earlier_trigram_the_bigram_drafts() -> None:
    context = tokens(5, 2, 3, 8, 9, 1, 2, 3)  # "1 2 3" never before; "2 3" did

    assert draft(context, 2) == [8, 9]


def test_no_earlier_occurrence_no_limit_or_a_short_context_drafts_nothing() -> None:
    assert draft(tokens(1, 2, 3, 4, 5, 6), 4) == []
    assert draft(tokens(1, 2, 1, 2), 0) == []
    assert draft(tokens(7, 7), 4) == []  # the tail is not an earlier occurrence of itself
    assert draft(tokens(), 4) == []


def test_the_latest_occurrence_wins_and_a_repeat_drafts_itself() -> None:
    context = tokens(7, 7, 7, 7, 7)

    assert draft(context, 4) == [7]  # after the window ending one short of the tail


class _Lib:
    """Enough of llama_cpp to build a batch and see what the decoder was given."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.freed = 0

    def llama_batch_init(self, capacity: int, _embd: int, _seqs: int) -> Any:
        return SimpleNamespace(
            n_tokens=0,
            token=[0] * capacity,
            pos=[0] * capacity,
            seq_id=[[0] for _ in range(capacity)],
            n_seq_id=[0] * capacity,
            logits=[False] * capacity,
        )

    def llama_decode(self, _ctx: Any, _batch: Any) -> int:
        return self.status

    def llama_batch_free(self, _batch: Any) -> None:
        self.freed += 1


def test_a_batch_refuses_what_it_cannot_hold_and_a_failed_decode_is_a_model_error() -> None:
    from pi_runtime import ModelError

    lib = _Lib(status=1)
    batch = Batch(lib, ctx=None, n_vocab=4, capacity=DRAFT_TOKENS + 1)

    with pytest.raises(ValueError, match=f"1 to {DRAFT_TOKENS + 1} tokens, got 0"):
        batch.logits([], 0)
    with pytest.raises(ValueError, match=f"got {DRAFT_TOKENS + 2}"):
        batch.logits([1] * (DRAFT_TOKENS + 2), 0)
    with pytest.raises(ModelError, match="llama_decode 1"):
        batch.logits([1, 2], 10)
    assert list(batch.batch.pos[:2]) == [10, 11] and batch.batch.logits[:2] == [True, True]
    batch.close()
    batch.close()
    assert lib.freed == 1


def _reply(model: LocalModel, drafting: bool, *, cold: bool = False) -> tuple[Any, int, int]:
    """The reply to the demo's question, and the forward passes it took; from an empty KV
    cache when `cold`, else from what the last call left (all but the prompt's last token,
    for the same question)."""
    engine = model._engine()
    engine.drafting = drafting
    if cold:  # nothing an earlier test left, in the cache or kept
        engine.prefixes.clear()
        engine.llm.n_tokens = 0
    passes = {"one": 0, "drafted": 0}
    evaluate, logits = engine.llm.eval, engine.lookahead.logits

    def one(batch: Any) -> None:
        passes["one"] += bool(batch)
        evaluate(batch)

    def drafted(batch: Any, position: int) -> Any:
        passes["drafted"] += 1
        return logits(batch, position)

    engine.llm.eval, engine.lookahead.logits = one, drafted  # type: ignore[method-assign]
    try:
        request = ModelRequest(
            system="You are a helpful assistant.",
            messages=(UserMessage(content="北京 12 月 5 日天气怎么样？如果下雨，提醒我带伞。"),),
            tools=tuple(t.definition for t in TOOLS),
        )

        async def go() -> list[Any]:
            return [e async for e in model.stream(request) if isinstance(e, ResponseDone)]

        (done,) = asyncio.run(go())
    finally:
        del engine.llm.eval, engine.lookahead.logits
    return done.response, passes["one"] - 1, passes["drafted"]  # less the prompt's pass


@pytest.mark.slow
@pytest.mark.embedded_model
def test_drafting_writes_the_same_reply_in_fewer_passes() -> None:
    model = LocalModel(max_tokens=64)

    alone, one_at_a_time, none_drafted = _reply(model, drafting=False, cold=True)
    drafted, single, checked = _reply(model, drafting=True)

    assert [(c.name, c.raw) for c in drafted.tool_calls] == [
        (c.name, c.raw) for c in alone.tool_calls
    ] and drafted.tool_calls
    assert drafted.usage.output_tokens == alone.usage.output_tokens
    assert none_drafted == 0 and one_at_a_time == alone.usage.output_tokens
    # each pass writes one token and keeps what it can of its draft; a call copies the
    # city, the date and its field names from the question and the tool schemas
    assert checked > 0
    assert alone.usage.output_tokens - (single + checked) >= 5
