"""What a benchmark compared: Python's version and the installed release of Pi and of
each peer it measured.

A ratio to a peer holds for that peer's release. A PydanticAI release that imports in
half the time halves `pi bench startup`'s ratio with no change to Pi, and a fresh
install takes whatever release the package index has that day. So every bench that
compares against peers or databases records what it ran against.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, packages_distributions, version

__all__ = ["versions"]

_PI = "pi-runtime"


def versions(modules: Iterable[str] = ()) -> dict[str, str]:
    """`python`, Pi's release and the release of each distribution that installs one of
    `modules` (import names, e.g. `pydantic_ai`); a module not installed is left out."""
    found = {"python": platform.python_version()}
    wanted = list(modules)
    # every installed distribution is scanned (about 0.2 s): only when a module is asked
    owners = packages_distributions() if wanted else {}
    for dist in dict.fromkeys([_PI, *(d for m in wanted for d in owners.get(m, []))]):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            continue
    return found
