"""JSONL traces: every event of a run, one line each, in order.

A model request line names how many conversation messages it carried instead of copying
them: each message is written once (`message` lines), so a trace grows linearly with the
run and any request can still be rebuilt exactly (first `message_count` messages, the
system prompt of `run_started`, the listed tools and tool choice).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .events import Event, event_to_dict

TRACE_DIR_ENV = "PI_TRACE_DIR"


def default_trace_dir() -> Path:
    return Path(os.environ.get(TRACE_DIR_ENV) or Path.cwd() / ".pi" / "traces")


class TraceWriter:
    """Appends events to `<dir>/<run_id>.jsonl`, each stamped with ms since the run began."""

    def __init__(self, directory: Path, run_id: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{run_id}.jsonl"
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8")
        self._t0 = time.perf_counter()
        self._seq = 0

    def write(self, event: Event) -> None:
        if self._file is None:
            return
        data = event_to_dict(event)
        data["seq"] = self._seq
        data["t_ms"] = round((time.perf_counter() - self._t0) * 1000, 3)
        self._seq += 1
        self._file.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The events of a trace file as dicts (raises ValueError naming a bad line)."""
    events = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{path}: line {number} is not JSON: {exc}") from exc
    return events


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
