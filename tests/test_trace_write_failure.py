"""A trace the system refuses to write (a full disk, a file size limit) ends the trace,
not the run: the run's result comes back whole, the trace file ends at its last whole
line, and the failure is logged."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import Agent, tool
from pi_runtime.observe import Transition
from pi_runtime.observe import trace as trace_module
from pi_runtime.observe.trace import TraceWriter
from pi_runtime.testing import ScriptedModel, function_call, text


class HalfWritten:
    """A file that takes `room` more bytes, then refuses the rest as a full disk does."""

    def __init__(self, real: Any, room: int) -> None:
        self.real, self.room = real, room

    def write(self, data: bytes) -> int:
        taken = data[: self.room]
        self.real.write(taken)
        self.real.flush()
        self.room -= len(taken)
        if len(taken) < len(data):
            raise OSError(28, "No space left on device")
        return len(data)

    def flush(self) -> None:
        self.real.flush()

    def truncate(self, size: int) -> int:
        return int(self.real.truncate(size))

    def close(self) -> None:
        self.real.close()


def test_a_refused_write_cuts_the_trace_back_to_its_last_whole_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = TraceWriter(tmp_path, "run-1")
    writer.write(Transition(source="start", target="think", step=1))
    writer.flush()
    whole = writer.path.read_bytes()
    writer._file = HalfWritten(writer._file, room=10)  # type: ignore[assignment]
    writer.write(Transition(source="think", target="act", step=1))
    with caplog.at_level(logging.WARNING, logger="pi_runtime.observe"):
        writer.flush()  # no exception: the run goes on
        writer.write(Transition(source="act", target="think", step=2))
        writer.close()

    assert writer.path.read_bytes() == whole  # not the 10 bytes of a half line
    assert writer.failed is not None and "No space left" in writer.failed
    assert "the run goes on without it" in caplog.text


@tool
def lookup(city: str) -> str:
    """The weather of a city."""
    return f"Rain in {city}."


def test_a_run_whose_trace_cannot_be_written_still_returns_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[TraceWriter] = []

    class FullDisk(TraceWriter):
        def __init__(self, directory: Path, run_id: str) -> None:
            super().__init__(directory, run_id)
            assert self._file is not None
            self._file.close()
            self._file = open("/dev/full", "wb")  # noqa: SIM115  (every write: ENOSPC)
            made.append(self)

    monkeypatch.setattr(trace_module, "TraceWriter", FullDisk)
    script = [function_call("lookup", {"city": "Oslo"}), text("Rain in Oslo.")]
    agent = Agent(ScriptedModel(script), tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("weather?")

    assert (result.status, result.output) == ("completed", "Rain in Oslo.")
    assert [e.kind for e in result.events][-1] == "run_finished"
    assert made and made[0].failed is not None
    json.dumps(result.to_dict())  # the whole result, as the CLI prints it
