"""Half a UTF-16 surrogate pair in a provider's error text (as a 400 body can carry) ends
the run well-formed and storable: the session that ran it is not left `running`, on
SQLite and on PostgreSQL, whose drivers refuse such text."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime import Agent
from pi_runtime.durable import Store
from pi_runtime.durable.recipe import Recipe
from pi_runtime.durable.sessions import open_session, run_turn
from pi_runtime.exceptions import ModelError
from pi_runtime.models import ModelRequest, ModelResponse
from pi_runtime.models.function import FunctionModel

HOSTILE = "bad request \ud800 here"


def refuses(request: ModelRequest) -> ModelResponse:
    raise ModelError(HOSTILE, transient=False)


def test_a_provider_error_with_half_a_surrogate_pair_is_written_repaired() -> None:
    result = Agent(FunctionModel(refuses), trace_dir=False).run_sync("hello")

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert result.error == "bad request \ufffd here"
    json.loads(result.to_json().encode("utf-8"))  # every byte writable, read back
    errors = [e for e in result.events if e.kind == "model_error"]
    assert [e.message for e in errors] == ["bad request \ufffd here"]  # type: ignore[attr-defined]


def test_a_session_whose_provider_errs_so_is_not_left_running(store: Store, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "hi"}]}), encoding="utf-8")
    open_session(store, "s1", Recipe(model=f"scripted:{script}"))
    agent = Agent(FunctionModel(refuses), trace_dir=False)

    turn = asyncio.run(run_turn(store, "s1", "hello", agent=agent, owner="cli"))

    assert (turn.run.status, turn.run.stop_reason) == ("failed", "model_error")
    assert store.get_session("s1").status == "failed"  # type: ignore[union-attr]
    stored = store.get_run(turn.run.id)
    assert stored is not None and "\ufffd" in json.dumps(stored.result, ensure_ascii=False)
