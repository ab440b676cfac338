"""Prompts' KV caches saved across processes: a new process does not read the agent's
prompt again, and a torn, corrupted or refused file only costs reading the prompt."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from examples.weather.tools import TOOLS

from pi_runtime.messages import UserMessage
from pi_runtime.models import ModelRequest, ModelSettings
from pi_runtime.models.local import LocalModel
from pi_runtime.models.local.saved import (
    ENV,
    SAVE_TOKENS,
    STALE_S,
    SavedPrompts,
    saved_prompts_root,
)

ROOT = Path(__file__).resolve().parents[1]  # the new processes put it on their path

VOCAB = 1000


def state(*data: int) -> Any:
    return (ctypes.c_uint8 * len(data))(*data)


def saved_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.kv"))


def found(store: SavedPrompts, prompt: list[int]) -> tuple[list[int], bytes, int] | None:
    """The saved sequence `store` finds for `prompt`, loaded: tokens, state, shared."""
    hit = store.find(prompt, limit=100)
    if hit is None:
        return None
    kept = store.load(hit[0], n_vocab=VOCAB, limit=100)
    assert kept is not None
    return kept.tokens, bytes(kept.state), hit[1]


def test_the_sequence_sharing_most_with_the_prompt_is_found_and_loads_whole(
    tmp_path: Path,
) -> None:
    store = SavedPrompts(tmp_path, "model")
    store.save([1, 2, 3, 4], state(10, 11, 12))
    store.save([1, 2, 9], state(20))

    assert found(store, [1, 2, 3, 7]) == ([1, 2, 3, 4], b"\x0a\x0b\x0c", 3)
    assert found(store, [1, 2, 9, 9]) == ([1, 2, 9], b"\x14", 3)
    assert found(store, [5, 6]) is None  # shares nothing
    assert found(SavedPrompts(tmp_path, "another-model-or-build"), [1, 2, 3]) is None
    assert not list(tmp_path.rglob(".*"))  # no temporary file left behind


def test_a_sequence_saved_again_longer_replaces_its_beginning(tmp_path: Path) -> None:
    store = SavedPrompts(tmp_path, "model")
    store.save([1, 2], state(1))
    store.save([7, 8], state(2))
    store.save([1, 2, 3], state(3))

    assert len(saved_files(tmp_path)) == 2  # [1, 2] serves nothing [1, 2, 3] does not
    assert found(store, [1, 2]) == ([1, 2, 3], b"\x03", 2)
    assert found(store, [7, 8]) == ([7, 8], b"\x02", 2)


@pytest.mark.parametrize(
    ("damage", "tokens_readable"),
    [
        (lambda data: data[:-1], True),  # torn
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), True),  # a flipped bit in the state
        (lambda data: data[:52] + bytes([data[52] ^ 1]) + data[53:], True),  # ... a token
        (lambda data: b"NOTPIKV!" + data[8:], False),  # not a saved prompt
        (lambda data: b"", False),
    ],
    ids=["torn", "state-bit", "token-bit", "magic", "empty"],
)
def test_a_damaged_file_is_never_loaded(tmp_path: Path, damage: Any, tokens_readable: bool) -> None:
    store = SavedPrompts(tmp_path, "model")
    store.save([1, 2, 3], state(4, 5, 6))
    (path,) = saved_files(tmp_path)
    path.write_bytes(damage(path.read_bytes()))

    hit = store.find([1, 2, 3], limit=100) or store.find([0, 2, 3], limit=100)
    if tokens_readable:  # found by its tokens, refused by the check of the whole file
        assert hit is not None and store.load(hit[0], n_vocab=VOCAB, limit=100) is None
        assert saved_files(tmp_path) == []  # and removed
    else:
        assert hit is None


def test_a_damaged_file_that_cannot_be_removed_is_still_never_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SavedPrompts(tmp_path, "model")
    store.save([1, 2, 3], state(4, 5, 6))
    (path,) = saved_files(tmp_path)
    path.write_bytes(path.read_bytes()[:-1])

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(f"cannot remove {self}")

    monkeypatch.setattr(Path, "unlink", refuse)
    for _ in range(2):  # raises nothing, loads nothing, each time
        hit = store.find([1, 2, 3], limit=100)
        assert hit is not None and store.load(hit[0], n_vocab=VOCAB, limit=100) is None
    assert saved_files(tmp_path) == [path]


def test_tokens_outside_the_vocabulary_or_past_the_context_are_refused(tmp_path: Path) -> None:
    store = SavedPrompts(tmp_path, "model")
    store.save([1, 2, VOCAB + 5], state(1))
    store.save([3] * 50, state(2))

    outside = store.find([1, 2], limit=100)
    assert outside is not None and store.load(outside[0], n_vocab=VOCAB, limit=100) is None
    assert store.find([3] * 50, limit=49) is None  # longer than the model's context
    long = store.find([3] * 50, limit=50)
    assert long is not None and store.load(long[0], n_vocab=VOCAB, limit=49) is None


def test_the_least_recently_used_files_go_when_all_models_pass_the_budget(
    tmp_path: Path,
) -> None:
    one = SavedPrompts(tmp_path, "one-model", budget=10_000)
    two = SavedPrompts(tmp_path, "two-model", budget=10_000)
    for store, tokens, when in ((one, [1], 1), (two, [2], 2), (one, [3], 3)):
        store.save(tokens, state(*[0] * 3000))
        hit = store.find(tokens, limit=9)
        assert hit is not None
        os.utime(hit[0], ns=(when * 10**9, when * 10**9))
    assert found(one, [1]) is not None  # loading [1] makes it the most recently used

    two.save([4], state(*[0] * 3000))  # four files of about 3 KB pass 10 KB

    assert two.find([2], limit=9) is None  # the least recently used went, and only it
    assert one.find([1], limit=9) and one.find([3], limit=9) and two.find([4], limit=9)


def test_a_killed_writers_temporary_file_goes_at_the_next_save_and_a_live_ones_stays(
    tmp_path: Path,
) -> None:
    store = SavedPrompts(tmp_path, "model", budget=10_000)
    other = tmp_path / "other-model"
    other.mkdir()
    dead = other / ".0123.kv.abcd1234"  # what `replacing` leaves when its process is killed
    dead.write_bytes(b"\0" * 6000)
    old = time.time() - STALE_S - 60
    os.utime(dead, (old, old))
    live = other / ".4567.kv.efgh5678"  # another process writing now
    live.write_bytes(b"\0" * 6000)
    store.save([1], state(*[0] * 3000))
    store.save([2], state(*[0] * 3000))

    assert not dead.exists()
    assert live.exists()
    # the file being written counts against the budget: one of the two saved goes
    assert len(saved_files(tmp_path)) == 1


def test_what_the_trim_cannot_remove_does_not_stop_it_keeping_the_budget(
    tmp_path: Path,
) -> None:
    store = SavedPrompts(tmp_path, "model", budget=10_000)
    odd = tmp_path / "model" / ".0123.kv.abcd1234"  # named like a temporary file, a folder
    odd.mkdir(parents=True)
    (odd / "inside").write_bytes(b"\0" * 6000)
    old = time.time() - STALE_S - 60
    os.utime(odd, (old, old))
    for tokens in ([1], [2], [3]):
        store.save(tokens, state(*[0] * 4000))

    assert odd.is_dir()  # not ours to remove
    assert len(saved_files(tmp_path)) == 2  # and the budget still holds


def test_saving_where_nothing_can_be_written_loses_nothing_but_speed(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    store = SavedPrompts(blocked, "model")

    store.save([1, 2, 3], state(1))  # raises nothing

    assert store.find([1, 2, 3], limit=100) is None
    assert blocked.read_text() == "not a directory"


def test_the_directory_follows_the_setting_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(ENV, raising=False)
    assert saved_prompts_root(True) == tmp_path / "cache" / "prompts"
    assert saved_prompts_root(False) is None
    assert saved_prompts_root(tmp_path / "mine") == tmp_path / "mine"
    monkeypatch.setenv(ENV, str(tmp_path / "elsewhere"))
    assert saved_prompts_root(True) == tmp_path / "elsewhere"
    for off in ("off", "OFF", "0", "false", "no"):
        monkeypatch.setenv(ENV, off)
        assert saved_prompts_root(True) is None
    assert saved_prompts_root(tmp_path / "mine") == tmp_path / "mine"  # given beats the env


# --- the real model, in fresh processes -----------------------------------------------

SYSTEM = "You are a weather assistant for cities in China."
QUESTION = "北京 12 月 5 日天气怎么样？"

ASK = """
import asyncio, json, sys
from pathlib import Path
from pi_runtime.messages import UserMessage
from pi_runtime.models import ModelRequest, ModelSettings
from pi_runtime.models.local import LocalModel
sys.path.insert(0, {root!r})
from examples.weather.tools import TOOLS

