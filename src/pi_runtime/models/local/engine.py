"""llama-cpp-python in-process: one loaded model per file, grammar-constrained decoding.

Decoding runs its own sampling loop rather than llama-cpp-python's: llama.cpp's grammar
sampler checks every token of the vocabulary — Gemma has 262,144 — for each token written.
The loop asks the grammar about the 64 likeliest tokens (plus the end-of-generation ones)
and about the whole vocabulary only when none of them fits: the same greedy choices,
about 2.5 times as fast here (29 against 12 tokens/s on two busy cores). Each pass also
checks a draft of the next few tokens taken from the context (`lookahead`).
"""

from __future__ import annotations

import atexit
import codecs
import ctypes
import hashlib
import importlib
import json
import math
import os
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...exceptions import ModelError
from ..base import ToolChoice, ToolDefinition
from .chat import CALL_CLOSE, CALL_OPEN, call_schema, chat_grammar, json_answer_rules
from .lookahead import DRAFT_TOKENS, Batch, draft
from .prefixes import WORTH_TOKENS, Kept, Prefixes, shared
from .prompt import inline_refs, reply_schema
from .saved import SAVE_TOKENS, SavedPrompts

__all__ = [
    "Decoded",
    "Engine",
    "chat_reply_grammar",
    "engine_for",
    "grammar_from_schema",
    "reply_grammar",
]

INSTALL_HINT = "pip install 'pi-runtime[local]'"
TOP_CANDIDATES = 64
REPEAT_PENALTY = 1.1
REPEAT_WINDOW = 64
"""Like llama.cpp's default: tokens of the last 64 written lose some weight, which keeps a
tiny model from looping inside a string (`"00:00:00:00…"`) until the output limit."""
_TOKEN_DTYPE = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])

_engines: dict[tuple[Path, int, int | None], Engine] = {}
_engines_lock = threading.Lock()


def llama_module(name: str = "llama_cpp") -> Any:
    """`llama_cpp` (or one of its modules), or a `ModelError` saying how to install it.

    Before llama.cpp's libraries load: OpenMP threads that wait for each other sleep
    rather than spin, unless the environment says otherwise. Spinning, the second prompt
    thread burned whole time slices whenever another process held the other core: a
    prompt of 11 new tokens took 8 s of CPU instead of 0.3 s, and the weather demo on a
    busy machine 61 s of CPU instead of 44 (OpenMP reads this once, when it loads).
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ModelError(f"the local model needs llama-cpp-python: {INSTALL_HINT}") from None


def reply_grammar(tools: Sequence[ToolDefinition], choice: ToolChoice) -> str:
    """The grammar of a reply (see `reply_schema`).

    A tool whose schema the converter cannot express gets any JSON object as its
    arguments here; the gate still validates them.
    """
    return grammar_from_schema(reply_schema(_usable(tools), choice))


def chat_reply_grammar(
    tools: Sequence[ToolDefinition],
    choice: ToolChoice,
    *,
    one_paragraph: bool = False,
    output: dict[str, Any] | None = None,
) -> str:
    """The grammar of a reply in the chat format (see `chat.chat_grammar`); with an
    `output` schema, the answer is a JSON object matching it."""
    offered = [t for t in tools if choice in ("auto", "required", "none") or t.name == choice]
    calls = call_schema(_usable(offered)) if offered and choice != "none" else None
    if output is not None:
        answer = _usable_schema(output)
        schema = answer if calls is None else {"oneOf": [calls, answer]}
        rules = json_answer_rules(grammar_from_schema(schema), with_calls=calls is not None)
        return chat_grammar(rules, tools, choice, json_answer=True)
    if calls is None:
        return chat_grammar("", tools, choice, one_paragraph=one_paragraph)
    return chat_grammar(grammar_from_schema(calls), tools, choice, one_paragraph=one_paragraph)


def _usable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with local `$ref`s inlined, or any JSON object where the converter fails."""
    inlined = inline_refs(schema)
    try:
        grammar_from_schema(inlined)
    except Exception:  # the converter fails by assertion on what it cannot express
        return {"type": "object"}
    return inlined


