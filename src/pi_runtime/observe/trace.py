"""JSONL traces: every event of a run, one line each, in order.

A model request line names how many conversation messages it carried instead of copying
them: each message is written once (`message` lines), so a trace grows linearly with the
run and any request can still be rebuilt exactly (first `message_count` messages, the
system prompt of `run_started`, the listed tools and tool choice).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..messages import json_line, read_json_lines, repair_fields
from .events import Event, event_to_dict

TRACE_DIR_ENV = "PI_TRACE_DIR"


def default_trace_dir() -> Path:
    return Path(os.environ.get(TRACE_DIR_ENV) or Path.cwd() / ".pi" / "traces")


class TraceWriter:
    """Appends events to `<dir>/<run_id>.jsonl`, each stamped with ms since the run began."""

    def __init__(self, directory: Path, run_id: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{run_id}.jsonl"
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8", newline="\n")
        self._t0 = time.perf_counter()
        self._seq = 0

    def write(self, event: Event) -> None:
        if self._file is None:
            return
        # Repaired before pydantic dumps its messages, which garbles surrogates in keys.
        data = event_to_dict(repair_fields(event))
        data["seq"] = self._seq
        data["t_ms"] = round((time.perf_counter() - self._t0) * 1000, 3)
        self._seq += 1
        # json_line escapes what line splitters break on: one event, one line, any text.
        self._file.write(json_line(data) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The events of a trace file as dicts.

    Raises OSError when the file cannot be read, ValueError naming the file and the line
    when a line is not a JSON object.
    """
    return read_json_lines(path)


class Recorder:
    """Where a run's events go: kept in memory, written to the trace, sent to a listener."""

    def __init__(
        self, trace_dir: Path | None, run_id: str, listener: Callable[[Event], None] | None = None
    ) -> None:
        self.events: list[Event] = []
        self.writer = TraceWriter(trace_dir, run_id) if trace_dir is not None else None
        self.listener = listener

    @property
    def path(self) -> str | None:
        return str(self.writer.path) if self.writer is not None else None

    def emit(self, event: Event) -> None:
        self.events.append(event)
        if self.writer is not None:
            self.writer.write(event)
        if self.listener is not None:
            self.listener(event)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
