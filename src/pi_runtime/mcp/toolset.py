"""`MCPTools`: an agent's MCP servers, their tools as `ToolSpec`s for the gate.

Each tool a server lists becomes a `ToolSpec`, so a call of it passes the same gate as a
Python tool's: its arguments are checked against its (strict) schema before the server
sees them, with the size limit, retries, timeout, result cut and `{kind, message, hint}`
errors of any tool.

- **Names**: the server's name, after the server's `prefix`. `allow` and `block` use the
  server's names. Two tools of one agent may not share a name: a clash is an error that
  says to set a `prefix`.
- **Side effects**: a tool is idempotent only when the server marks it `readOnlyHint` or
  `idempotentHint` (hints from a server you chose to configure). Only those are retried
  after a transient failure; the others carry an idempotency key in the request's
  `_meta` (`pi-runtime/idempotency-key`), stable across a run's restarts, for a server
  that can use one.
- **Approval**: a tool the server's `approval` names is held for a person like a Python
  tool marked `requires_approval`; `approval` naming a tool the server does not list
  fails listing, as `allow` does.
- **Unusable schemas** (see `schema.py`): the tool is left out with a warning in the log
  and `skipped` (its name escaped: it is the server's text, and may hold a line break or
  a terminal's control sequence); when `allow` names it, listing fails instead.

Tools are listed once, at the first run, and kept for the agent's life.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Collection, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from ..exceptions import UserError
from ..messages import clipped, repair_text
from ..tools import IDEMPOTENCY_PARAM, ToolSpec
from .config import MCPServer
from .connection import Connection
from .malformed import escaped
from .results import result_value
from .schema import UnusableSchema, strict_schema
from .transports import ServerUnavailable

log = logging.getLogger("pi_runtime.mcp")
T = TypeVar("T")

MAX_DESCRIPTION_CHARS = 4_000
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


class _Arguments(BaseModel):
    """Stands in for an MCP tool's arguments model: the schema check is jsonschema's."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPToolSpec(ToolSpec):
    """A tool of an MCP server: checked by its JSON Schema, passed on as JSON."""

    def validate_parsed(self, arguments: dict[str, Any]) -> dict[str, Any]:
        # the gate has checked `arguments` against `parameters`; the server takes JSON
        return dict(arguments)


class MCPTools:
    """The MCP servers of one agent and, once listed, their tools.

    Args:
        servers: the servers, each with a distinct `name`.
    """

    def __init__(self, servers: Iterable[MCPServer]) -> None:
        servers = list(servers)
        for server in servers:
            if not isinstance(server, MCPServer):
                raise UserError(f"mcp takes MCPServer entries, got {server!r}")
        names = [s.name for s in servers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise UserError(f"two MCP servers share the name(s): {', '.join(twice)}")
        self.connections = {s.name: Connection(s) for s in servers}
        self.skipped: dict[str, str] = {}
        """Tools left out, `SERVER.TOOL` → why."""
        self._specs: tuple[ToolSpec, ...] | None = None
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def __bool__(self) -> bool:
        return bool(self.connections)

    @property
    def servers(self) -> list[MCPServer]:
        return [c.server for c in self.connections.values()]

    async def specs(self, taken: Collection[str] = ()) -> tuple[ToolSpec, ...]:
        """Every server's tools as specs: listed at the first call, then kept.

        Raises:
            ServerUnavailable: a server cannot be started or listed, `allow` names a tool
                it does not have, or a name is `taken` (or listed twice).
        """
        if self._specs is not None:
            return self._specs
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            if self._specs is None:
                listed = await asyncio.gather(
                    *(self._list(c) for c in self.connections.values()), return_exceptions=True
                )
                errors = [e for e in listed if isinstance(e, BaseException)]
                if errors:
                    raise errors[0]
                specs = [
                    spec
                    for found in listed
                    if not isinstance(found, BaseException)
                    for spec in found
                ]
                _check_names(specs, taken)
                self._specs = tuple(specs)
        return self._specs

    async def aclose(self) -> None:
        """Close every server's session (stdio servers are stopped)."""
        await asyncio.gather(*(c.aclose() for c in self.connections.values()))

    async def closing(self, work: Awaitable[T]) -> T:
        """`work`'s result, the sessions closed after it (for a loop that is about to end)."""
        try:
            return await work
        finally:
            if self.connections:
                await self.aclose()

    async def _list(self, connection: Connection) -> list[ToolSpec]:
        server = connection.server
        tools = await connection.list_tools()
        names = {t.name for t in tools}
        for key in ("allow", "approval"):
            missing = sorted(set(getattr(server, key) or ()) - names)
            if missing:
                raise ServerUnavailable(
                    f"mcp.{server.name}.{key} names tools the server does not list: "
                    f"{', '.join(missing)} (it lists: {', '.join(sorted(names)) or 'none'})"
                )
        specs = []
        for listed in tools:
            if listed.name in server.block or (
                server.allow is not None and listed.name not in server.allow
            ):
                continue
            try:
                specs.append(_spec(connection, listed))
            except UnusableSchema as exc:
                where = f"{server.name}.{escaped(listed.name)}"
                if server.allow is not None:
                    raise ServerUnavailable(f"mcp.{where}: {exc}") from None
                self.skipped[where] = escaped(str(exc))
                log.warning("MCP tool %s left out: %s", where, self.skipped[where])
        return specs


def _spec(connection: Connection, listed: Any) -> ToolSpec:
    server = connection.server
    name = server.prefix + listed.name
    if not _TOOL_NAME.fullmatch(name):
        raise UnusableSchema(
            f"the name {name!r} is not 1-64 letters, digits, _ . or -: set another prefix"
        )
    schema = strict_schema(listed.input_schema)
    hints = listed.annotations
    idempotent = bool(hints is not None and (hints.read_only_hint or hints.idempotent_hint))
    takes_key = not idempotent and IDEMPOTENCY_PARAM not in schema.get("properties", {})
    remote = listed.name

    async def call(**arguments: Any) -> Any:
        key = arguments.pop(IDEMPOTENCY_PARAM, None) if takes_key else None
        result = await connection.call(remote, arguments, key=key)
        return result_value(result, tool=name)

    return MCPToolSpec(
        name=name,
        description=_description(listed),
        parameters=schema,
        function=call,
        arguments_model=_Arguments,
        is_async=True,
        takes_idempotency_key=takes_key,
        idempotent=idempotent,
        timeout_s=server.timeout_s,
        retries=server.retries if idempotent else 0,
        max_result_bytes=server.max_result_bytes,
        requires_approval=listed.name in server.approval,
        extra={"mcp_server": server.name, "mcp_tool": remote},
    )


def _description(listed: Any) -> str:
    hints = listed.annotations
    text = listed.description or listed.title or (hints.title if hints else None) or listed.name
    text = repair_text(str(text)).strip() or listed.name
    return clipped(text, MAX_DESCRIPTION_CHARS)


def _check_names(specs: list[ToolSpec], taken: Collection[str]) -> None:
    seen: dict[str, str] = {name: "the agent's own tools" for name in taken}
    for spec in specs:
        owner = f"MCP server {spec.extra['mcp_server']!r}"
        if spec.name in seen:
            raise ServerUnavailable(
                f"two tools are named {spec.name!r} ({seen[spec.name]} and {owner}): "
                f"set a `prefix` for mcp.{spec.extra['mcp_server']}"
            )
        seen[spec.name] = owner