def _usable(tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
    """`tools` with local `$ref`s inlined, and any JSON object as the arguments of a tool
    whose schema uses what the converter cannot express (`not`, a dangling `$ref`)."""
    return [replace(d, parameters=_usable_schema(d.parameters)) for d in tools]


def grammar_from_schema(schema: dict[str, Any]) -> str:
    """A GBNF grammar for JSON matching `schema`, with raw control characters kept out
    of strings (llama-cpp-python's converter lets them in, and JSON forbids them)."""
    converter = llama_module("llama_cpp.llama_grammar")
    grammar: str = converter.json_schema_to_gbnf(json.dumps(schema))
    return grammar.replace('char ::= [^"\\\\] |', 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |')


@dataclass(frozen=True, slots=True, kw_only=True)
class Decoded:
    """Token counts of one reply: `cached` prompt tokens were reused from the last call."""

    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    cut: bool


def engine_for(path: Path, *, n_ctx: int, n_threads: int | None = None) -> Engine:
    """The process's engine for `path`, loading the model on first use."""
    with _engines_lock:
        engine = _engines.get((path, n_ctx, n_threads))
        if engine is None:
            if not _engines:
                atexit.register(_close_engines)
            engine = Engine(path, n_ctx=n_ctx, n_threads=n_threads)
            _engines[path, n_ctx, n_threads] = engine
        return engine


def _close_engines() -> None:
    """Free the models at exit, while llama.cpp's bindings still exist: left to the
    garbage collector, `Llama.__del__` runs after them and prints a TypeError."""
    with _engines_lock:
        for engine in _engines.values():
            engine.prefixes.clear()
            engine.lookahead.close()
            engine.llm.close()
        _engines.clear()


class Engine:
    """A loaded GGUF model; one reply decodes at a time."""

    def __init__(self, path: Path, *, n_ctx: int, n_threads: int | None = None) -> None:
        llama_cpp = llama_module()
        _quiet_logs(llama_cpp)
        try:
            self.llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"cannot load the local model {path}: {exc}") from exc
        self.lib = llama_cpp
        self.label = f"local:{path.stem}"
        """What answers record as their model; `local:` tells history who wrote them."""
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.n_vocab = int(self.llm.n_vocab())
        self.n_ctx = int(self.llm.n_ctx())
        self.end_tokens = sorted(
            {int(llama_cpp.llama_vocab_eos(self.vocab)), int(llama_cpp.llama_vocab_eot(self.vocab))}
            - {-1}
        )
        template = self.llm.metadata.get("tokenizer.chat_template")
        self.chat_template: str | None = template if isinstance(template, str) else None
        """The model's own chat template, when the file carries one."""
        special = [t for t in range(self.n_vocab) if self._is_special(t)]
        self.specials = sorted({self._text(t) for t in special} - {""}, key=len, reverse=True)
        """Spellings of control tokens, which text from outside must never form."""
        self.banned = np.array(
            [
                t
                for t in special
                if not llama_cpp.llama_vocab_is_eog(self.vocab, t)
                and self._text(t) not in (CALL_OPEN, CALL_CLOSE)
            ],
            dtype=np.int64,
        )
        """Control tokens a chat reply may not write: only its end and the call tags."""
        self.bos_text = self._text(int(llama_cpp.llama_vocab_bos(self.vocab)))
        self.eos_text = self._text(int(llama_cpp.llama_vocab_eos(self.vocab)))
        self.lock = threading.Lock()
        self.lookahead = Batch(llama_cpp, self.llm.ctx, self.n_vocab, DRAFT_TOKENS + 1)
        self.drafting = True
        """Check drafted tokens along with each one written (see `lookahead`); False
        writes one token a pass."""
        self.prefixes = Prefixes(llama_cpp, self.llm.ctx)
        """Earlier prompts' KV caches, for prompts that come back (see `prefixes`)."""
        stat = path.stat()
        build = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{llama_cpp.__version__}\0"
        self.model_key = hashlib.sha256(
            build.encode("utf-8", "replace") + llama_cpp.llama_print_system_info()
        ).hexdigest()[:16]
        """Names the saved prompts this model file and llama.cpp build may read back."""
        self._saved: dict[Path, SavedPrompts] = {}

    def _is_special(self, token: int) -> bool:
        attributes = int(self.lib.llama_vocab_get_attr(self.vocab, token))
        return bool(
            attributes
            & (self.lib.LLAMA_TOKEN_ATTR_CONTROL | self.lib.LLAMA_TOKEN_ATTR_USER_DEFINED)
        )

    def _text(self, token: int) -> str:
        if token < 0:
            return ""
        raw = self.lib.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""

    def decode(
        self,
        prompt: str,
        grammar: str,
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        on_text: Callable[[str], None],
        stop: threading.Event,
        chat: bool = False,
        saved: Path | None = None,
    ) -> Decoded:
        """Write a reply to `prompt` under `grammar`, passing its text on as it comes.

        `chat`: the prompt is a rendered chat template, whose control tokens are meant
        (text from outside was defanged before rendering) and which brings its own BOS.
        `saved`: the directory of prompts saved across processes (see `saved`), or None.
        """
        with self.lock:
            tokens = self.llm.tokenize(prompt.encode("utf-8"), add_bos=not chat, special=chat)
            if len(tokens) + max_tokens > self.n_ctx:
                raise ModelError(
                    f"the conversation takes {len(tokens)} tokens plus {max_tokens} for the "
                    f"reply, more than the local model's context of {self.n_ctx}; shorten it "
                    "or use a provider with a larger context"
                )
            sampler = self.lib.llama_sampler_init_grammar(
                self.vocab, grammar.encode("utf-8"), b"root"
            )
            if not sampler:
                raise ModelError("the reply grammar built from the tool schemas is invalid")
            store = self._store(saved)
            try:
                cached = self._feed_prompt(tokens, store)
                banned = self.banned if chat else None
                produced, cut = self._sample(
                    sampler, max_tokens, temperature, random.Random(seed), on_text, stop, banned
                )
            finally:
                self.lib.llama_sampler_free(sampler)
            if store is not None and len(tokens) - cached >= SAVE_TOKENS:
                self._save(store)
        return Decoded(
            prompt_tokens=len(tokens), cached_tokens=cached, output_tokens=produced, cut=cut
        )

    def _store(self, root: Path | None) -> SavedPrompts | None:
        if root is None:
            return None
        store = self._saved.get(root)
        if store is None:
            store = self._saved[root] = SavedPrompts(root, self.model_key)
        return store

    def _save(self, store: SavedPrompts) -> None:
        """Save the sequence the cache holds for later processes."""
        state = self.prefixes.copy(store.budget)
        if state is not None:
            store.save(self.llm.input_ids[: self.llm.n_tokens].tolist(), state)

    def _feed_prompt(self, tokens: list[int], store: SavedPrompts | None = None) -> int:
        """Evaluate the prompt, reusing the longest prefix in the KV cache, kept from an
        earlier prompt (`prefixes`) or saved by an earlier process (`saved`); how many
        tokens were reused."""
        llm = self.llm
        held = llm.input_ids[: llm.n_tokens].tolist()
        same = shared(held, tokens)
        if len(held) - same >= WORTH_TOKENS:  # the cache is about to lose what may return
            self.prefixes.keep(held)
        found: tuple[Kept, int] | None = self.prefixes.best(tokens)
        source: Path | None = None
        known = max(same, found[1] if found is not None else 0)
        if store is not None and len(tokens) - known > WORTH_TOKENS:  # the disk may serve more
            on_disk = store.find(tokens, limit=self.n_ctx)
            if on_disk is not None and on_disk[1] - known >= WORTH_TOKENS:
                loaded = store.load(on_disk[0], n_vocab=self.n_vocab, limit=self.n_ctx)
                if loaded is not None:
                    found, source = (loaded, on_disk[1]), on_disk[0]
        if found is not None and found[1] - same >= WORTH_TOKENS:
            kept, same = found
            if self.prefixes.restore(kept):
                llm.input_ids[: len(kept.tokens)] = kept.tokens
            else:  # llama.cpp refused the copy and emptied the sequence
                same = 0
                if store is not None and source is not None:
                    store.forget(source)  # and never offered again
        reuse = min(same, len(tokens) - 1)  # the last token is re-evaluated for its logits
        llm.n_tokens = reuse  # eval drops the cache past it
        llm.eval(tokens[reuse:])
        return reuse

    def _sample(
        self,
        sampler: Any,
        max_tokens: int,
        temperature: float,
        rng: random.Random,
        on_text: Callable[[str], None],
        stop: threading.Event,
        banned: Any = None,
    ) -> tuple[int, bool]:
        lib = self.lib
        llm = self.llm
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        recent: list[int] = []
        produced = 0
        logits = self._last_logits()
        chosen: int | None = None  # chosen from a draft's logits, not yet evaluated

        def write(token: int) -> bool:
            """Take `token` as the reply's next (the grammar advances past it, it is
            counted and passed on); True when it ends the reply instead."""
            nonlocal produced, recent
            lib.llama_sampler_accept(sampler, token)
            if lib.llama_vocab_is_eog(self.vocab, token):
                return True
            produced += 1
            recent = [*recent[-(REPEAT_WINDOW - 1) :], token]
            piece = utf8.decode(llm.detokenize([token]))
            if piece:
                on_text(piece)
            return False

        while produced < max_tokens:
            if stop.is_set():  # abandoned: whatever was written is incomplete
                return produced, True
            token = (
                chosen
                if chosen is not None
                else self._choose(sampler, logits, recent, banned, temperature, rng)
            )
            chosen = None
            if write(token):
                return produced, False
            position = llm.n_tokens
            llm.input_ids[position] = token
            guess = draft(llm.input_ids[: position + 1], min(DRAFT_TOKENS, max_tokens - produced))
            if not self.drafting or not guess:
                llm.eval([token])
                logits = self._last_logits()
                continue
            rows = self._evaluate([token, *guess])
            kept = 0
            for guessed, row in zip(guess, rows, strict=False):
                if stop.is_set():
                    break
                choice = self._choose(sampler, row, recent, banned, temperature, rng)
                if choice != guessed:
                    chosen = choice
                    break
                kept += 1
                if write(choice):
                    self._keep(position + kept)  # the end itself is not kept, as unguessed
                    return produced, False
            self._keep(position + 1 + kept)
            logits = rows[kept]
        return produced, True

    def _last_logits(self) -> Any:
        """The logits after the last token evaluated: a view of llama.cpp's own buffer."""
        return np.ctypeslib.as_array(
            self.lib.llama_get_logits_ith(self.llm.ctx, -1), shape=(self.n_vocab,)
        )

    def _evaluate(self, tokens: list[int]) -> list[Any]:
        """Evaluate `tokens` after those evaluated so far; the logits after each."""
        llm = self.llm
        position = llm.n_tokens  # every pass leaves the KV cache holding exactly these
        rows = self.lookahead.logits(tokens, position)
        llm.input_ids[position : position + len(tokens)] = tokens
        llm.n_tokens = position + len(tokens)
        return rows

    def _keep(self, count: int) -> None:
        """Keep the first `count` evaluated tokens: a draft's rejected tail is forgotten."""
        self.llm.n_tokens = count
        self.llm.eval([])

    def _choose(
        self,
        sampler: Any,
        logits: Any,
        recent: list[int],
        banned: Any,
        temperature: float,
        rng: random.Random,
    ) -> int:
        """The next token from `logits`: control tokens banned, recent ones penalised, then
        the likeliest the grammar allows (or a draw among them when `temperature` > 0)."""
        if recent or banned is not None:
            logits = logits.copy()  # the view may be llama.cpp's own buffer
        if banned is not None and len(banned):
            logits[banned] = -np.inf
        if recent:
            seen = np.array(sorted(set(recent)))
            logits[seen] = np.where(
                logits[seen] > 0, logits[seen] / REPEAT_PENALTY, logits[seen] * REPEAT_PENALTY
            )
        token = self._pick(sampler, logits, TOP_CANDIDATES, temperature, rng)
        if token is None:
            token = self._pick(sampler, logits, self.n_vocab, temperature, rng)
        if token is None:
            raise ModelError("the local model found no token the reply grammar allows")
        return token

    def _pick(
        self, sampler: Any, logits: Any, count: int, temperature: float, rng: random.Random
    ) -> int | None:
        """The token to emit among the `count` likeliest that the grammar allows."""
        if count >= self.n_vocab:
            ids = np.argsort(-logits)
        else:
            top = np.argpartition(logits, -count)[-count:]
            ids = np.unique(np.concatenate([top, np.array(self.end_tokens, dtype=top.dtype)]))
            ids = ids[np.argsort(-logits[ids])]
        candidates = np.zeros(len(ids), dtype=_TOKEN_DTYPE)
        candidates["id"] = ids
        candidates["logit"] = logits[ids]
        array = self.lib.llama_token_data_array(
            data=candidates.ctypes.data_as(ctypes.POINTER(self.lib.llama_token_data)),
            size=len(ids),
            selected=-1,
            sorted=True,
        )
        self.lib.llama_sampler_apply(sampler, ctypes.byref(array))
        allowed = candidates[np.isfinite(candidates["logit"])]
        if len(allowed) == 0:
            return None
        if temperature <= 0:
            return int(allowed["id"][0])
        scaled = (allowed["logit"] - allowed["logit"][0]) / temperature
        weights = [math.exp(float(x)) for x in scaled]
        return int(rng.choices(allowed["id"].tolist(), weights=weights)[0])


_log_callback: Any = None


def _quiet_logs(llama_cpp: Any) -> None:
    """Let only llama.cpp's errors reach stderr: `verbose=False` still prints its notes."""
    global _log_callback
    if _log_callback is not None:
        return
    import sys

    error_level = 3

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def callback(level: int, text: bytes, _user: Any) -> None:
        message = text.decode("utf-8", "replace")
        # llama.cpp logs its choice of a full-size sliding-window cache at error level.
        if level == error_level and "full-size SWA cache" not in message:
            sys.stderr.write(message)

    _log_callback = callback  # keep a reference: ctypes would free the callback
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
