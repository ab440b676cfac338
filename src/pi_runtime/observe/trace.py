"""JSONL traces: every event of a run, one line each, in order.

A model request line names how many conversation messages it carried instead of copying
them: each message is written once (`message` lines), so a trace grows linearly with the
run and any request can still be rebuilt exactly (first `message_count` messages, the
system prompt of `run_started`, the listed tools and tool choice).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from ..messages import json_line, read_json_lines
from .events import Event, RunFinished, Transition
from .wire import event_from_dict, event_to_json

TRACE_DIR_ENV = "PI_TRACE_DIR"
log = logging.getLogger("pi_runtime.observe")


_FRACTIONS = tuple((b".%03d" % us).rstrip(b"0") if us else b".0" for us in range(1000))
"""The decimals of a `t_ms` after its whole ms, by µs: `.5` for 500, `.001` for 1, `.0` for 0."""


def default_trace_dir() -> Path:
    return Path(os.environ.get(TRACE_DIR_ENV) or Path.cwd() / ".pi" / "traces")


class TraceWriter:
    """Appends events to `<dir>/<run_id>.jsonl`, each stamped with ms since the run began.

    Each event is encoded when written (so the line shows it as it was) but held until
    `flush`: the recorder flushes at step boundaries, and `close`, which every ending of
    a run reaches, flushes the rest. Writing lines in a batch keeps file writes off the
    per-event path.

    A write the system refuses (a full disk, a file size limit) ends the trace, not the
    run: the file is cut back to its last whole line, the failure is logged and kept in
    `failed`, and later events are kept only in memory.
    """

    def __init__(self, directory: Path, run_id: str) -> None:
        self.path = directory / f"{run_id}.jsonl"
        try:
            file = self.path.open("wb")
        except FileNotFoundError:  # the first trace here: make the folder (not every run)
            directory.mkdir(parents=True, exist_ok=True)
            file = self.path.open("wb")
        self._file: BinaryIO | None = file
        self._lines: list[bytes] = []
        self._whole = 0  # bytes of whole lines written
        self.failed: str | None = None
        self._t0 = time.perf_counter()
        self._seq = 0

    def write(self, event: Event) -> None:
        if self._file is None:
            return
        # ms to three places, spelled as `repr` spells the float: whole ms, then the µs
        # from a table. A float's repr (and `round(x, 3)`) goes through a decimal
        # conversion costing more than the rest of the line's tail, on every event.
        ms, us = divmod(round((time.perf_counter() - self._t0) * 1e6), 1000)
        try:
            line = event_to_json(event)
        except ValueError as exc:
            # The event is lost but its place is kept, saying why: the run goes on.
            line = json_line({"kind": event.kind, "error": str(exc)}).encode()
        # Every line is an object that holds at least `kind`, so its "}" can take a tail.
        self._lines.append(
            b'%b,"seq":%d,"t_ms":%d%b}\n' % (line[:-1], self._seq, ms, _FRACTIONS[us])
        )
        self._seq += 1

    def flush(self) -> None:
        """Write the lines held so far."""
        if self._file is None or not self._lines:
            return
        data = b"".join(self._lines)
        self._lines.clear()
        try:
            self._file.write(data)
            self._file.flush()
        except OSError as exc:
            self._give_up(exc)
            return
        self._whole += len(data)

    def close(self) -> None:
        if self._file is not None:
            self.flush()
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:  # what the buffer held could not be written
                self._give_up(exc)
            self._file = None

    def _give_up(self, exc: OSError) -> None:
        """End the trace after a refused write, at its last whole line."""
        file, self._file = self._file, None
        self.failed = f"writing the trace failed: {exc}"
        log.warning("%s: %s; the run goes on without it", self.path, self.failed)
        if file is None:
            return
        with contextlib.suppress(OSError):
            file.truncate(self._whole)
        with contextlib.suppress(OSError):
            file.close()


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The events of a trace file as dicts.

    Raises OSError when the file cannot be read, ValueError naming the file and the line
    when a line is not a JSON object.
    """
    return read_json_lines(path)


def read_events(path: str | Path) -> list[Event]:
    """The events of a trace file, typed.

    Raises OSError when the file cannot be read, ValueError naming the file and the line
    when a line is not an event Pi writes (pydantic's ValidationError is a ValueError).
    """
    events: list[Event] = []
    for number, data in enumerate(read_json_lines(path), 1):
        try:
            events.append(event_from_dict(data))
        except ValueError as exc:
            raise ValueError(f"{path}: event {number} is not one Pi writes: {exc}") from exc
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
            # A step begins (the model is about to be called) or the run ends.
            if isinstance(event, RunFinished) or (
                isinstance(event, Transition) and event.target in ("think", "done")
            ):
                self.writer.flush()
        if self.listener is not None:
            self.listener(event)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
