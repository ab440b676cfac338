"""Each session's agent and tools, as a worker reads them: once.

A session keeps the agent it was created with for its whole life, so a worker reads it
once per session (a job and the run continuing after it would read it twice). Tools are
loaded once per set of tool references: sessions of one agent share them.

Loading them runs user code: a module that raises at import, or calls `sys.exit()`,
makes its tools not loadable here (`usercode`); the worker goes on.
"""

from __future__ import annotations

import asyncio
import logging

from ..exceptions import UserError
from ..memo import Bounded
from ..tools import ToolSpec
from .recipe import Recipe, stored_recipe
from .store import SessionStore

log = logging.getLogger("pi_runtime.durable")

Tools = dict[str, ToolSpec] | None
"""Tools by name; None when they cannot be loaded in this process."""


class SessionAgents:
    """The agents of the sessions a worker serves, and their tools, read once."""

    def __init__(self, store: SessionStore, *, limit: int = 1024) -> None:
        self._store = store
        self._recipes: Bounded[str, Recipe] = Bounded(limit)
        self._tools: Bounded[tuple[tuple[str, ...], str | None], Tools] = Bounded(limit)

    async def recipe(self, session_id: str) -> Recipe:
        """The agent `session_id` was created with (UserError if it has none)."""
        recipe = self._recipes.get(session_id)
        if recipe is None:
            session = await asyncio.to_thread(self._store.get_session, session_id)
            recipe = stored_recipe(session.agent if session else None)
            if session is not None:  # a session not there yet may be created later
                self._recipes.put(session_id, recipe)
        return recipe

    async def tools(self, session_id: str) -> Tools:
        """The session's tools by name; None if they cannot be loaded here (logged)."""
        try:
            recipe = await self.recipe(session_id)
        except UserError as exc:
            log.warning("session %s: its tools cannot be loaded here: %s", session_id, exc)
            return None
        refs = (tuple(recipe.tools), recipe.import_path)
        if refs in self._tools:
            return self._tools.get(refs)
        try:
            tools: Tools = {spec.name: spec for spec in recipe.load_tools()}
        except UserError as exc:
            log.warning("session %s: its tools cannot be loaded here: %s", session_id, exc)
            tools = None
        return self._tools.put(refs, tools)
