"""`pi` for the CLI tests, two ways: in this process through typer's runner (fast: no
interpreter start, no imports), or as the real console script in a subprocess.

Both return a `Ran` (exit code, stdout, stderr). In-process runs see the given folder as
the current directory and the given variables in the environment, and leave neither
behind: modules imported from folders the run made importable (a test's `mytools.py`)
are forgotten, so the next test imports its own. An exception that escapes the command
fails the test with its traceback (a subprocess would print `Traceback` on stderr).

Keep a few subprocess cases per command family: they alone see what reaches file
descriptor 1, argv as bytes, signals and the console script itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from pi_runtime.cli import app

PI = Path(sys.executable).parent / "pi"
# rich wraps at 80 columns when not on a terminal; colour codes would split words
QUIET = {"COLUMNS": "250", "NO_COLOR": "1"}


@dataclass(frozen=True)
class Ran:
    """What a `pi` command did, shaped like `subprocess.CompletedProcess`."""

    returncode: int
    stdout: str
    stderr: str


def pi_inprocess(*args: str, cwd: Path, env: dict[str, str | None] | None = None) -> Ran:
    """`pi ARGS` in this process, in folder `cwd`, with `env` over the environment."""
    path_before = list(sys.path)
    modules_before = set(sys.modules)
    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, list(args), env={**QUIET, **(env or {})})
    finally:
        os.chdir(here)
        _forget_imports(path_before, modules_before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


def _forget_imports(path_before: list[str], modules_before: set[str]) -> None:
    """Undo what loading `--tools` did: folders put on sys.path and the modules they gave."""
    added = [Path(p).resolve() for p in sys.path if p and p not in path_before]
    sys.path[:] = path_before
    for name in set(sys.modules) - modules_before:
        file = getattr(sys.modules[name], "__file__", None)
        if file and any(Path(file).resolve().is_relative_to(folder) for folder in added):
            del sys.modules[name]


def pi_process(
    *args: str | bytes, cwd: Path, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`pi ARGS` as the console script in a subprocess (text decoded as UTF-8)."""
    merged = {**os.environ, **QUIET, **(env or {})}
    return subprocess.run(
        [str(PI), *args],
        cwd=cwd,
        env={k: v for k, v in merged.items() if v is not None},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
