"""Finding things in the corpus, deterministically: BM25 over sections, and a sentence
picker for one document. Built in memory at first use; no model, no download.

- `Index.search(query, limit)`: the best (doc id, section) units for a query, with a
  snippet each. A unit is a member (`dumps`, `JSONDecoder.decode`) or a top-level section
  that holds no members (`DESCRIPTION`, `DATA`); its id and section name count three times.
- `analyze(doc, question)`: the signatures and sentences of one document that share the
  most (rare) words with the question, members the question names first.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from .corpus import Corpus, Doc

__all__ = ["Finding", "Hit", "Index", "analyze", "terms"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_STOP = frozenset(
    """a an and are as at be by can do does for from how i in is it its of on or that the
    this to what when which with you your should would will there their into than then""".split()  # noqa: SIM905
)
_CONTAINERS = frozenset({"CLASSES", "FUNCTIONS"})  # their members are indexed instead
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(*])")
_ASKS_SIGNATURE = frozenset(
    {"parameter", "parameters", "argument", "arguments", "default", "signature", "take", "takes"}
)
K1, B = 1.2, 0.75
SNIPPET_CHARS = 160


def terms(text: str) -> list[str]:
    """Lower-case words and, for `snake_case` words, their parts too; no stop words."""
    out: list[str] = []
    for word in _WORD.findall(text):
        word = word.lower().strip("_")
        if not word or word in _STOP:
            continue
        out.append(word)
        parts = [p for p in word.split("_") if p and p not in _STOP]
        if len(parts) > 1:
            out.extend(parts)
    return out


@dataclass(frozen=True, slots=True)
class Hit:
    doc_id: str
    section: str
    score: float
    snippet: str


def _snippet(lines: list[str]) -> str:
    text = " ".join(line.strip(" |") for line in lines if line.strip(" |"))
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


class Index:
    """BM25 over every unit of the corpus."""

    def __init__(self, corpus: Corpus) -> None:
        self.units: list[tuple[str, str]] = []
        self._snippets: list[str] = []
        lengths: list[int] = []
        postings: dict[str, list[tuple[int, int]]] = {}
        for doc in corpus.docs.values():
            for section, span in doc.sections.items():
                if section in _CONTAINERS or section == "NAME":
                    continue
                body = doc.lines[span.start : span.end]
                name = f"{doc.id} {section}".replace(".", " ")
                words = terms(name) * 3 + terms("\n".join(body))
                unit = len(self.units)
                self.units.append((doc.id, section))
                self._snippets.append(_snippet(body[:4]))
                lengths.append(len(words))
                for term, tf in Counter(words).items():
                    postings.setdefault(term, []).append((unit, tf))
        self._postings = postings
        self._lengths = lengths
        self._average = sum(lengths) / max(1, len(lengths))
        total = len(self.units)
        self._idf = {
            t: math.log(1 + (total - len(p) + 0.5) / (len(p) + 0.5)) for t, p in postings.items()
        }

    def search(self, query: str, limit: int) -> list[Hit]:
        scores: dict[int, float] = {}
        for term in dict.fromkeys(terms(query)):
            idf = self._idf.get(term, 0.0)
            for unit, tf in self._postings.get(term, ()):
                norm = K1 * (1 - B + B * self._lengths[unit] / self._average)
                scores[unit] = scores.get(unit, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        best = sorted(scores.items(), key=lambda item: (-round(item[1], 9), self.units[item[0]]))
        return [
            Hit(*self.units[unit], round(score, 3), self._snippets[unit])
            for unit, score in best[:limit]
        ]


@dataclass(frozen=True, slots=True)
class Finding:
    section: str
    line: int
    text: str
    score: float


def _passages(doc: Doc) -> list[tuple[str, int, str, bool]]:
    """(section, line, text, is_signature) for every signature and sentence of `doc`."""
    out: list[tuple[str, int, str, bool]] = []
    for section, span in doc.sections.items():
        if section in _CONTAINERS:
            continue
        if "." not in section and any(s.startswith(section + ".") for s in doc.sections):
            span = type(span)(span.start, span.start + 1)  # a class: its head; members follow
        first = doc.lines[span.start].strip(" |")
        is_member = not section.isupper()
        if is_member:
            out.append((section, span.start + 1, first, True))
        paragraph: list[str] = []
        start = 0
        for n in range(span.start + 1, span.end + 1):  # one past the end closes a paragraph
            line = doc.lines[n].strip(" |") if n < span.end else ""
            if line:
                if not paragraph:
                    start = n + 1
                paragraph.append(line)
                continue
            if paragraph:
                out.extend(
                    (section, start, sentence, False)
                    for sentence in _SENTENCE.split(" ".join(paragraph))
                )
                paragraph = []
    return out


def analyze(doc: Doc, question: str, limit: int = 6) -> list[Finding]:
    """The passages of `doc` that best answer `question`, best first."""
    asked = terms(question)
    if not asked:
        return []
    passages = _passages(doc)
    seen = Counter(t for p in passages for t in set(terms(p[2])))
    total = len(passages)
    wanted = set(asked)
    # members the question names: `decode`, or better `JSONDecoder.decode` (both parts)
    named = {
        s: sum(part.lower() in wanted for part in s.split("."))
        for s in doc.sections
        if s.rsplit(".", 1)[-1].lower() in wanted
    }
    wants_signature = bool(wanted & _ASKS_SIGNATURE)
    scored: list[Finding] = []
    for section, line, text, is_signature in passages:
        words = set(terms(text))
        score = sum(math.log(1 + total / (1 + seen[t])) for t in wanted & words)
        if section in named:
            score *= 1.0 + named[section]
            if is_signature:
                score += 5.0 + (5.0 if wants_signature else 0.0)
        if score > 0:
            scored.append(Finding(section, line, text, round(score, 3)))
    scored.sort(key=lambda f: (-f.score, f.line, f.text))
    return scored[:limit]
