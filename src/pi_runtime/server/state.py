"""What the server holds while it runs, and the turns it runs with it.

`ServerState` lives on `app.state.pi` (`server_state(request)` gets it): the store, the
served agents, the live runs (`RunHub`) and the models shared by the agents it builds.
Its `turn` and `decision` are the work `RunHub.start` runs detached from a request.

An agent a turn cannot open or build is named to the client by its served name only; the
reason, with its paths, goes to the server's log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Mapping
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
from ..messages import redact
from .config import ServeConfig
from .errors import ApiError
from .stream import EventSink, RunHub

if TYPE_CHECKING:
    from ..loop.approvals import Decision
    from ..models import Model

log = logging.getLogger("pi_runtime.server")


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

    def served_name(self, recipe: AgentDefinition | Mapping[str, Any] | None) -> str | None:
        """The name this server serves `recipe` (a session's stored agent) under; None if
        it serves no such agent (the session was made elsewhere, or the file changed)."""
        try:
            wanted = recipe if isinstance(recipe, AgentDefinition) else stored_recipe(recipe)
        except UserError:
            return None
        for name, definition in self.config.agents.items():
            if definition is wanted or definition.same_agent(wanted):
                return name
        return None

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
            name = self.served_name(definition)
            why = redact(str(exc))  # a base URL or an echoed key never reaches the log
            log.error("agent %s cannot be built: %s", name or "(a session's own)", why)
            raise ApiError(
                503,
                f"the agent {name!r} cannot be built here; the server's log says why"
                if name is not None
                else "the session's agent cannot be built here; the server's log says why",
                code="agent_unavailable",
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
            log.warning("session %s: %s", session_id, redact(str(exc)))
            raise await asyncio.to_thread(self._refusal, session_id, agent) from None
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

    def _refusal(self, session_id: str, agent: str | None) -> ApiError:
        """Why the session could not be opened with `agent`, by agent names only: it keeps
        another agent (409), or the agent may not be stored (503)."""
        session = self.store.get_session(session_id)
        wanted = agent or self.config.default_agent
        if session is None:  # not created: the agent may not be stored (see the log)
            return ApiError(
                503,
                f"the agent {wanted!r} cannot run here; the server's log says why",
                code="agent_unavailable",
            )
        kept = self.served_name(session.agent)
        return ApiError(
            409,
            f"the session keeps its agent {kept!r}: start a new session to run {wanted!r}"
            if kept is not None
            else "the session keeps the agent it was made with (none served here): start a "
            f"new session to run {wanted!r}",
            code="agent_mismatch",
        )

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
