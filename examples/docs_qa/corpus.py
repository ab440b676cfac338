"""The corpus: pydoc text of a fixed list of standard-library modules, made at run time.

Nothing of it is in the repository. The first use renders it in a fresh interpreter
(`_render.py`: fixed hash seed, minimal environment, machine paths and addresses
blanked) and keeps it in the user's cache directory (`$PI_CACHE_DIR`, else
`$XDG_CACHE_HOME/pi`, else `~/.cache/pi`), under a name that holds the Python version and
the module list: the same Python gives the same corpus, byte for byte.

A document's id is its module name (`json`); its sections are pydoc's (`FUNCTIONS`,
`CLASSES`, `DATA`…) and its members (`dumps`, `JSONDecoder`, `JSONDecoder.decode`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pi_runtime.models.local.files import cache_dir

__all__ = ["MODULES", "Corpus", "Doc", "load_corpus"]

# Platform-independent modules whose pydoc does not depend on the machine: no OS
# constants, build versions (hashlib, zlib, pyexpat), time zones, paths or event-loop
# flavour, and nothing deprecated (importing it would warn) or with side effects.
MODULES: tuple[str, ...] = tuple(
    sorted(
        """
    abc argparse array ast atexit base64 bdb binascii bisect cProfile calendar cmath cmd
    code codecs codeop collections collections.abc colorsys compileall configparser
    contextlib contextvars copy copyreg csv dataclasses datetime decimal difflib dis
    doctest email email.message email.utils enum filecmp fileinput fnmatch fractions
    ftplib functools genericpath getopt gettext glob graphlib gzip heapq hmac html
    http http.client http.server imaplib importlib inspect io ipaddress itertools json
    json.decoder json.encoder keyword linecache logging logging.handlers mailbox math
    modulefinder netrc numbers opcode operator optparse pathlib pdb pickle pickletools
    pkgutil plistlib poplib pprint profile pstats py_compile pyclbr pydoc queue quopri
    random re reprlib runpy sched secrets shelve shlex smtplib socketserver stat
    statistics string stringprep struct symtable tabnanny tarfile textwrap timeit token
    tokenize tomllib trace traceback types typing unicodedata unittest urllib
    urllib.parse uuid warnings wave weakref wsgiref xml xml.etree.ElementTree xmlrpc
    zipapp zipfile
    """.split()  # noqa: SIM905 - a block of names reads better than 130 quoted strings
    )
)

FORMAT = "docs-qa-1"
"""Bump when `_render.py` or the section rules change: old caches are then ignored."""

_RENDERER = Path(__file__).with_name("_render.py")
_TOP = re.compile(r"^[A-Z][A-Z ]*[A-Z]$")
_FUNCTION = re.compile(r"^    ([A-Za-z_]\w*)(?: = \w+)?\(")
_CLASS = re.compile(r"^    class ([A-Za-z_]\w*)")
_METHOD = re.compile(r"^     \|  ([A-Za-z_]\w*)(?: = \w+)?(?:\(|$)")


@dataclass(frozen=True, slots=True)
class Span:
    """Lines `start` to `end` (exclusive, 0-based) of a document."""

    start: int
    end: int


@dataclass(frozen=True)
class Doc:
    """One module's documentation."""

    id: str
    text: str
    sections: dict[str, Span] = field(default_factory=dict)

    @cached_property
    def lines(self) -> list[str]:
        return self.text.split("\n")

    def section_text(self, name: str | None) -> list[tuple[int, str]]:
        """(1-based line number, line) of a section, or of the whole document."""
        span = Span(0, len(self.lines)) if name is None else self.sections[name]
        return [(n + 1, self.lines[n]) for n in range(span.start, span.end)]


def sections_of(text: str) -> dict[str, Span]:
    """pydoc's top-level sections and the members inside FUNCTIONS and CLASSES."""
    lines = text.split("\n")
    tops = [(n, line) for n, line in enumerate(lines) if _TOP.match(line)]
    found: dict[str, Span] = {}
    for k, (start, name) in enumerate(tops):
        end = tops[k + 1][0] if k + 1 < len(tops) else len(lines)
        found[name] = Span(start, end)
        if name == "FUNCTIONS":
            _members(lines, start + 1, end, _FUNCTION, "", found)
        elif name == "CLASSES":
            classes = [
                (n, m.group(1)) for n in range(start + 1, end) if (m := _CLASS.match(lines[n]))
            ]
            for j, (at, cls) in enumerate(classes):
                stop = classes[j + 1][0] if j + 1 < len(classes) else end
                found.setdefault(cls, Span(at, stop))
                _members(lines, at + 1, stop, _METHOD, cls, found)
    return found


