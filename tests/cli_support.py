"""`pi` for the CLI tests, two ways: in this process through typer's runner (fast: no
interpreter start, no imports), or as the real console script in a subprocess.

Both return a `Ran` (exit code, stdout, stderr). In-process runs see the given folder as
the current directory and the given variables in the environment, and leave neither
behind: modules imported from folders the run made importable (a test's `mytools.py`)
are forgotten, so the next test imports its own. An exception that escapes the command
fails the test with its traceback (a subprocess would print `Traceback` on stderr).

Keep a few subprocess cases per command family: they alone see what reaches file
descriptor 1, argv as bytes, signals and the console script itself.

`pi` is the one the test files call: either way, with its traces in a folder of the test's
own; `agent_folder` writes the agent file, tools module and script those runs load, and
`executions` reads back what tools noted in the log `pi(..., log=VAR)` hands them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def pi(
    *args: str,
    tmp: Path | None = None,
    cwd: Path | None = None,
    traces: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    log: str | None = None,
    process: bool = False,
    expect: int | None = None,
) -> Ran:
    """`pi ARGS` in-process, or with `process` as the console script in a subprocess.

    It runs in `cwd`, by default TMP/work (made here; not the agent's folder, so nothing
    imports from that by accident). Traces go to `traces`, by default TMP/traces (CWD/traces
    without `tmp`). `env` lies over the environment, and `log` names a variable set to
    TMP/executions.log, where tools in any process note what they ran (see `executions`).
    With `expect`, an exit code other than that fails the test, showing stderr.
    """
    if cwd is None:
        if tmp is None:
            raise TypeError("pi() needs tmp or cwd")
        cwd = tmp / "work"
        cwd.mkdir(exist_ok=True)
    base = tmp if tmp is not None else cwd
    merged: dict[str, str | None] = {"PI_TRACE_DIR": str(traces or base / "traces")}
    if log is not None:
        merged[log] = str(base / "executions.log")
    merged.update(env or {})
    if process:
        done = pi_process(*args, cwd=cwd, env=merged)
        ran = Ran(done.returncode, done.stdout, done.stderr)
    else:
        ran = pi_inprocess(*args, cwd=cwd, env=merged)
    assert expect is None or ran.returncode == expect, ran.stderr
    return ran


def executions(tmp: Path) -> list[str]:
    """The lines tools noted in TMP/executions.log, none when nothing ran."""
    log = tmp / "executions.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def agent_folder(tmp: Path, prefix: str, tools: str, steps: list[Any], agent: str) -> Path:
    """TMP/agent/agent.toml from template `agent` (`{module}` is the tools module), beside
    the module of source `tools` under a fresh name starting with `prefix` (so no earlier
    import of another test's module is reused) and script.json with `steps` (plain dicts
    or `ScriptStep`s)."""
    module = f"{prefix}_{uuid.uuid4().hex[:8]}"
    folder = tmp / "agent"
    folder.mkdir(exist_ok=True)
    (folder / f"{module}.py").write_text(tools, encoding="utf-8")
    dumped = [s if isinstance(s, dict) else s.model_dump(exclude_defaults=True) for s in steps]
    (folder / "script.json").write_text(json.dumps({"steps": dumped}), encoding="utf-8")
    path = folder / "agent.toml"
    path.write_text(agent.replace("{module}", module), encoding="utf-8")
    return path
