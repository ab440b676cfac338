"""Write examples/docs_qa/suite.toml: questions with checkable answers, from the corpus.

    python -m examples.docs_qa.make_suite            # rewrite suite.toml
    python -m examples.docs_qa.make_suite --check    # exit 1 if suite.toml is not current

Every answer is read off pydoc's own text, so it is true of the installed Python:

- `params`: which parameters `module.function` takes → each name must be in the answer;
- `default`: the default of one parameter → the default's spelling must be in the answer;
- `module`: which module documents a function whose name no other document uses → that
  module's name must be in the answer.

Choices are made by sorting on a hash of the name, never at random: the same corpus gives
the same file, byte for byte.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .corpus import Corpus, Doc, load_corpus

__all__ = ["Case", "cases", "render_suite"]

SUITE = Path(__file__).with_name("suite.toml")
PER_KIND = 12
_SIMPLE_DEFAULT = re.compile(r"^(?:-?\d+(?:\.\d+)?|True|False|'[\w.:-]{1,20}')$")


@dataclass(frozen=True, slots=True)
class Case:
    """One question, its expected-answer regex, and where in the corpus the answer is."""

    name: str
    prompt: str
    expect_output: str
    doc_id: str
    section: str


@dataclass(frozen=True, slots=True)
class Function:
    doc_id: str
    name: str
    params: tuple[str, ...]
    defaults: tuple[tuple[str, str], ...]  # (parameter, default as pydoc spells it)


def _parameters(head: str) -> str | None:
    """The text between a signature's outer parentheses, or None when unbalanced."""
    start = head.find("(")
    depth, quote = 0, ""
    for at in range(start, len(head)):
        char = head[at]
        if quote:
            quote = "" if char == quote and head[at - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return head[start + 1 : at]
    return None


def functions(doc: Doc) -> list[Function]:
    """The module-level functions whose signatures Python itself can parse."""
    found: list[Function] = []
    for section, span in doc.sections.items():
        if section.isupper() or "." in section or section.startswith("_"):
            continue
        head = doc.lines[span.start].strip()
        if not head.startswith(section + "("):
            continue  # a class, or an alias (`name = other(...)`)
        inner = _parameters(head)
        if inner is None:
            continue
        source = f"def _({inner}): pass"
        try:
            tree = ast.parse(source)
        except SyntaxError:  # `<object object at 0x...>` and the like
            continue
        args = tree.body[0].args  # type: ignore[attr-defined]
        positional = [*args.posonlyargs, *args.args]
        params = tuple(a.arg for a in [*positional, *args.kwonlyargs])
        if any(p.startswith("_") for p in params):
            continue  # private parameters are not what a reader asks about
        pairs = list(
            zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
        )
        pairs += [
            (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
        ]
        defaults = tuple((a.arg, ast.get_source_segment(source, d) or "") for a, d in pairs)
        found.append(Function(doc.id, section, params, defaults))
    return found


def _rank(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _words(names: list[str]) -> str:
    """A regex that every name, as a whole word, occurs in (any order)."""
    return "(?s)" + "".join(rf"(?=.*\b{re.escape(n)}\b)" for n in names)


def cases(corpus: Corpus, per_kind: int = PER_KIND) -> list[Case]:
    """The suite's cases, in file order."""
    every = [f for doc in corpus.docs.values() for f in functions(doc)]
    members = Counter(s.rsplit(".", 1)[-1] for doc in corpus.docs.values() for s in doc.sections)
    out: list[Case] = []
    used: set[str] = set()

    def pick(kind: str, eligible: list[Function]) -> list[Function]:
        chosen: list[Function] = []
        for f in sorted(eligible, key=lambda f: _rank(f"{kind}:{f.doc_id}.{f.name}")):
            if f.doc_id in used or len(chosen) == per_kind:
                continue
            used.add(f.doc_id)  # one question per module over the whole suite
            chosen.append(f)
        return chosen

    # names of three letters or more: `\ba\b` would match any English answer
    nameable = [f for f in every if 2 <= len(f.params) <= 4 and min(map(len, f.params)) >= 3]
    for f in pick("params", nameable):
        out.append(
            Case(
                f"params-{f.doc_id}-{f.name}",
                f"Which parameters does the function {f.name} in Python's {f.doc_id} module take?",
                _words(list(f.params)),
                f.doc_id,
                f.name,
            )
        )
    simple = [f for f in every if any(_SIMPLE_DEFAULT.match(d) for _, d in f.defaults)]
    for f in pick("default", simple):
        param, default = next((p, d) for p, d in f.defaults if _SIMPLE_DEFAULT.match(d))
        value = default.strip("'")
        out.append(
            Case(
                f"default-{f.doc_id}-{f.name}-{param}",
                f"In Python's {f.doc_id} module, what is the default value of the "
                f"{param} parameter of {f.name}()?",
                rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)",
                f.doc_id,
                f.name,
            )
        )
    unique = [f for f in every if members[f.name] == 1 and len(f.name) >= 6]
    for f in pick("module", unique):
        out.append(
            Case(
                f"module-{f.doc_id}-{f.name}",
                f"Which module of the Python standard library provides the function {f.name}()?",
                rf"\b{re.escape(f.doc_id)}\b",
                f.doc_id,
                f.name,
            )
        )
    return out


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string


def render_suite(corpus: Corpus) -> str:
    """suite.toml's text for `corpus`."""
    minor = ".".join(corpus.python.split(".")[:2])
    lines = [
        f"# Long-document QA over the pydoc of Python {minor} (seed 003): generated by",
        "# examples/docs_qa/make_suite.py from the corpus; do not edit, regenerate with",
        "#   python -m examples.docs_qa.make_suite",
        'agent = "agent.toml"',
    ]
    for case in cases(corpus):
        lines += [
            "",
            "[[case]]",
            f"name = {_string(case.name)}",
            f"prompt = {_string(case.prompt)}",
            'expect_tools = [{ name = "search_docs" }]',
            f"expect_output = {_string(case.expect_output)}",
            'expect_stop = "final_answer"',
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render_suite(load_corpus())
    if argv == ["--check"]:
        current = SUITE.read_text(encoding="utf-8") if SUITE.is_file() else ""
        if current != text:
            sys.stderr.write(f"{SUITE} is not what make_suite.py generates on this Python\n")
            return 1
        return 0
    if argv:
        sys.stderr.write("usage: python -m examples.docs_qa.make_suite [--check]\n")
        return 2
    SUITE.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {SUITE}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
