"""Prompts' KV caches saved on disk, so a new process does not read an agent's prompt again.

`prefixes` keeps earlier prompts for the life of one process. But every `pi run` is a new
process, and its first prompt reads the agent's system prompt and tool schemas again:
the same 690 tokens each time for the weather demo's agent, about 6 s on two cores.

After a reply that read at least `SAVE_TOKENS` new prompt tokens, the sequence the
engine holds (that prompt and its reply) is saved here. A later prompt sharing at least
`WORTH_TOKENS` more tokens with a saved sequence than with anything the process holds
loads it back and reads only what follows.

One file a sequence, named by the digest of its tokens, in a directory per model file and
llama.cpp build (a KV cache is valid only for the weights and kernels that wrote it): a
header, the tokens, llama.cpp's sequence state, and a SHA-256 over them, checked before
use. A torn, corrupted or refused file is removed and the prompt read again. Files are
written under a temporary name and renamed, so processes can share the directory; the
least recently used go first when all the saved files pass `SAVE_BYTES`. A temporary
file older than `STALE_S` is a killed writer's and goes at the next save.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import struct
import time
from collections.abc import Sequence
from io import BufferedReader
from pathlib import Path
from stat import S_ISREG
from typing import Any

from ...cachedir import cache_dir, replacing
from .prefixes import WORTH_TOKENS, Kept, shared

__all__ = ["SAVE_BYTES", "SAVE_TOKENS", "STALE_S", "SavedPrompts", "saved_prompts_root"]

SAVE_TOKENS = WORTH_TOKENS
"""A reply is saved only when its prompt read at least this many new tokens. Saving 1,000
tokens' KV cache (12.7 MB) takes about 30 ms and loading it about 20 ms, against about
0.5 s to read 64 tokens on two cores."""

SAVE_BYTES = 256 << 20
"""What the saved files may take on disk in all, every model's together."""

STALE_S = 600
"""A temporary file this old is left by a writer that died: a save takes well under a
second, so no live writer holds one."""

_MAGIC = b"PIKVSEQ1"
_HEADER = struct.Struct("<8sIQ32s")  # magic, token count, state bytes, SHA-256
_TOKEN = struct.Struct("<i")
_SUFFIX = ".kv"
ENV = "PI_SAVED_PROMPTS"


def saved_prompts_root(setting: Path | bool) -> Path | None:
    """Where prompts are saved: `setting` if a directory; for True `$PI_SAVED_PROMPTS`
    (`off` for nowhere) or else `prompts` in the cache directory; None for False."""
    if isinstance(setting, Path):
        return setting
    if not setting:
        return None
    given = os.environ.get(ENV, "").strip()
    if given.lower() in ("off", "0", "false", "no"):
        return None
    return Path(given) if given else cache_dir() / "prompts"


