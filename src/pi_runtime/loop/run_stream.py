"""`RunStream`: a run's events as they happen (`Agent.run_stream`), then its result."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..observe import Event, RunFinished
from .run_result import RunResult

if TYPE_CHECKING:
    from .agent import Agent


class RunStream:
    """Async iterator over a run's events; `result` is set once the run has ended."""

    def __init__(self, agent: Agent, prompt: str | None, options: dict[str, Any]) -> None:
        self._agent = agent
        self._prompt = prompt
        self._options = options
        self.result: RunResult | None = None

    async def __aiter__(self) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        task = asyncio.create_task(self._agent.run(self._prompt, _live=queue, **self._options))
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    event = getter.result()
                    yield event
                    if isinstance(event, RunFinished):
                        break
                else:
                    getter.cancel()
                    while not queue.empty():
                        yield queue.get_nowait()
                    break
            self.result = await task
        finally:
            if not task.done():
                task.cancel()
