"""A trace holds one event a line whatever text the run met, and every reader agrees.

`str.splitlines` breaks lines at U+2028, U+2029, U+0085 and \\x0b, \\x0c, \\x1c-\\x1e as well
as at "\\n". A message holding one of them used to make the run's own trace unreadable by
`pi trace show` and by `--model replay:TRACE`. A line that is not a JSON object is a clear
error naming the file and the line, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path

import pytest

from cli_support import pi as cli_pi
from cli_support import pi_inprocess
from pi_runtime import Agent, UserError
from pi_runtime.messages import TextBlock, UserMessage, json_line, read_json_lines
from pi_runtime.models import FunctionModel, ModelRequest, ReplayModel
from pi_runtime.observe import read_trace

# Everything str.splitlines splits on besides "\n", with NUL and a CR for company.
BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
HOSTILE = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg\x1dh\x1ei\rj\x00k"
REQUEST = ModelRequest(system="", messages=(UserMessage(content="hi"),))


def run_answering(text: str, trace_dir: Path) -> Path:
    result = Agent(FunctionModel(lambda request: {"text": text}), trace_dir=trace_dir).run_sync(
        "say " + text
    )
    assert result.status == "completed", result.error
    assert result.trace is not None
    return Path(result.trace)


pi = partial(cli_pi, process=True)  # the console script, in a process of its own


# --- the writer ------------------------------------------------------------------------


@pytest.mark.parametrize("char", list(BREAKS + "\n\x00"), ids=lambda c: f"U+{ord(c):04X}")
def test_a_json_line_is_one_line_for_every_splitter_and_reads_back(char: str) -> None:
    line = json_line({"text": f"x{char}y"})

    assert line.splitlines() == [line]
    assert not any(c in line for c in BREAKS + "\n")
    assert json.loads(line) == {"text": f"x{char}y"}


def test_line_breaking_characters_in_a_run_leave_one_event_a_line(tmp_path: Path) -> None:
    trace = run_answering(HOSTILE, tmp_path)

    text = trace.read_text(encoding="utf-8")
    events = read_trace(trace)

    assert len(text.splitlines()) == len(events) == text.count("\n")
    answer = next(e for e in events if e["kind"] == "model_response")
    assert answer["message"]["content"] == [{"kind": "text", "text": HOSTILE, "phase": "final"}]


def test_a_replay_of_a_trace_with_line_breaking_characters_answers_the_same(
    tmp_path: Path,
) -> None:
    trace = run_answering(HOSTILE, tmp_path / "first")

    replayed = Agent(model=f"replay:{trace}", trace_dir=tmp_path / "again").run_sync(
        "say " + HOSTILE
    )

    assert (replayed.status, replayed.output) == ("completed", HOSTILE), replayed.error


def test_pi_trace_show_reads_a_trace_with_line_breaking_characters(tmp_path: Path) -> None:
    trace = run_answering(HOSTILE, tmp_path)

    proc = pi("trace", "show", str(trace), cwd=tmp_path)

    assert proc.returncode == 0, proc.stderr
    assert "final_answer" in proc.stdout


def test_lone_surrogates_in_an_event_are_written_as_u_fffd(tmp_path: Path) -> None:
    line = json_line({"text": "a\ud800b\ud83d\ude00", "\udc00key": ["\ud83d"]})

    assert json.loads(line) == {"text": "a\ufffdb\U0001f600", "\ufffdkey": ["\ufffd"]}


# --- the readers -----------------------------------------------------------------------


def test_a_trace_written_with_raw_separators_still_reads(tmp_path: Path) -> None:
    trace = tmp_path / "older.jsonl"
    message = {"role": "assistant", "content": [{"kind": "text", "text": "a\u2028b\x85c"}]}
    event = {"kind": "model_response", "turn": 0, "message": message}
    trace.write_text(
        json.dumps({"kind": "run_started"}) + "\n" + json.dumps(event, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )

    assert read_trace(trace)[1] == event
    response = asyncio.run(ReplayModel(trace).complete(REQUEST))
    assert response.content == (TextBlock(text="a\u2028b\x85c"),)


BAD_LINES = {
    "not JSON": b"not json",
    "an array": b"[1, 2]",
    "a string": b'"kind"',
    "not UTF-8": b'{"kind": "\xff"}',
    "too deep": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("bad", BAD_LINES.values(), ids=BAD_LINES.keys())
def test_a_line_that_is_not_a_json_object_names_the_file_and_the_line(
    bad: bytes, tmp_path: Path
) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_bytes(b'{"kind": "run_started"}\n' + bad + b"\n")

    with pytest.raises(ValueError, match=r"bad\.jsonl: line 2 ") as raised:
        read_json_lines(trace)
    with pytest.raises(UserError, match=r"bad\.jsonl: line 2 ") as refused:
        ReplayModel(trace)

    assert str(raised.value) in str(refused.value)


def test_pi_trace_show_of_a_line_that_is_not_an_object_exits_2_without_a_traceback(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "array.jsonl"
    trace.write_text('{"kind": "run_started"}\n[1, 2]\n', encoding="utf-8")

    proc = pi("trace", "show", str(trace), cwd=tmp_path)

    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "array.jsonl" in proc.stderr
    assert "line 2" in proc.stderr


@pytest.mark.parametrize(
    "event",
    [
        {"kind": "model_response", "turn": 0},
        {"kind": "model_response", "turn": 0, "message": 5},
        {"kind": "model_response", "turn": 0, "message": {"role": "user", "content": "x"}},
        {"kind": "model_response", "turn": "zero", "message": {"role": "assistant", "content": []}},
        {"kind": "model_response", "message": {"role": "assistant", "content": [{"kind": "?"}]}},
    ],
    ids=["no message", "message not an object", "user message", "turn not a number", "bad block"],
)
def test_a_model_response_pi_did_not_write_is_a_user_error_naming_the_trace(
    event: dict[str, object], tmp_path: Path
) -> None:
    trace = tmp_path / "odd.jsonl"
    trace.write_text(json.dumps({"kind": "run_started"}) + "\n" + json.dumps(event) + "\n")

    with pytest.raises(UserError, match=r"odd\.jsonl: event 2 is not a model response"):
        ReplayModel(trace)


def test_a_trace_folder_is_made_when_missing_and_a_file_in_its_place_is_a_clear_error(
    tmp_path: Path,
) -> None:
    nested = tmp_path / "a" / "b" / "traces"
    trace = run_answering("first", nested)  # made on the first run's trace
    assert trace.parent == nested and read_trace(trace)[0]["kind"] == "run_started"
    assert run_answering("second", nested).parent == nested  # it exists: runs just write
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    agent = Agent(FunctionModel(lambda request: {"text": "x"}), trace_dir=blocked / "traces")
    with pytest.raises(UserError, match="cannot write traces"):
        agent.run_sync("hi")
    assert blocked.read_text() == "a file, not a folder"


@pytest.mark.parametrize("how", ["--trace-dir", "PI_TRACE_DIR", "--json"])
def test_pi_run_with_a_file_for_its_trace_folder_says_so_in_one_line(
    tmp_path: Path, how: str
) -> None:
    # outside `--session` the run's refusal escaped as a traceback (exit 1)
    (tmp_path / "s.json").write_text(json.dumps({"steps": [{"text": "hi"}]}))
    args = ["run", "--model", "scripted:s.json", "hi"]
    env: dict[str, str | None] = {}
    if how == "PI_TRACE_DIR":
        env["PI_TRACE_DIR"] = "s.json"
    else:
        args[1:1] = ["--trace-dir", "s.json"] + (["--json"] if how == "--json" else [])
    ran = pi_inprocess(*args, cwd=tmp_path, env=env)
    assert ran.returncode == 2, ran
    assert "cannot write traces to s.json" in ran.stderr and "Traceback" not in ran.stderr
    assert ran.stdout == ""
    assert json.loads((tmp_path / "s.json").read_text()) == {"steps": [{"text": "hi"}]}
