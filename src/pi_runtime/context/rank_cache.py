"""The token counter's ranks, parsed once per machine: a checked copy in the cache folder.

Why: every process that counts tokens needs o200k's 199,998 ranks. Parsing the shipped
text (gunzip, split, base64, int) costs about 0.2 s of CPU a process, a third of what
`pi run` spends beyond its imports; reading this copy costs about 0.05 s. The copy holds
plain lengths, ranks and bytes, never code (no pickle, no marshal): a damaged or forged
file is refused, and the caller parses the shipped file again and rewrites the copy.

Layout, little-endian: `MAGIC`; the sha256 of everything after it; the size and mtime
(ns) of the shipped file it was parsed from, so a reinstalled package is parsed anew; the
count n; n uint16 lengths; n uint32 ranks; the tokens' bytes one after another.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import tempfile
from array import array
from pathlib import Path

__all__ = ["read_ranks", "write_ranks"]

MAGIC = b"PI-RANKS1\n"
_DIGEST = 32
_HEAD = len(MAGIC) + _DIGEST + 8 + 8 + 4
_MAX_BYTES = 64 << 20
"""Far above o200k's 2.6 MB: a larger file is not one this module wrote."""


def _source_key(source: os.stat_result) -> bytes:
    return source.st_size.to_bytes(8, "little") + source.st_mtime_ns.to_bytes(8, "little")


def _little(values: array[int]) -> bytes:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _numbers(typecode: str, raw: bytes) -> array[int]:
    values = array(typecode)
    values.frombytes(raw)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def read_ranks(path: Path, source: os.stat_result) -> dict[bytes, int] | None:
    """The ranks kept at `path` for the shipped file `source` describes; None when there is
    no such copy, or it is damaged, or it was parsed from another file."""
    try:
        if path.stat().st_size > _MAX_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    body = data[len(MAGIC) + _DIGEST :]
    if (
        len(data) < _HEAD
        or not data.startswith(MAGIC)
        or hashlib.sha256(body).digest() != data[len(MAGIC) : len(MAGIC) + _DIGEST]
        or body[:16] != _source_key(source)
    ):
        return None
    count = int.from_bytes(body[16:20], "little")
    lengths_end = 20 + 2 * count
    ranks_end = lengths_end + 4 * count
    if ranks_end > len(body):
        return None
    lengths = _numbers("H", body[20:lengths_end])
    blob = body[ranks_end:]
    ends = list(itertools.accumulate(lengths))
    if not ends or ends[-1] != len(blob) or 0 in lengths:
        return None
    tokens = map(blob.__getitem__, map(slice, [0, *ends[:-1]], ends))
    ranks = dict(zip(tokens, _numbers("I", body[lengths_end:ranks_end]), strict=True))
    return ranks if len(ranks) == count else None  # a token twice: not what was written


def write_ranks(path: Path, ranks: dict[bytes, int], source: os.stat_result) -> None:
    """Keep `ranks`, parsed and checked from the file `source` describes, at `path`.

    Best effort: a cache folder that cannot be written only means the next process
    parses the shipped file too. The copy appears whole or not at all (a rename).
    """
    temp: str | None = None
    try:
        data = _layout(ranks, source)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temp, 0o644)  # mkstemp's 0600 would hide a shared cache from other users
        os.replace(temp, path)
        temp = None
    except (OSError, OverflowError):  # OverflowError: ranks no uint32 holds, not o200k's
        pass
    finally:
        if temp is not None:
            Path(temp).unlink(missing_ok=True)


def _layout(ranks: dict[bytes, int], source: os.stat_result) -> bytes:
    tokens = list(ranks)
    body = b"".join(
        [
            _source_key(source),
            len(tokens).to_bytes(4, "little"),
            _little(array("H", map(len, tokens))),
            _little(array("I", ranks.values())),
            *tokens,
        ]
    )
    return MAGIC + hashlib.sha256(body).digest() + body
