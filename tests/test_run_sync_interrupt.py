"""Ctrl-C during `run_sync` ends the run the way it ends under `asyncio.run`: the run
stops `cancelled` with its trace closed by `run_finished`, then KeyboardInterrupt reaches
the caller."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys, time
    from pi_runtime import Agent
    from pi_runtime.testing import FunctionModel

    async def busy(request):
        # Ctrl-C while Python code runs on the loop's thread (a model function, the
        # context build, a guardrail), not while the loop waits
        os.kill(os.getpid(), signal.SIGINT)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
        await asyncio.sleep(0.01)  # where the cancellation lands, as under asyncio.run
        return {"text": "final", "finish_reason": "stop"}

    agent = Agent(FunctionModel(busy), trace_dir=sys.argv[1])
    agent.run_sync("go")
    print("RETURNED", flush=True)
    """
)


def test_ctrl_c_in_run_sync_ends_the_run_cancelled_then_interrupts(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    traces = tmp_path / "traces"

    done = subprocess.run(
        [sys.executable, str(script), str(traces)],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert "RETURNED" not in done.stdout
    assert done.returncode != 0
    assert "KeyboardInterrupt" in done.stderr, done.stderr
    (trace,) = traces.rglob("*.jsonl")
    last = json.loads(trace.read_text().splitlines()[-1])
    assert last["kind"] == "run_finished", last
    assert (last["status"], last["stop_reason"]) == ("stopped", "cancelled")


def test_run_sync_leaves_the_sigint_handler_as_it_found_it(tmp_path: Path) -> None:
    import signal

    from pi_runtime import Agent
    from pi_runtime.testing import ScriptedModel, text

    before = signal.getsignal(signal.SIGINT)
    result = Agent(ScriptedModel([text("hi")]), trace_dir=tmp_path).run_sync("hello")

    assert result.status == "completed"
    assert signal.getsignal(signal.SIGINT) is before
