"""Long-term memory, offline: what Alice says once, her later sessions know; Bob's don't.

    python -m examples.memory.demo                       # a SQLite file in a temp folder
    python -m examples.memory.demo --db postgresql://…   # or any store URL

Day 1: Alice says she is vegetarian and the model keeps it with `remember`. Day 2, in a
new conversation, the fact is read into the memory layer of her first request, and the
dinner suggestion follows it. Bob (scope `user:bob`) asks the same and knows nothing of
Alice. The "model" is a small function that reads its request as a model would:
deterministic, and no download.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from pi_runtime import Agent, RunResult
from pi_runtime.durable import open_store
from pi_runtime.memory import Memory, MemoryStore
from pi_runtime.models import ModelRequest
from pi_runtime.observe import MemoryRecalled, MemoryWritten
from pi_runtime.testing import FunctionModel

REMEMBER = re.compile(r"remember that (.+?)[.!]?$", re.IGNORECASE)


def meal_planner(request: ModelRequest) -> dict[str, object]:
    """Keeps what it is asked to remember; suggests dinner from the memory layer."""
    last = request.messages[-1]
    if last.role == "tool":
        return {"text": "Noted, I will remember that."}
    asked = REMEMBER.search(last.content)
    if asked:
        fact = f"The user says: {asked.group(1)}."
        return {"tool_calls": [{"name": "remember", "arguments": {"fact": fact}}]}
    memory = re.search(r"<memory .*?</memory>", last.content, re.S)
    if memory and "vegetarian" in memory.group(0):
        return {"text": "Mushroom risotto: vegetarian, as you told me."}
    return {"text": "Steak frites with a green salad."}


def turn(store: MemoryStore, user: str, prompt: str) -> RunResult:
    agent = Agent(
        FunctionModel(meal_planner),
        instructions="You plan meals.",
        memory=Memory(store, f"user:{user}"),
        trace_dir=False,
    )
    result = agent.run_sync(prompt)
    for event in result.events:
        if isinstance(event, MemoryRecalled):
            print(f"  [memory] recalled {len(event.fact_ids)} fact(s) for {event.scope}")
        elif isinstance(event, MemoryWritten):
            print(f"  [memory] wrote {', '.join(event.fact_ids)} for {event.scope}")
    print(f"  {user}: {prompt}\n  agent: {result.output}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", help="store URL (default: SQLite in a temp folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = args.db or f"sqlite:///{Path(folder) / 'pi.db'}"
        store = open_store(url)
        try:
            print("day 1")
            turn(store, "alice", "Please remember that I am vegetarian.")
            print("day 2, a new conversation")
            alice = turn(store, "alice", "What should I cook tonight?")
            bob = turn(store, "bob", "What should I cook tonight?")
        finally:
            store.close()
    ok = "vegetarian" in str(alice.output) and "vegetarian" not in str(bob.output)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
