"""Long-term memory (seed 001 §6, §10): facts per user or tenant, kept across sessions.

Memory has three layers; this package is the third:

- L1, the run's context: the current request's messages as the context builder sends them;
- L2, the session's history: every message stored with the session, earlier requests'
  tool results shrunk to digests and old turns windowed and summarised (`context`);
- L3, long-term facts of a scope (`user:alice`, `tenant:acme`), in a `MemoryStore`: read
  into each run's memory layer at its start, written by the `remember` tool.

    memory = Memory(open_store("sqlite:///.pi/pi.db"), "user:alice")
    agent = Agent(model, memory=memory)
"""

from .facts import (
    MAX_FACT_CHARS,
    RECALL_WINDOW,
    Fact,
    MemoryStore,
    check_scope,
    clean_fact,
    fact_key,
)
from .local import LocalMemoryStore
from .policy import MEMORY_TOOLS, Memory, MemoryPolicy, MemoryRun, WriteMode
from .recall import Recall, Recaller
from .render import MEMORY_NOTE, MemoryBlock, quote, render_facts
from .tools import MAX_RECALL_K, memory_tools

__all__ = [
    "MAX_FACT_CHARS",
    "MAX_RECALL_K",
    "MEMORY_NOTE",
    "MEMORY_TOOLS",
    "RECALL_WINDOW",
    "Fact",
    "LocalMemoryStore",
    "Memory",
    "MemoryBlock",
    "MemoryPolicy",
    "MemoryRun",
    "MemoryStore",
    "Recall",
    "Recaller",
    "WriteMode",
    "check_scope",
    "clean_fact",
    "fact_key",
    "memory_tools",
    "quote",
    "render_facts",
]
