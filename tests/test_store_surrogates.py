"""Any JSON the store writes may hold half a UTF-16 surrogate pair (a run's result quoting
a provider's error, a job's arguments): it is written repaired, on SQLite and on
PostgreSQL, whose driver refused such text and failed the whole write."""

from __future__ import annotations

from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime.durable import Store
from pi_runtime.messages import AssistantMessage, TextBlock, UserMessage

HOSTILE = "bad \ud800 here"
REPAIRED = "bad \ufffd here"


def test_a_lone_surrogate_in_stored_json_is_written_repaired(store: Store) -> None:
    session = store.create_session("s1", agent={"instructions": HOSTILE})
    run = store.create_run(session.id, input={"prompt": HOSTILE}, owner="cli", lease_s=30)

    finished = store.finish_run(
        run.id, owner="cli", status="failed", stop_reason="model_error",
        result={"status": "failed", "error": HOSTILE, HOSTILE: ["\ud83d\ude00"]},
        messages=[UserMessage(content="hi"), AssistantMessage(content=(TextBlock(text="x"),))],
    )  # fmt: skip

    assert finished.run.status == "failed"
    stored = store.get_run(run.id)
    assert stored is not None
    assert stored.result == {"status": "failed", "error": REPAIRED, REPAIRED: ["😀"]}
    assert stored.input == {"prompt": REPAIRED}
    assert store.get_session("s1").agent == {"instructions": REPAIRED}  # type: ignore[union-attr]
    assert store.get_session("s1").status == "failed"  # type: ignore[union-attr]