def _members(
    lines: list[str],
    start: int,
    end: int,
    pattern: re.Pattern[str],
    owner: str,
    out: dict[str, Span],
) -> None:
    heads = [(n, m.group(1)) for n in range(start, end) if (m := pattern.match(lines[n]))]
    for k, (at, name) in enumerate(heads):
        stop = heads[k + 1][0] if k + 1 < len(heads) else end
        while stop > at + 1 and lines[stop - 1].strip(" |") == "":
            stop -= 1  # trailing blank lines and bare `|` rules belong to no one
        if name != owner:  # a class's own signature line heads it, it is no member
            out.setdefault(f"{owner}.{name}" if owner else name, Span(at, stop))


@dataclass(frozen=True)
class Corpus:
    """Every document, by id, and the Python version they document."""

    python: str
    docs: dict[str, Doc]
    missing: tuple[str, ...] = ()

    @cached_property
    def digest(self) -> str:
        body = json.dumps({k: d.text for k, d in sorted(self.docs.items())}, ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()

    @property
    def version(self) -> str:
        """What cursors are bound to: the Python version and the corpus' content."""
        return f"pydoc-{self.python}-{self.digest[:12]}"

    @property
    def size_bytes(self) -> int:
        return sum(len(d.text.encode()) for d in self.docs.values())


def render(modules: tuple[str, ...] = MODULES) -> dict[str, object]:
    """Render the modules' pydoc in a fresh interpreter (see `_render.py`)."""
    env = {"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")}
    if "SYSTEMROOT" in os.environ:  # Windows cannot start Python without it
        env["SYSTEMROOT"] = os.environ["SYSTEMROOT"]
    proc = subprocess.run(
        [sys.executable, "-S", "-P", "-X", "utf8", str(_RENDERER), *modules],
        env=env,
        cwd=Path(_RENDERER).anchor,  # no project file can shadow a module
        capture_output=True,
        check=False,
        timeout=600,
    )
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace")[-2000:]
        raise RuntimeError(f"rendering the pydoc corpus failed (exit {proc.returncode}): {tail}")
    data: dict[str, object] = json.loads(proc.stdout.decode("utf-8"))
    return data


def _cache_file(modules: tuple[str, ...]) -> Path:
    key = hashlib.sha256(
        "\n".join([FORMAT, sys.version, sys.executable, *modules]).encode()
    ).hexdigest()[:16]
    return cache_dir() / "docs_qa" / f"pydoc-{key}.json"


def _read_cached(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("docs"), dict) else None


def _write_cached(path: Path, data: dict[str, object]) -> None:
    with contextlib.suppress(OSError):  # a read-only cache only costs a re-render
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".pydoc-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False)
        os.replace(tmp, path)  # readers never see half a file


_loaded: dict[tuple[str, ...], Corpus] = {}
_lock = threading.Lock()


def load_corpus(modules: tuple[str, ...] = MODULES, *, cache: bool = True) -> Corpus:
    """The corpus for `modules`: from memory, else the cache file, else rendered now."""
    with _lock:
        if cache and modules in _loaded:
            return _loaded[modules]
        path = _cache_file(modules)
        data = _read_cached(path) if cache else None
        if data is None:
            data = render(modules)
            if cache:
                _write_cached(path, data)
        raw_docs = data["docs"]
        assert isinstance(raw_docs, dict)
        docs = {
            name: Doc(name, str(text), sections_of(str(text)))
            for name, text in sorted(raw_docs.items())
        }
        missing = data.get("missing") or []
        assert isinstance(missing, list)
        corpus = Corpus(str(data["python"]), docs, tuple(str(m) for m in missing))
        if cache:
            _loaded[modules] = corpus
        return corpus
