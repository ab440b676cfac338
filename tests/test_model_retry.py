"""Provider retry hints: honoured when reasonable, refused when they would eat the run."""

from __future__ import annotations

from pi_runtime import Agent, ModelError
from pi_runtime.models import ModelRequest
from pi_runtime.testing import FunctionModel


def test_a_retry_after_beyond_the_cap_fails_at_once_and_says_why() -> None:
    calls = 0

    def overloaded(request: ModelRequest) -> dict[str, object]:
        nonlocal calls
        calls += 1
        raise ModelError("rate limited", transient=True, retry_after_s=3600)

    result = Agent(FunctionModel(overloaded), trace_dir=False).run_sync("hi")

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert calls == 1
    assert result.error is not None and "asked to wait 3600s" in result.error
    failures = [e for e in result.events if e.kind == "model_error"]
    assert len(failures) == 1 and failures[0].retry_in_ms is None


def test_a_short_retry_after_is_honoured_then_the_run_completes() -> None:
    calls = 0

    def flaky(request: ModelRequest) -> dict[str, object]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ModelError("busy", transient=True, retry_after_s=0.01)
        return {"text": "ok"}

    result = Agent(FunctionModel(flaky), trace_dir=False).run_sync("hi")

    assert (result.status, result.output, calls) == ("completed", "ok", 2)
    failures = [e for e in result.events if e.kind == "model_error"]
    assert [f.retry_in_ms for f in failures] == [10.0]
