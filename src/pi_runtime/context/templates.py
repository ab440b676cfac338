"""Versioned prompt templates: files named `NAME@VERSION.md`, identified by content hash.

A template is data, not code: a change is a new version, and every model call's trace
records which name, version and sha256 it was rendered from, so behaviour can be tied
to the exact prompt text that produced it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from ..exceptions import UserError
from ..memo import chars, small_texts

_NAME = re.compile(r"^(?P<name>[a-z][a-z0-9_-]*)@(?P<version>[0-9]+)\.md$")


@small_texts(64, chars)
def _sha256(text: str) -> str:
    """Each run's trace names its template's hash twice: the same few texts, hashed once."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptTemplate:
    name: str
    version: int
    text: str

    @property
    def sha256(self) -> str:
        return _sha256(self.text)

    @property
    def ref(self) -> dict[str, Any]:
        """What traces record about the template."""
        return {"name": self.name, "version": self.version, "sha256": self.sha256}

    def render(self, values: dict[str, str]) -> str:
        """Fill `$placeholders`; a missing one is a `UserError` naming it."""
        try:
            return Template(self.text).substitute(values).strip() + "\n"
        except KeyError as exc:
            raise UserError(
                f"prompt {self.name}@{self.version} needs a value for ${exc.args[0]}"
            ) from None
        except ValueError as exc:
            raise UserError(
                f"prompt {self.name}@{self.version}: {exc}; write $$ for a literal $"
            ) from None


def _candidates(directory: Path | None) -> list[tuple[str, str, str]]:
    """(file name, text, origin) of every template file visible."""
    found = []
    if directory is not None:
        if not directory.is_dir():
            raise UserError(f"prompt directory {directory} does not exist")
        for path in sorted(directory.iterdir()):
            if not (path.is_file() and _NAME.match(path.name)):
                continue  # other files may live beside the templates
            try:
                found.append((path.name, path.read_text(encoding="utf-8"), str(path)))
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(f"cannot read prompt template {path}: {exc}") from exc
    return found + list(_builtin())


@cache
def _builtin() -> tuple[tuple[str, str, str], ...]:
    """The templates shipped in the package: read once, they do not change under a run."""
    package = resources.files(__package__).joinpath("prompts")
    return tuple(
        (p.name, p.read_text(encoding="utf-8"), f"builtin:{p.name}")
        for p in package.iterdir()
        if p.is_file()
    )


def load_template(
    name: str, version: int | None = None, *, directory: Path | None = None
) -> PromptTemplate:
    """The template `name` at `version` (latest when None); `directory` shadows built-ins."""
    versions: dict[int, str] = {}
    for file_name, text, _origin in _candidates(directory):
        match = _NAME.match(file_name)
        if match and match["name"] == name:
            versions.setdefault(int(match["version"]), text)
    if not versions:
        raise UserError(f"no prompt template named {name!r}")
    chosen = max(versions) if version is None else version
    if chosen not in versions:
        raise UserError(f"prompt {name!r} has no version {version}; versions: {sorted(versions)}")
    return PromptTemplate(name=name, version=chosen, text=versions[chosen])
