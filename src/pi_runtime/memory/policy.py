"""`Memory`: an agent's long-term facts — a store, one scope, and when to read and write.

    memory = Memory(store, "user:alice", top_k=5, budget_tokens=400, write="tool")
    agent = Agent(model, memory=memory)

At the start of each run (`MemoryRun.recall`) the top-k facts closest to the user's
message are read into the memory layer of every request, under the layer's own token
budget (`budget_tokens`), quoted as data. How facts are written (`write`):

- `tool`: `remember` writes each fact at once (and `recall` looks facts up);
- `end`: `remember` stages facts and the run writes them when it ends `completed` or
  `awaiting`; a run stopped by a guard, failed or cut short by a security stop leaves
  nothing behind;
- `none`: read only; `recall` alone is offered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..exceptions import UserError
from ..messages import redact
from ..observe.events import MemoryRecalled, MemoryWritten
from ..tools import ToolSpec
from ..tools.retrieval import Embedder
from .facts import MAX_POLICY_SCOPE_CHARS, RECALL_WINDOW, MemoryStore, check_scope
from .recall import Recaller
from .render import MemoryBlock
from .tools import MAX_RECALL_K, Emit, Staged, memory_tools

__all__ = ["MEMORY_TOOLS", "Memory", "MemoryPolicy", "MemoryRun", "WriteMode"]

WriteMode = Literal["tool", "end", "none"]
MEMORY_TOOLS = ("remember", "recall")
_WRITES = ("tool", "end", "none")
_EMBEDDERS = ("auto", "bm25")
_KEEPS = ("completed", "awaiting")  # the run statuses whose staged facts are written


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPolicy:
    """How an agent uses long-term memory: the `[memory]` table of an agent file.

    Attributes:
        scope: whose facts (`user:alice`, `tenant:acme`); runs never see another's.
        read: read the top-k facts into each run's memory layer at its start.
        top_k: how many facts the memory layer holds at most.
        budget_tokens: the memory layer's own token budget.
        write: `tool`, `end` or `none` (see the module).
        embedder: `auto` (the shipped embedding model, else BM25) or `bm25`.
    """

    scope: str
    read: bool = True
    top_k: int = 5
    budget_tokens: int = 400
    write: WriteMode = "tool"
    embedder: Literal["auto", "bm25"] = "auto"

    def __post_init__(self) -> None:
        check_scope(self.scope)
        if len(self.scope) > MAX_POLICY_SCOPE_CHARS:
            raise UserError(
                f"MemoryPolicy.scope must be at most {MAX_POLICY_SCOPE_CHARS} characters, "
                f"got {len(self.scope)}"
            )
        checks = {
            "read": (isinstance(self.read, bool), "true or false"),
            "top_k": (_int_in(self.top_k, 1, MAX_RECALL_K), f"an integer from 1 to {MAX_RECALL_K}"),
            "budget_tokens": (_int_in(self.budget_tokens, 32, 100_000), "32 to 100000 tokens"),
            "write": (self.write in _WRITES, f"one of {', '.join(_WRITES)}"),
            "embedder": (self.embedder in _EMBEDDERS, f"one of {', '.join(_EMBEDDERS)}"),
        }
        for name, (ok, need) in checks.items():
            if not ok:
                raise UserError(f"MemoryPolicy.{name} must be {need}, got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def session_scope(scope: str, session_id: str) -> str:
    """The scope a run of session `session_id` reads and writes for an agent's `scope`.

    A served tenant's session is stored as `acme/s1` (`pi serve --tokens`), and the agent
    file naming the scope is shared by every tenant the server serves. So a session of a
    tenant keeps its facts under `acme/` + `scope`: tenants never read, recall or
    overwrite each other's facts, whichever process (server or worker) runs the turn.
    A session id without a `/` keeps `scope` as it is.
    """
    tenant, separator, _ = session_id.partition("/")
    return f"{tenant}/{scope}" if separator and tenant else scope


def _int_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


class Memory:
    """Long-term facts of one scope for an agent (`Agent(memory=…)`).

    Args:
        store: where facts live: the durable store (`open_store`) or a `LocalMemoryStore`.
        scope: whose facts.
        read, top_k, budget_tokens, write: see `MemoryPolicy`.
        embedder: ranks and embeds facts: `"auto"` (the shipped model, else BM25),
            `"bm25"`, or an `Embedder`.
    """

    def __init__(
        self,
        store: MemoryStore,
        scope: str,
        *,
        read: bool = True,
        top_k: int = 5,
        budget_tokens: int = 400,
        write: WriteMode = "tool",
        embedder: Embedder | Literal["auto", "bm25"] = "auto",
    ) -> None:
        if not isinstance(store, MemoryStore):
            raise UserError(
                f"memory needs a MemoryStore (remember_fact, list_facts), got {store!r}"
            )
        named = embedder if isinstance(embedder, str) else "auto"
        self.policy = MemoryPolicy(
            scope=scope,
            read=read,
            top_k=top_k,
            budget_tokens=budget_tokens,
            write=write,
            embedder=named,
        )
        self.store = store
        self.recaller = Recaller(
            None if embedder == "bm25" else "auto" if embedder == "auto" else embedder
        )

    @classmethod
    def from_policy(cls, store: MemoryStore, policy: Mapping[str, Any]) -> Memory:
        """The memory an agent file's `[memory]` table (`MemoryPolicy` fields) defines."""
        return cls(store, **dict(policy))

    @property
    def scope(self) -> str:
        return self.policy.scope

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools each run offers: `remember` and `recall`, or `recall` alone."""
        return MEMORY_TOOLS if self.policy.write != "none" else ("recall",)

    def open_run(
        self,
        *,
        session_id: str,
        run_id: str,
        emit: Emit,
        counter: Callable[[str], int],
    ) -> MemoryRun:
        """The memory of one run: its tools, and its layer once `recall` has run."""
        return MemoryRun(self, session_id=session_id, run_id=run_id, emit=emit, counter=counter)


class MemoryRun:
    """One run's memory: the tools it offers, the layer it reads, the facts it stages."""

    def __init__(
        self,
        memory: Memory,
        *,
        session_id: str,
        run_id: str,
        emit: Emit,
        counter: Callable[[str], int],
    ) -> None:
        self.memory = memory
        self.emit = emit
        self.counter = counter
        policy = memory.policy
        self.scope = session_scope(policy.scope, session_id)
        self.staged = Staged() if policy.write == "end" else None
        self.tools: list[ToolSpec] = memory_tools(
            memory.store,
            self.scope,
            write=policy.write != "none",
            recaller=memory.recaller,
            session_id=session_id,
            run_id=run_id,
            emit=emit,
            staged=self.staged,
        )
        self.block: MemoryBlock | None = None
        self._source = {"session_id": session_id, "run_id": run_id}

    def fit(self, room: int) -> str:
        """The memory layer's block within `room` tokens and the layer's budget ("" for
        none): the context builder asks it for each request."""
        return "" if self.block is None else self.block.fit(room)

    async def recall(self, query: str) -> None:
        """Read the facts closest to `query` into the layer (when the policy reads).

        A store that fails leaves the layer empty and says why in the event: the run
        goes on without its memory rather than not at all.
        """
        policy = self.memory.policy
        if not policy.read:
            return
        store, recaller = self.memory.store, self.memory.recaller
        try:
            facts = await asyncio.to_thread(store.list_facts, self.scope, limit=RECALL_WINDOW)
            found = await asyncio.to_thread(recaller.rank, query, facts, policy.top_k)
        except Exception as exc:
            self.emit(
                MemoryRecalled(scope=self.scope, via="prompt", method="none", error=_error(exc))
            )
            return
        block = MemoryBlock(self.scope, found.facts, policy.budget_tokens, self.counter)
        text, kept = block.fitted(policy.budget_tokens)
        self.block = block if kept else None
        self.emit(
            MemoryRecalled(
                scope=self.scope,
                via="prompt",
                method=found.method,
                fact_ids=kept,
                scores={i: found.scores[i] for i in kept},
                tokens=self.counter(text) if text else 0,
                left_out=tuple(f.id for f in found.facts if f.id not in kept),
                fallback_reason=found.fallback_reason,
            )
        )

    async def finish(self, status: str) -> None:
        """Write what the run staged (`write = "end"`) if it ended `completed` or
        `awaiting`; otherwise drop it. One `memory_written` event either way."""
        if self.staged is None or not self.staged.texts:
            return
        texts = list(self.staged.texts.values())
        self.staged.texts.clear()
        scope = self.scope
        if status not in _KEEPS:
            self.emit(MemoryWritten(scope=scope, via="end", discarded=len(texts)))
            return
        ids: list[str] = []
        known: list[str] = []
        try:
            for text in texts:
                vector, name = await asyncio.to_thread(self.memory.recaller.embed_fact, text)
                fact, new = await asyncio.to_thread(
                    self.memory.store.remember_fact,
                    scope,
                    text,
                    embedding=vector,
                    embedder=name,
                    **self._source,
                )
                ids.append(fact.id)
                if not new:
                    known.append(fact.id)
        except Exception as exc:
            self.emit(
                MemoryWritten(
                    scope=scope,
                    via="end",
                    fact_ids=tuple(ids),
                    known=tuple(known),
                    discarded=len(texts) - len(ids),
                    error=_error(exc),
                )
            )
            return
        self.emit(MemoryWritten(scope=scope, via="end", fact_ids=tuple(ids), known=tuple(known)))


def _error(exc: Exception) -> str:
    return redact(f"{type(exc).__name__}: {exc}")
