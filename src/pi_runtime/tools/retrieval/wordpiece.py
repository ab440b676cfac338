"""BERT's uncased WordPiece tokenizer in plain Python, read from a `vocab.txt`.

Why not the `tokenizers` package: it pulls in a hub client, and for the short texts tool
retrieval embeds (a tool description, a user message) plain Python is fast enough. The
rules follow `BertNormalizer` (clean text, spaces around CJK ideographs, strip accents,
lowercase), `BertPreTokenizer` (split on whitespace and punctuation) and greedy
longest-match WordPiece; a test compares the ids with the reference tokenizer's.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

__all__ = ["WordPiece"]

_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_control(char: str) -> bool:
    if char in "\t\n\r":
        return False  # whitespace, kept as a space
    # Cc, Cf, Co, Cs; unassigned code points (Cn) stay and become [UNK], as in the reference.
    return unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    # BERT counts every non-alphanumeric ASCII symbol ($, +, ^, ` …) as punctuation.
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _normalize(text: str) -> str:
    """Clean, isolate CJK ideographs, strip accents, lowercase."""
    out: list[str] = []
    for char in text:
        if char in ("\x00", "\ufffd") or _is_control(char):
            continue
        if char.isspace():
            out.append(" ")
        elif _is_cjk(char):
            out.append(f" {char} ")
        else:
            out.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()


def _pre_tokenize(text: str) -> list[str]:
    """Words split on whitespace, each punctuation character a word of its own."""
    words: list[str] = []
    for chunk in text.split():
        current: list[str] = []
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
    return words


class WordPiece:
    """Text to BERT input ids: `[CLS] pieces… [SEP]`, at most `max_length` ids."""

    def __init__(self, vocab: dict[str, int], *, max_length: int = 256) -> None:
        self.vocab = vocab
        self.max_length = max_length
        self.unk = vocab["[UNK]"]
        self.cls = vocab["[CLS]"]
        self.sep = vocab["[SEP]"]

    @classmethod
    def from_file(cls, path: Path, *, max_length: int = 256) -> WordPiece:
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls({token: index for index, token in enumerate(lines)}, max_length=max_length)

    def _word_ids(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.unk]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else f"##{word[start:end]}"
                found = self.vocab.get(piece)
                if found is not None:
                    ids.append(found)
                    break
                end -= 1
            else:
                return [self.unk]  # one unmatched piece makes the whole word unknown
            start = end
        return ids

    def encode(self, text: str) -> list[int]:
        """Input ids of `text`, truncated to `max_length` including `[CLS]` and `[SEP]`."""
        ids: list[int] = []
        budget = self.max_length - 2
        for word in _pre_tokenize(_normalize(text)):
            ids.extend(self._word_ids(word))
            if len(ids) >= budget:
                break
        return [self.cls, *ids[:budget], self.sep]
