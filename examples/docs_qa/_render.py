"""Render the pydoc text of standard-library modules, for the docs QA corpus.

Run by `corpus.py` in a fresh interpreter (`python -S -P -X utf8 _render.py MODULE…`, with
PYTHONHASHSEED=0 and a minimal environment): the imports stay out of the agent's process,
set and dict reprs come out in one order, and nothing on this machine (paths, addresses,
PYTHONDOCS) leaks into the text. Writes one JSON object to stdout:
`{"python": "3.11.7", "docs": {"json": "Python Library Documentation: …", …},
"missing": [modules this build lacks]}`.
"""

from __future__ import annotations

import importlib
import json
import os
import pydoc
import re
import sys
import sysconfig
import warnings

# Sections whose text depends on the machine or the environment, not on the module.
DROPPED_SECTIONS = frozenset({"FILE", "MODULE REFERENCE", "MODULE DOCS"})
_SECTION = re.compile(r"^[A-Z][A-Z ]*[A-Z]$")
_ADDRESS = re.compile(r"(?<= at )0x[0-9a-fA-F]+\b")  # <object object at 0x7f…>


def _places() -> list[tuple[str, str]]:
    """Machine paths → stable placeholders, longest first (a stdlib dir is inside a prefix)."""
    found = {
        sysconfig.get_path("stdlib"): "<stdlib>",
        sysconfig.get_path("platstdlib"): "<stdlib>",
        sys.base_prefix: "<prefix>",
        sys.prefix: "<prefix>",
        os.path.expanduser("~"): "<home>",
    }
    pairs = [(path, name) for path, name in found.items() if path and len(path) > 1]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def normalize(text: str, places: list[tuple[str, str]]) -> str:
    """Drop machine-bound sections, blank out addresses and paths, trim line ends."""
    kept: list[str] = []
    dropping = False
    for line in text.split("\n"):
        if _SECTION.match(line):
            dropping = line in DROPPED_SECTIONS
        if not dropping:
            kept.append(line.rstrip())
    out = "\n".join(kept).strip("\n") + "\n"
    out = _ADDRESS.sub("0x...", out)
    for path, name in places:
        out = out.replace(path, name)
    return out


def render(name: str, places: list[tuple[str, str]]) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(name)
        text = pydoc.render_doc(module, renderer=pydoc.plaintext)  # type: ignore[attr-defined]  # untyped in typeshed
    return normalize(text, places)


def main(names: list[str]) -> int:
    places = _places()
    docs: dict[str, str] = {}
    missing: list[str] = []
    for name in sorted(set(names)):
        try:
            docs[name] = render(name, places)
        except ImportError:  # not built on this platform, or gone in this version
            missing.append(name)
    version = ".".join(str(part) for part in sys.version_info[:3])
    out = {"python": version, "docs": docs, "missing": missing}
    sys.stdout.write(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
