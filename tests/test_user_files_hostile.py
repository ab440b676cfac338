"""Files a user names that are not what they should be: a FIFO, a device, a file far too
large, a symlink loop, a script nested past the parser's depth. Each is one `UserError`
naming the file, never a hang, a memory blow-up or a raw traceback.

The agent files name no tools, so nothing is imported. A FIFO is read in a thread: on a
reader that blocks, the test opens the FIFO's other end to free it, then fails.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import UserError
from pi_runtime.evals.suite import load_suite
from pi_runtime.loop import agentfile
from pi_runtime.loop.agentfile import read_agent_file
from pi_runtime.loop.definition import absolute_model
from pi_runtime.messages import read_json_lines
from pi_runtime.models.scripted import load_script
from pi_runtime.userfiles import MiB, UserFileError, read_user_text, resolved

SCRIPT = '{"steps": [{"text": "ok"}]}'


def agent_file(folder: Path, body: str, name: str = "agent.toml") -> Path:
    (folder / "script.json").write_text(SCRIPT)
    file = folder / name
    file.write_text('model = "scripted:script.json"\n' + body)
    return file


def raised_by(read: Callable[[], Any], fifo: Path | None = None) -> BaseException | None:
    """What `read()` raises, run in a thread; a read blocked on `fifo` is freed and fails."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            read()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=20)
    if thread.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the reader's open returns
        thread.join(timeout=20)
        pytest.fail(f"reading {fifo} blocked until a writer came")
    return outcome[0]


# --- bug 1: only regular files, and not too large ---------------------------------------


def readers(folder: Path, target: Path) -> dict[str, Callable[[], Any]]:
    """Each way Pi reads a user file, aimed at `target`."""
    output = agent_file(folder, f'output = "{target}"\n', "output.toml")
    sub = agent_file(folder, f'[subagents.x]\nagent = "{target}"\ndescription = "d"\n', "sub.toml")
    return {
        "agent file": lambda: read_agent_file(target),
        "output schema": lambda: read_agent_file(output),
        "sub-agent file": lambda: read_agent_file(sub),
        "eval suite": lambda: load_suite(target),
        "scripted script": lambda: load_script(target),
        "trace": lambda: read_json_lines(target),
    }


READERS = ["agent file", "output schema", "sub-agent file", "eval suite", "scripted script"]


@pytest.mark.parametrize("reader", [*READERS, "trace"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, reader: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    raised = raised_by(readers(tmp_path, fifo)[reader], fifo)
    assert isinstance(raised, UserError | OSError), raised
    assert "not a regular file but a FIFO" in str(raised)
    assert str(fifo) in str(raised)


@pytest.mark.parametrize("reader", [*READERS, "trace"])
def test_a_device_is_refused_unread(tmp_path: Path, reader: str) -> None:
    # /dev/null reads empty, safely; /dev/zero would be refused by the same check
    raised = raised_by(readers(tmp_path, Path("/dev/null"))[reader])
    assert isinstance(raised, UserError | OSError), raised
    assert "not a regular file but a character device" in str(raised)


def test_a_trace_that_is_not_a_regular_file_is_still_an_oserror(tmp_path: Path) -> None:
    # `read_json_lines` promises OSError for a file it cannot read; callers catch that
    with pytest.raises(OSError, match="trace /dev/null: not a regular file"):
        read_json_lines("/dev/null")


@pytest.mark.parametrize("reader", READERS)
def test_a_file_far_too_large_is_refused(tmp_path: Path, reader: str) -> None:
    huge = tmp_path / "huge"
    with huge.open("wb") as file:
        file.truncate(100 * MiB)  # sparse: no disk, but a size no agent file has
    raised = raised_by(readers(tmp_path, huge)[reader])
    assert isinstance(raised, UserError), raised
    assert "larger than" in str(raised)


def test_read_user_text_reads_at_most_one_byte_past_the_cap(tmp_path: Path) -> None:
    file = tmp_path / "f.txt"
    file.write_text("x" * 11)
    with pytest.raises(UserFileError, match=r"^note .*f\.txt: larger than 10 bytes$"):
        read_user_text(file, what="note", max_bytes=10)
    assert read_user_text(file, what="note", max_bytes=11) == "x" * 11


def test_read_user_text_names_the_file_that_is_not_utf8(tmp_path: Path) -> None:
    file = tmp_path / "f.txt"
    file.write_bytes(b"\xef\xbb\xbfab\xff")
    with pytest.raises(UserFileError, match=r"f\.txt: not UTF-8 \(invalid start byte at byte 5\)"):
        read_user_text(file, what="note", max_bytes=10)


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    file = tmp_path / "f.txt"
    file.write_bytes(b"\xef\xbb\xbfab")
    assert read_user_text(file, what="note", max_bytes=10) == "ab"


# --- bug 2: symlink loops ----------------------------------------------------------------


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    link = tmp_path / "loop"
    link.symlink_to("loop")
    return link


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('output = "loop"\n', "output: "),
        ('[subagents.x]\nagent = "loop"\ndescription = "d"\n', "subagents.x.agent: "),
        ('[mcp.x]\ncommand = ["true"]\ncwd = "loop"\n', "mcp.x.cwd: "),
    ],
    ids=["output", "subagent", "mcp cwd"],
)
def test_a_symlink_loop_in_an_agent_file_is_a_user_error(
    tmp_path: Path, loop: Path, body: str, said: str
) -> None:
    file = agent_file(tmp_path, body)
    with pytest.raises(UserError, match="loop") as raised:
        read_agent_file(file)
    assert said in str(raised.value)
    assert str(file) in str(raised.value)