model = LocalModel(saved_prompts=Path(sys.argv[1]))
request = ModelRequest(
    system={system!r},
    messages=(UserMessage(content=sys.argv[2]),),
    tools=tuple(t.definition for t in TOOLS),
    settings=ModelSettings(max_tokens=8),
)
response = asyncio.run(model.complete(request))
print(json.dumps({{"input": response.usage.input_tokens, "cached": response.usage.cached_tokens,
                  "finish": response.finish_reason}}))
"""


def ask(saved: Path, question: str) -> dict[str, Any]:
    """One reply of the default model in a new process saving prompts under `saved`."""
    done = subprocess.run(
        [sys.executable, "-c", ASK.format(root=str(ROOT), system=SYSTEM), str(saved), question],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.slow
@pytest.mark.embedded_model
def test_a_new_process_reads_only_what_follows_the_prompt_an_earlier_one_saved(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "prompts"

    first = ask(saved, QUESTION)
    assert first["cached"] == 0 and first["input"] >= SAVE_TOKENS
    (path,) = saved_files(saved)

    again = ask(saved, QUESTION)  # the same prompt: all but its last token, which is re-read
    assert (again["input"], again["cached"]) == (first["input"], first["input"] - 1)
    assert saved_files(saved) == [path]  # it read too little to be saved

    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # a corrupted KV cache is never loaded: the prompt is read again
    path.write_bytes(bytes(data))
    corrupted = ask(saved, QUESTION)
    assert corrupted["cached"] == 0 and corrupted["input"] == first["input"]


@pytest.mark.slow
@pytest.mark.embedded_model
def test_another_question_reads_only_itself_and_a_refused_file_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = LocalModel(max_tokens=8, saved_prompts=tmp_path)
    engine = model._engine()

    def fresh_reply(question: str) -> Any:
        """A reply with nothing held in memory, as in a new process: only the disk can
        spare the reading."""
        engine.prefixes.clear()
        engine.llm.n_tokens = 0
        request = ModelRequest(
            system=SYSTEM,
            messages=(UserMessage(content=question),),
            tools=tuple(t.definition for t in TOOLS),
            settings=ModelSettings(max_tokens=8),
        )
        return asyncio.run(model.complete(request)).usage

    first = fresh_reply(QUESTION)
    (path,) = saved_files(tmp_path)
    other = fresh_reply("上海明天会下雨吗？")  # the same system prompt and tools
    assert first.input_tokens // 2 < other.cached_tokens < other.input_tokens - 4

    forgotten: list[Path] = []
    forget = SavedPrompts.forget
    monkeypatch.setattr(
        SavedPrompts, "forget", lambda self, p: (forgotten.append(p), forget(self, p))
    )
    monkeypatch.setattr(engine.lib, "llama_state_seq_set_data", lambda *args: 0)
    refused = fresh_reply(QUESTION)

    assert (refused.input_tokens, refused.cached_tokens) == (first.input_tokens, 0)
    assert forgotten == [path]
