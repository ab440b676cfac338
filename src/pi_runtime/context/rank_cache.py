"""The token counter's ranks, parsed once per machine: a checked copy in the cache folder.

Why: every process that counts tokens needs o200k's 199,998 ranks. Parsing the shipped
text (gunzip, split, base64, int) costs about 0.2 s of CPU a process, a third of what
`pi run` spends beyond its imports; reading this copy costs about 0.05 s. The copy holds
plain lengths, ranks and bytes, never code (no pickle, no marshal). Its content must hash
to a digest pinned in the code, as the shipped file's must: a damaged or forged copy is
refused, and the caller parses the shipped file again and rewrites the copy.

Layout, little-endian: `MAGIC`; the size and mtime (ns) of the shipped file it was parsed
from, so a reinstalled package is parsed anew; then the content: the count n, n uint16
lengths, n uint32 ranks, the tokens' bytes one after another.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
import sys
from array import array
from pathlib import Path

from ..cachedir import replacing

__all__ = ["content", "read_ranks", "write_ranks"]

MAGIC = b"PI-RANKS2\n"
_KEY = 16
_MAX_BYTES = 64 << 20
"""Far above o200k's 2.6 MB: a larger file is not one this module wrote."""


def _source_key(source: os.stat_result) -> bytes:
    return source.st_size.to_bytes(8, "little", signed=True) + source.st_mtime_ns.to_bytes(
        8, "little", signed=True
    )


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


def content(ranks: dict[bytes, int]) -> bytes:
    """The copy's content for `ranks` (what its pinned digest is of). Raises OverflowError
    for ranks no uint32 holds or tokens longer than 65,535 bytes."""
    tokens = list(ranks)
    return b"".join(
        [
            len(tokens).to_bytes(4, "little"),
            _little(array("H", map(len, tokens))),
            _little(array("I", ranks.values())),
            *tokens,
        ]
    )


def _read(path: Path) -> bytes | None:
    """The bytes of the regular file at `path`, when it is one of at most `_MAX_BYTES`."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block
    except OSError:
        return None
    try:
        with os.fdopen(handle, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return None
            data = file.read(_MAX_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= _MAX_BYTES else None


def read_ranks(path: Path, source: os.stat_result, sha256: str) -> dict[bytes, int] | None:
    """The ranks kept at `path` for the shipped file `source` describes, whose content
    hashes to `sha256`; None when there is no such copy, or it is damaged or forged, or it
    was parsed from another file."""
    data = _read(path)
    if (
        data is None
        or not data.startswith(MAGIC)
        or data[len(MAGIC) : len(MAGIC) + _KEY] != _source_key(source)
    ):
        return None
    body = data[len(MAGIC) + _KEY :]
    if hashlib.sha256(body).hexdigest() != sha256 or len(body) < 4:
        return None
    count = int.from_bytes(body[:4], "little")
    lengths_end = 4 + 2 * count
    ranks_end = lengths_end + 4 * count
    if ranks_end > len(body):
        return None
    lengths = _numbers("H", body[4:lengths_end])
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
    try:
        data = MAGIC + _source_key(source) + content(ranks)
        with replacing(path) as out:
            out.write(data)
    except (OSError, OverflowError):  # OverflowError: ranks no uint32 holds, not o200k's
        pass
