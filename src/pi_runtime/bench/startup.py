"""Cold start: `pi --help` and `import pi_runtime` against importing the peer frameworks.

Each command runs as a fresh interpreter; the commands take turns, so a busy machine slows
them alike, and the median of `repeat` runs is kept.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .peers import PEERS, module_of
from .versions import versions

_PI_MAIN = "import sys; sys.argv[:] = {argv!r}; from pi_runtime.cli import main; main()"

SYSTEMS: tuple[tuple[str, str, str], ...] = (
    ("python", "python -c pass", "pass"),
    ("pi --help", "pi --help", _PI_MAIN.format(argv=["pi", "--help"])),
    ("pi run --help", "pi run --help", _PI_MAIN.format(argv=["pi", "run", "--help"])),
    ("pi_runtime", "import pi_runtime", "import pi_runtime"),
    ("pydantic-ai", "import pydantic_ai", "import pydantic_ai"),
    ("openai-agents", "import agents", "import agents"),
)
BASELINE = "pydantic-ai"


def _environment() -> dict[str, str]:
    """The parent's environment, with this pi_runtime first on the path of each child."""
    source = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": source if not path else f"{source}{os.pathsep}{path}"}


def _once(code: str, env: dict[str, str]) -> tuple[float, str | None]:
    """Seconds one fresh interpreter takes to run `code`, and its error when it failed."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return elapsed, lines[-1] if lines else f"exit {done.returncode}"
    return elapsed, None


def measure(*, repeat: int = 10) -> dict[str, Any]:
    """The `startup` result: one row per system that ran, and why the others did not."""
    env = _environment()
    times: dict[str, list[float]] = {name: [] for name, _, _ in SYSTEMS}
    unavailable: dict[str, str] = {}
    for _ in range(repeat):
        for name, _, code in SYSTEMS:
            if name in unavailable:
                continue
            elapsed, error = _once(code, env)
            if error is not None:
                unavailable[name] = f"{error} (install the peer extra to compare)"
            else:
                times[name].append(elapsed)
    medians = {name: statistics.median(t) for name, t in times.items() if t}
    baseline = medians.get(BASELINE)
    rows = [
        {
            "system": name,
            "command": command,
            "median_ms": round(medians[name] * 1000, 1),
            "min_ms": round(min(times[name]) * 1000, 1),
            "runs": len(times[name]),
            "ratio_to_pydantic_ai": (round(medians[name] / baseline, 3) if baseline else None),
        }
        for name, command, _ in SYSTEMS
        if name in medians
    ]
    measured = [module_of(name) for name in medians if name in PEERS]
    return {
        "bench": "startup",
        "repeat": repeat,
        "rows": rows,
        "unavailable": unavailable,
        "versions": versions(measured),
    }