class SavedPrompts:
    """The saved sequences of one model file and llama.cpp build, under `root`."""

    def __init__(self, root: Path, model_key: str, budget: int = SAVE_BYTES) -> None:
        self.root = root
        self.directory = root / model_key
        self.budget = budget

    def find(self, prompt: Sequence[int], *, limit: int) -> tuple[Path, int] | None:
        """The saved file whose tokens share the longest beginning with `prompt`, and how
        many; None when none shares any."""
        found: tuple[Path, int] | None = None
        for path in self._files(self.directory):
            tokens = _read_tokens(path, n_vocab=None, limit=limit)
            if tokens is not None and (count := shared(tokens, prompt)) > (found or (path, 0))[1]:
                found = (path, count)
        return found

    def load(self, path: Path, *, n_vocab: int, limit: int) -> Kept | None:
        """The sequence saved in `path` if the file passes its check; else it is removed."""
        try:
            with path.open("rb") as file:
                kept = _read(file, n_vocab=n_vocab, limit=limit)
        except OSError:
            return None
        if kept is None:
            self.forget(path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: trimmed last
        return kept

    def save(self, tokens: list[int], state: Any) -> None:
        """Save `state`, the KV cache of exactly `tokens`. Saved sequences that are a
        beginning of `tokens` go: this one serves every prompt they did. Never raises: a
        cache that cannot be written is only slower."""
        raw_tokens = b"".join(_TOKEN.pack(t) for t in tokens)
        payload = memoryview(state).cast("B")  # written and hashed in place, not copied
        digest = hashlib.sha256(raw_tokens)
        digest.update(payload)
        name = hashlib.sha256(raw_tokens).hexdigest()[:32] + _SUFFIX
        try:
            with replacing(self.directory / name) as out:
                out.write(_HEADER.pack(_MAGIC, len(tokens), len(payload), digest.digest()))
                out.write(raw_tokens)
                out.write(payload)
            for path in self._files(self.directory):
                held = _read_tokens(path, n_vocab=None, limit=len(tokens))
                if path.name != name and held is not None and shared(held, tokens) == len(held):
                    path.unlink(missing_ok=True)
            self._trim()
        except OSError:
            return

    def forget(self, path: Path) -> None:
        """Remove a damaged saved file, or one llama.cpp refused. A file that cannot be
        removed stays: it is checked again on every use and never loaded."""
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)

    def _trim(self) -> None:
        """Remove killed writers' temporary files, then the least recently used files
        until all of them fit the budget (temporary files being written count too)."""
        files = []
        writing = 0
        stale = time.time_ns() - STALE_S * 10**9
        for path in self._every_file():
            try:
                stat = path.lstat()
            except OSError:
                continue
            if not S_ISREG(stat.st_mode):
                continue  # none of ours: this directory holds only the files it writes
            if not path.name.startswith("."):
                files.append((stat.st_mtime_ns, stat.st_size, path))
            elif stat.st_mtime_ns < stale:
                self.forget(path)
            else:
                writing += stat.st_size
        total = writing + sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total <= self.budget:
                break
            self.forget(path)  # one that cannot go must not keep the others
            total -= size

    def _every_file(self) -> list[Path]:
        """Every model's saved files and the temporary files they are written under."""
        try:
            return [
                path
                for path in self.root.glob(f"*/*{_SUFFIX}*")
                if path.name.endswith(_SUFFIX) or path.name.startswith(".")
            ]
        except OSError:
            return []

    @staticmethod
    def _files(directory: Path) -> list[Path]:
        try:
            return sorted(p for p in directory.glob(f"*{_SUFFIX}") if not p.name.startswith("."))
        except OSError:
            return []


def _read_tokens(path: Path, *, n_vocab: int | None, limit: int) -> list[int] | None:
    """The tokens a saved file holds (unchecked: `_parse` checks the whole file)."""
    try:
        with path.open("rb") as file:
            header = file.read(_HEADER.size)
            if len(header) != _HEADER.size:
                return None
            magic, count, _, _ = _HEADER.unpack(header)
            if magic != _MAGIC or count > limit:
                return None
            raw = file.read(count * _TOKEN.size)
    except OSError:
        return None
    return _tokens(raw, count, n_vocab)


def _tokens(raw: bytes, count: int, n_vocab: int | None) -> list[int] | None:
    if len(raw) != count * _TOKEN.size:
        return None
    tokens = [t for (t,) in _TOKEN.iter_unpack(raw)]
    if n_vocab is not None and any(t < 0 or t >= n_vocab for t in tokens):
        return None
    return tokens


def _read(file: BufferedReader, *, n_vocab: int, limit: int) -> Kept | None:
    """The sequence in `file`, read straight into the buffer llama.cpp takes, if its
    header, size and digest hold and its tokens are the model's."""
    header = file.read(_HEADER.size)
    if len(header) != _HEADER.size:
        return None
    magic, count, size, digest = _HEADER.unpack(header)
    if magic != _MAGIC or count > limit or size == 0 or size > SAVE_BYTES:
        return None
    raw = file.read(count * _TOKEN.size)
    state = (ctypes.c_uint8 * size)()
    if file.readinto(memoryview(state).cast("B")) != size or file.read(1):
        return None
    check = hashlib.sha256(raw)
    check.update(memoryview(state).cast("B"))
    if check.digest() != digest:
        return None
    tokens = _tokens(raw, count, n_vocab)
    return None if tokens is None else Kept(tokens, state)
