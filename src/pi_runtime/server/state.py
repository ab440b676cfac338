"""What the server holds while it runs, and the turns it runs with it.

`ServerState` lives on `app.state.pi` (`server_state(request)` gets it): the store, the
served agents, the live runs (`RunHub`) and the models shared by the agents it builds.
Its `turn` and `decision` are the work `RunHub.start` runs detached from a request.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from ..durable import Store, open_session, run_turn
from ..durable.approvals import decide
from ..durable.recipe import stored_recipe
from ..durable.sessions import request_of
from ..exceptions import UserError
from ..loop import Agent, RunResult
from ..loop.agentfile import agent_error
from ..loop.definition import AgentDefinition, DefinitionError
from .config import ServeConfig
from .errors import ApiError
from .stream import EventSink, RunHub

if TYPE_CHECKING:
    from ..loop.approvals import Decision
    from ..models import Model


@dataclass(slots=True)
class ServerState:
    config: ServeConfig
    store: Store
    hub: RunHub = field(default_factory=RunHub)
    models: dict[str, Model] = field(default_factory=dict)
    name: str = field(
        default_factory=lambda: f"serve-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
    )

    def owner(self) -> str:
        """A lease owner for one request's work."""
        return f"{self.name}/{uuid.uuid4().hex[:8]}"

    def agent_named(self, name: str) -> AgentDefinition:
        definition = self.config.agents.get(name)
        if definition is None:
            raise ApiError(
                404,
                f"no agent {name!r} is served here; served: {', '.join(self.config.agents)}",
                code="unknown_agent",
            )
        return definition

    def build(self, definition: AgentDefinition, limits: dict[str, Any] | None = None) -> Agent:
        try:
            try:
                return definition.build_agent(
                    trace_dir=self.config.trace_dir,
                    models=self.models,
                    limits=limits,
                    memory_store=self.store,
                )
            except DefinitionError as exc:
                raise agent_error(definition, exc) from None
        except UserError as exc:
            raise ApiError(
                503, f"the agent cannot be built here: {exc}", code="agent_unavailable"
            ) from None

    async def turn(
        self, session_id: str, message: str, agent: str | None, on_event: EventSink
    ) -> RunResult:
        """A user turn of the stored session `session_id` (created on first use with
        `agent`, else the default agent; an existing one keeps its own)."""
        store = self.store
        session = await asyncio.to_thread(store.get_session, session_id)
        wanted = None
        if agent is not None:
            wanted = self.agent_named(agent)
        elif session is None:
            wanted = self.agent_named(self.config.default_agent)
        try:
            _, recipe = await asyncio.to_thread(open_session, store, session_id, wanted)
        except UserError as exc:
            raise ApiError(409, str(exc), code="agent_mismatch") from None
        built = self.build(recipe)
        # the agent lives for this turn: its MCP sessions close with it
        done = await built.mcp.closing(
            run_turn(
                store,
                session_id,
                message,
                agent=built,
                owner=self.owner(),
                lease_s=self.config.lease_s,
                job_max_attempts=recipe.job_max_attempts,
                on_event=on_event,
            )
        )
        return done.result

    async def decision(self, session_id: str, decision: Decision, on_event: EventSink) -> RunResult:
        """Take `decision` on the session's waiting call and continue the session, as
        `pi approve` / `pi reject` do."""
        store = self.store
        session = await asyncio.to_thread(store.get_session, session_id)
        if session is None:
            raise ApiError(404, "no such session")
        limits = await asyncio.to_thread(self._limits, session_id, decision.call_id)
        agent = self.build(stored_recipe(session.agent), limits)
        try:
            return await agent.mcp.closing(
                decide(
                    store,
                    session_id,
                    decision,
                    agent=agent,
                    owner=self.owner(),
                    lease_s=self.config.lease_s,
                    on_event=on_event,
                )
            )
        except UserError as exc:
            raise ApiError(409, str(exc), code="decision_refused") from None

    def _limits(self, session_id: str, call_id: str) -> dict[str, Any]:
        """The limits the waiting call's request was given (its continuation keeps them)."""
        for approval in self.store.list_approvals(session_id):
            if approval.tool_call_id == call_id:
                run = self.store.get_run(approval.run_id)
                return request_of(self.store, run).limits if run is not None else {}
        return {}


def server_state(request: Request) -> ServerState:
    state = request.app.state.pi
    assert isinstance(state, ServerState)
    return state
