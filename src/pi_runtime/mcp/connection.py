"""One MCP server's client session, kept for an agent's life and restarted when it dies.

A session is opened at the first need (listing the tools at a run's start) and shared by
every call after it, concurrent ones included: a new session per call would start a
stdio server per call and lose what a stateful server keeps between calls.

The SDK's client lives in a task of its own (`_Session._own`): its transport's task
groups must be entered and left by one task, and the runs that call tools come and go.
Each call races the server's answer against that task ending, so a server that exits or
drops the connection mid-call fails the call at once (`transient`) instead of leaving it
waiting; the next call starts a new session. A line from a stdio server that is no
JSON-RPC message fails the calls waiting on it at once too, as a `ToolError` (see
`malformed.py`). A call's time limit is the gate's (`ToolSpec.timeout_s`), not the
SDK's: when it runs out the call is cancelled and the SDK tells the server so. Starting
a server and listing its tools have `connect_timeout_s`.

An error a server answers is the call's `ToolError`, with the server's message, whatever
its code: -32000 is the SDK's "connection closed" but also the first of JSON-RPC's codes
for a server's own errors, so a call that fails with it sends the server a ping: any
answer, a refusal included (the 2026 protocol dropped `ping`), shows the session open;
only the SDK's -32000, or no answer, shows it closed.

A session belongs to the event loop it was opened on: `Agent.run_sync` runs each call on
a loop of its own, so there a session lasts one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import ToolError, TransientError
from ..messages import ToolErrorKind, clipped, redact
from .config import MCPServer
from .malformed import Malformed, Watch
from .transports import ServerUnavailable, client_for

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult, Tool

log = logging.getLogger("pi_runtime.mcp")
T = TypeVar("T")

CLOSE_GRACE_S = 10.0
"""How long a closing session may take (the SDK stops a stdio server within ~7 s)."""
MAX_TOOL_PAGES = 50
IDEMPOTENCY_META = "pi-runtime/idempotency-key"
"""The `_meta` key a call of a non-idempotent tool carries its idempotency key in."""
_SHOWN_CHARS = 500
"""What an error quotes of a server's message."""