def test_a_symlink_loop_as_the_scripted_model_is_a_user_error(tmp_path: Path, loop: Path) -> None:
    file = tmp_path / "agent.toml"
    file.write_text('model = "scripted:loop"\n')
    with pytest.raises(UserError, match=r"agent\.toml:1: model: .*loop.*cannot resolve it"):
        read_agent_file(file)
    with pytest.raises(UserError, match="cannot resolve it"):
        absolute_model("scripted:loop", tmp_path)  # `--model scripted:loop` on argv


def test_a_symlink_loop_as_an_eval_script_is_a_suite_error(tmp_path: Path, loop: Path) -> None:
    agent_file(tmp_path, "")
    suite = tmp_path / "suite.toml"
    suite.write_text('agent = "agent.toml"\n[[case]]\nname = "a"\nprompt = "hi"\nscript = "loop"\n')
    with pytest.raises(UserError, match=r'case "a": script: .*cannot resolve it'):
        load_suite(suite)


def test_resolved_turns_a_loop_into_a_user_error(loop: Path) -> None:
    with pytest.raises(UserFileError, match=r"^thing .*loop: cannot resolve it: "):
        resolved(loop, what="thing")


# --- bug 3: a script nested past the parser's depth ---------------------------------------


def test_a_deeply_nested_script_is_a_user_error(tmp_path: Path) -> None:
    script = tmp_path / "deep.json"
    script.write_text('{"steps": [' + "[" * 100_000)
    with pytest.raises(UserError, match=r"deep\.json is nested too deeply"):
        load_script(script)


# --- bug 4: finding the error line is linear ----------------------------------------------


class _NoRegex:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the line finder calls re.{name}")


def test_the_error_line_finder_uses_no_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    # a backtracking pattern over a line of `[` and spaces took minutes; string methods
    # cannot backtrack
    monkeypatch.setattr(agentfile, "re", _NoRegex())
    text = 'a = 1\n[limits]\nmax_steps = "x"\n'
    assert agentfile._line_of(text, "limits.max_steps") == 3


def test_long_lines_of_brackets_and_spaces_do_not_stall_the_line_finder(tmp_path: Path) -> None:
    # the old finder took 14 s at 2,000 spaces in the string and grew with their cube; on
    # the header line it grew with the square of the spaces
    body = "[" + " " * 4_000 + "x"
    spaces = " " * 100_000
    file = agent_file(
        tmp_path,
        f'instructions = """\n{body}\n"""\n[{spaces}limits{spaces}]\nmax_steps = "x"\n',
    )
    with pytest.raises(UserError, match=r"agent\.toml:6: limits\.max_steps: "):
        read_agent_file(file)


# --- bug 5: a key spelled inside a multi-line string sets nothing -------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('m = 1\ni = """\nAnswer:\nmode = whatever\n"""\nmode = "bad"\n', 6),
        ("m = 1\ni = '''\nmode = whatever\n'''\nmode = \"bad\"\n", 5),
        ('i = """one line"""\nmode = "bad"\n', 2),
        ('i = """a\\"""\nmode = x\n"""\nmode = "bad"\n', 4),
        ('i = "\'\'\'"\nmode = "bad"\n', 2),
        ('i = \'"""\'  # """\nmode = "bad"\n', 2),
        ('i = """\n[limits]\n"""\nmode = "bad"\n', 4),
    ],
    ids=["basic", "literal", "closed", "escaped", "quotes", "comment", "header"],
)
def test_the_error_line_skips_multi_line_strings(text: str, line: int) -> None:
    assert agentfile._line_of(text, "mode") == line


def test_the_agent_file_error_names_the_line_after_the_string(tmp_path: Path) -> None:
    file = agent_file(
        tmp_path, 'instructions = """\nAnswer in this format:\nmode = whatever\n"""\nmode = "bad"\n'
    )
    with pytest.raises(UserError, match=r"agent\.toml:6: mode: "):
        read_agent_file(file)


# --- bug 6: expected arguments no JSON tool call can hold ---------------------------------


def suite_expecting(tmp_path: Path, arguments: str) -> Path:
    agent_file(tmp_path, "")
    suite = tmp_path / "suite.toml"
    suite.write_text(
        'agent = "agent.toml"\n[[case]]\nname = "c"\nprompt = "hi"\n'
        f'expect_tools = [{{name = "lookup", arguments = {arguments}}}]\n'
    )
    return suite


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ("{city = nan}", "expect_tools[0].arguments.city: nan"),
        ("{day = -inf}", "expect_tools[0].arguments.day: -inf"),
        ("{days = [1.0, inf]}", "expect_tools[0].arguments.days[1]: inf"),
        ("{at = 1979-05-27T07:32:00Z}", "expect_tools[0].arguments.at: a TOML date-time"),
        ("{at = 07:32:00}", "expect_tools[0].arguments.at: a TOML time"),
        ("{w = {at = 1979-05-27T07:32:00}}", "expect_tools[0].arguments.w.at: a TOML date-time"),
    ],
)
def test_expected_arguments_no_tool_call_can_hold_are_refused(
    tmp_path: Path, arguments: str, said: str
) -> None:
    with pytest.raises(UserError, match=r'suite\.toml: case "c": ') as raised:
        load_suite(suite_expecting(tmp_path, arguments))
    assert said in str(raised.value)


def test_an_expected_date_is_the_string_a_tool_call_spells(tmp_path: Path) -> None:
    suite = load_suite(suite_expecting(tmp_path, "{city = 1979-05-27, on = [1979-05-28]}"))
    assert suite.cases[0].expect_tools[0].arguments == {
        "city": "1979-05-27",
        "on": ["1979-05-28"],
    }
