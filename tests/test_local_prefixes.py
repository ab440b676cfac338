"""Earlier prompts' KV caches on the embedded model: a prompt that comes back is not read again."""

from __future__ import annotations

import asyncio
import ctypes
from typing import Any

import pytest
from examples.weather.tools import TOOLS

from pi_runtime.messages import UserMessage
from pi_runtime.models import ModelRequest, ModelSettings, ResponseDone
from pi_runtime.models.local import LocalModel
from pi_runtime.models.local.prefixes import WORTH_TOKENS, Prefixes, shared


class FakeState:
    """llama.cpp's sequence copy calls over one fake sequence: its bytes are the tokens'."""

    def __init__(self) -> None:
        self.sequence: list[int] = []
        self.refuse = False

    def llama_state_seq_get_size(self, ctx: Any, seq: int) -> int:
        return len(self.sequence)

    def llama_state_seq_get_data(self, ctx: Any, dst: Any, size: int, seq: int) -> int:
        dst[:size] = bytes(self.sequence)
        return size

    def llama_state_seq_set_data(self, ctx: Any, src: Any, size: int, seq: int) -> int:
        if self.refuse:
            self.sequence = []
            return 0
        self.sequence = list(bytes(src)[:size])
        return size


def held(lib: FakeState, tokens: list[int]) -> list[int]:
    lib.sequence = list(tokens)
    return tokens


def test_shared_counts_the_common_beginning() -> None:
    assert shared([1, 2, 3], [1, 2, 4, 5]) == 2
    assert shared([], [1]) == shared([1], [2]) == 0
    assert shared([1, 2], [1, 2, 3]) == 2


def test_a_kept_sequence_comes_back_whole_for_the_prompt_sharing_most() -> None:
    lib = FakeState()
    prefixes = Prefixes(lib, ctx=None)
    a = held(lib, [1] * WORTH_TOKENS + [2])
    prefixes.keep(a)
    b = held(lib, [1] * WORTH_TOKENS + [3, 3])
    prefixes.keep(b)
    lib.sequence = [9]  # the cache moved on

    found = prefixes.best([1] * WORTH_TOKENS + [3, 4])

    assert found is not None and found[0].tokens == b and found[1] == WORTH_TOKENS + 1
    assert prefixes.restore(found[0]) and lib.sequence == b
    assert [k.tokens for k in prefixes.kept] == [a, b]  # most recently used last
    assert prefixes.best([7, 7]) is None


def test_short_sequences_are_not_worth_keeping() -> None:
    lib = FakeState()
    prefixes = Prefixes(lib, ctx=None)
    prefixes.keep(held(lib, [1] * (WORTH_TOKENS - 1)))
    assert prefixes.kept == []


def test_a_copy_of_a_prefix_gives_way_to_the_longer_sequence() -> None:
    lib = FakeState()
    prefixes = Prefixes(lib, ctx=None)
    prefixes.keep(held(lib, [1] * WORTH_TOKENS))
    longer = held(lib, [1] * WORTH_TOKENS + [2, 3])
    prefixes.keep(longer)
    assert [k.tokens for k in prefixes.kept] == [longer]


def test_copies_past_the_budget_go_least_recently_used_first() -> None:
    lib = FakeState()
    prefixes = Prefixes(lib, ctx=None, budget=3 * WORTH_TOKENS)
    first = held(lib, [1] * WORTH_TOKENS)
    prefixes.keep(first)
    second = held(lib, [2] * WORTH_TOKENS)
    prefixes.keep(second)
    prefixes.restore(prefixes.kept[0])  # `first` is used again
    third = held(lib, [3] * WORTH_TOKENS)
    prefixes.keep(third)
    prefixes.keep(held(lib, [4] * WORTH_TOKENS))

    assert [k.tokens[0] for k in prefixes.kept] == [1, 3, 4]
    prefixes.keep(held(lib, [5] * (3 * WORTH_TOKENS + 1)))  # larger than all it may take
    assert [k.tokens[0] for k in prefixes.kept] == [1, 3, 4]


def test_a_copy_llama_cpp_refuses_is_reported() -> None:
    lib = FakeState()
    prefixes = Prefixes(lib, ctx=None)
    prefixes.keep(held(lib, [1] * WORTH_TOKENS))
    lib.refuse = True

    kept = prefixes.kept[0]
    assert isinstance(kept.state, ctypes.Array)

    assert not prefixes.restore(kept)
    assert prefixes.kept == [] and lib.sequence == []  # a copy refused once is not tried again


# --- the real model -------------------------------------------------------------------

SYSTEM = "You are a weather assistant for cities in China."
DEFINITIONS = tuple(t.definition for t in TOOLS)


def reply(model: LocalModel, question: str, *, tools: bool = True) -> Any:
    request = ModelRequest(
        system=SYSTEM,
        messages=(UserMessage(content=question),),
        tools=DEFINITIONS if tools else (),
        settings=ModelSettings(max_tokens=12),
    )

    async def go() -> list[Any]:
        return [e async for e in model.stream(request) if isinstance(e, ResponseDone)]

    (done,) = asyncio.run(go())
    return done.response


@pytest.mark.slow
@pytest.mark.embedded_model
def test_a_tools_prompt_read_before_a_short_one_is_not_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = LocalModel(max_tokens=12)
    engine = model._engine()
    engine.prefixes.clear()
    engine.llm.n_tokens = 0  # nothing from earlier tests to keep
    question = "北京 12 月 5 日天气怎么样？"

    first = reply(model, question)
    reply(model, "你好", tools=False)  # the short prompt replaces the cache
    again = reply(model, question)

    prompt = first.usage.input_tokens
    assert prompt > 2 * WORTH_TOKENS and len(engine.prefixes.kept) == 1
    assert again.usage.cached_tokens == prompt - 1  # all but the last token, re-read
    # the KV cache given back is the one the first reply was written from
    assert [(c.name, c.raw) for c in again.tool_calls] == [
        (c.name, c.raw) for c in first.tool_calls
    ]
    assert again.content == first.content and again.tool_calls

    # a copy llama.cpp refuses: the prompt is read whole, and the reply is the same
    reply(model, "你好", tools=False)
    monkeypatch.setattr(engine.lib, "llama_state_seq_set_data", lambda *args: 0)
    refused = reply(model, question)
    assert refused.usage.cached_tokens == 0
    assert [(c.name, c.raw) for c in refused.tool_calls] == [
        (c.name, c.raw) for c in first.tool_calls
    ]