class _Session:
    """One open client session, owned by its own task."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.client: Client | None = None
        self.stop = asyncio.Event()
        self.gone = asyncio.Event()
        self.dead = False
        self.task: asyncio.Task[None] | None = None
        self.watch = Watch(server.where(), self._broken)

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self.task = loop.create_task(self._own(ready), name=f"pi-mcp-{self.server.name}")
        try:
            async with asyncio.timeout(self.server.connect_timeout_s):
                self.client = await asyncio.shield(ready)
        except TimeoutError:
            await self.close()
            raise ServerUnavailable(
                f"{self.server.where()} did not start within {self.server.connect_timeout_s:g}s"
            ) from None
        except BaseException:
            await self.close()
            raise
        finally:
            _settled(ready)

    async def _own(self, ready: asyncio.Future[Client]) -> None:
        try:
            async with client_for(self.server, self.watch.handle) as client:
                ready.set_result(client)
                await self.stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(ServerUnavailable(f"{self.server.where()}: {_why(exc)}"))
            else:
                log.debug("%s closed: %s", self.server.where(), _why(exc))
        finally:
            if not ready.done():  # cancelled while starting
                ready.set_exception(ServerUnavailable(f"{self.server.where()}: cancelled"))
            self.dead = True
            self.gone.set()

    def _broken(self) -> None:
        self.dead = True
        self.stop.set()

    async def close(self) -> None:
        self.stop.set()
        task = self.task
        if task is None or task.done():
            return
        if self.client is None:
            task.cancel()  # still starting: nothing waits on `stop` yet
        try:
            async with asyncio.timeout(CLOSE_GRACE_S):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        except asyncio.CancelledError:
            if not task.done():
                raise
        finally:
            self.dead = True


class Connection:
    """The client side of one `MCPServer` for one agent.

    Attributes:
        sessions: how many sessions were opened (1 for an agent's life, plus restarts).
    """

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.sessions = 0
        self._session: _Session | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._again = (
            "it is started again at the next call"
            if server.transport == "stdio"
            else "Pi connects again at the next call"
        )

    async def list_tools(self) -> list[Tool]:
        """Every tool the server lists (all pages), within `connect_timeout_s`."""
        session = await self._current()
        assert session.client is not None
        tools: list[Tool] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self.server.connect_timeout_s):
                for _ in range(MAX_TOOL_PAGES):
                    page = await _racing(session, session.client.list_tools(cursor=cursor))
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except TimeoutError:
            raise ServerUnavailable(
                f"{self.server.where()} did not list its tools within "
                f"{self.server.connect_timeout_s:g}s"
            ) from None
        except Exception as exc:
            session.dead = True
            raise ServerUnavailable(
                f"{self.server.where()}: listing its tools: {_why(exc)}"
            ) from None
        return tools

    async def call(
        self, name: str, arguments: dict[str, Any], *, key: str | None = None
    ) -> CallToolResult:
        """Call tool `name` (the server's name for it); failures raised as Pi classifies
        them: `TransientError` for a dead or unreachable server, `ToolError` for what the
        server refused."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, INVALID_PARAMS

        try:
            session = await self._current()
        except ServerUnavailable as exc:
            raise TransientError(f"{exc}; {self._again}") from None
        assert session.client is not None
        meta: Any = {IDEMPOTENCY_META: key} if key else None  # an open `_meta` map
        try:
            return await _racing(session, session.client.call_tool(name, arguments, meta=meta))
        except _Gone:
            session.dead = True
            raise TransientError(
                f"{self.server.where()} stopped during the call; {self._again}. Whether the "
                "call took effect is unknown."
            ) from None
        except Malformed as exc:
            raise ToolError(
                f"{self.server.where()} sent a malformed message while the call waited for "
                f"its answer ({exc}). Whether the call took effect is unknown."
            ) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED and not await self._answers(session):
                session.dead = True
                raise TransientError(
                    f"{self.server.where()} closed the connection; {self._again}. Whether "
                    "the call took effect is unknown."
                ) from None
            kind = ToolErrorKind.INVALID_ARGUMENTS if exc.code == INVALID_PARAMS else None
            raise ToolError(
                f"{self.server.where()}: {clipped(exc.message, _SHOWN_CHARS)}", kind=kind
            ) from None
        except Exception as exc:
            if _is_transport(exc):
                session.dead = True
                raise TransientError(
                    f"{self.server.where()}: {_why(exc)}; {self._again}. Whether the call "
                    "took effect is unknown."
                ) from None
            if type(exc).__name__ == "ValidationError":
                raise ToolError(
                    f"{self.server.where()} answered with a malformed result: {clipped(str(exc), _SHOWN_CHARS)}"
                ) from None
            raise

    async def _answers(self, session: _Session) -> bool:
        """Whether `session` still answers a ping (or refuses it), within
        `connect_timeout_s`: a closed one fails it with -32000 at once."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        assert session.client is not None
        try:
            async with asyncio.timeout(self.server.connect_timeout_s):
                # the session's own ping: the client's warns that 2026 servers lack it
                await _racing(session, session.client.session.send_ping())
        except MCPError as exc:
            return exc.code != CONNECTION_CLOSED
        except Exception:  # gone, silent or broken
            return False
        return True

    async def aclose(self) -> None:
        """End the session (a stdio server is stopped); a later call opens a new one."""
        session, self._session = self._session, None
        if session is not None and self._loop is _running_loop():
            await session.close()

    async def _current(self) -> _Session:
        """The live session, opened (or opened again) when there is none."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a session of a loop that has ended is gone with it
            self._loop, self._lock, self._session = loop, asyncio.Lock(), None
        session = self._session
        if session is not None and not session.dead:
            return session
        assert self._lock is not None
        async with self._lock:
            session = self._session
            if session is not None and not session.dead:
                return session
            if session is not None:
                log.info("%s: the session ended; starting a new one", self.server.where())
                await session.close()
            fresh = _Session(self.server)
            await fresh.open()
            self._session = fresh
            self.sessions += 1
            return fresh


class _Gone(Exception):
    """The session's task ended while a request was waiting for its answer."""


async def _racing(session: _Session, request: Awaitable[T]) -> T:
    """`request`'s result, or as soon as the session ends first `_Gone`, or `Malformed`
    when the server sends a line that is no JSON-RPC message first."""
    work = asyncio.ensure_future(request)
    work.add_done_callback(_settled)  # an answer that comes too late is dropped quietly
    gone = asyncio.ensure_future(session.gone.wait())
    garbled = session.watch.waiter()
    try:
        await asyncio.wait({work, gone, garbled}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        work.cancel()
        gone.cancel()
        # let the SDK send its courtesy cancel to the server, briefly
        await asyncio.wait({work}, timeout=1.0)
        raise
    finally:
        session.watch.release(garbled)
    gone.cancel()
    if work.done():
        return work.result()
    work.cancel()
    await asyncio.wait({work}, timeout=1.0)
    if not work.cancelled() and work.done() and work.exception() is None:
        return work.result()
    if garbled.done():
        raise Malformed(garbled.result())
    raise _Gone


def _settled(future: asyncio.Future[Any]) -> None:
    """Mark `future`'s outcome as seen: nobody waits for it any more."""
    if future.done() and not future.cancelled():
        future.exception()


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _why(exc: BaseException) -> str:
    """What went wrong, in one redacted line (an exception group: its first cause)."""
    leaf = _leaves(exc)[0]
    text = str(leaf).strip() or type(leaf).__name__
    if not isinstance(leaf, ServerUnavailable):
        text = f"{type(leaf).__name__}: {text}"
    return clipped(redact(text), _SHOWN_CHARS)


def _is_transport(exc: BaseException) -> bool:
    import anyio

    transport: tuple[type[BaseException], ...] = (
        OSError,
        anyio.BrokenResourceError,
        anyio.ClosedResourceError,
        anyio.EndOfStream,
    )
    with contextlib.suppress(ImportError):
        import httpx2

        transport += (httpx2.TransportError,)
    return any(isinstance(leaf, transport) for leaf in _leaves(exc))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
