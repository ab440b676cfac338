"""The `pi` command line prints outside text as it is, one message a line.

Session ids, paths, model names, tool errors and model text may hold Rich markup (`[/]`
crashed Rich, `[bold]` vanished), emoji codes, newlines and terminal escapes; argv may
hold bytes that are not UTF-8. Every command must still exit with its documented code,
show such text literally and keep each error on one line. Most cases run in-process;
two drive the real console script, since only it sees raw argv bytes.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

import pi_runtime.cli
from pi_runtime.cli import app

PI = Path(sys.executable).parent / "pi"
CLI = Path(pi_runtime.cli.__file__).parent

# Markup that crashes Rich, markup it would swallow, an emoji code, a terminal escape.
HOSTILE = "[/] [bold]x[/bold] [red] :thumbs_up: \x1b[31m"
# The same on one line of output: brackets and colons kept, the escape shown as one.
SHOWN = "[/] [bold]x[/bold] [red] :thumbs_up: \\x1b[31m"
MULTILINE = HOSTILE + "\nsecond line"
MULTILINE_SHOWN = SHOWN + "\\nsecond line"
NAME = "s[/][bold]x[/bold]:thumbs_up:"  # for ids and names: no spaces, no escapes

TOOLS = f'''\
"""A tool whose failure stops the run with an outside message."""

from pi_runtime import UnrecoverableError, tool


@tool
def explode(n: int) -> str:
    """Always fail for good."""
    raise UnrecoverableError({MULTILINE!r})


TOOLS = [explode]
'''

# Commentary with markup, a call to a tool the model made up, then the failing tool.
SCRIPT = [
    {"text": MULTILINE, "tool_calls": [{"name": "no[/]such[bold]", "arguments": {}}]},
    {"tool_calls": [{"name": "explode", "arguments": {"n": 1}}]},
]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working directory with a tools module and a script in a bracketed path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PI_TRACE_DIR", str(tmp_path / "traces"))
    monkeypatch.delenv("COLUMNS", raising=False)  # errors must not wrap at Rich's 80
    return tmp_path


def tools_module(directory: Path) -> str:
    """A freshly named tools module (in-process runs share one import cache)."""
    name = f"hostile_{uuid.uuid4().hex}"
    (directory / f"{name}.py").write_text(TOOLS, encoding="utf-8")
    return f"{name}:TOOLS"


def script(directory: Path, steps: list[dict[str, Any]] = SCRIPT) -> str:
    """`scripted:PATH` with brackets in both the folder and the file name."""
    folder = directory / "d[red]" / "s[bold]x["  # the path reads d[red]/s[bold]x[/bold].json
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bold].json"
    path.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return f"scripted:{path}"


def invoke(*args: str, env: dict[str, str] | None = None, stdin: bytes = b"") -> Result:
    result = CliRunner().invoke(app, list(args), env=env, input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"pi {' '.join(args)} raised") from result.exception
    return result


def assert_one_line(stream: str, *texts: str) -> None:
    """Some single line of `stream` holds every text in `texts`, in order."""
    needle = ".*".join(texts)
    lines = stream.splitlines()
    assert any(_in_order(line, texts) for line in lines), f"{needle!r} not on one line:\n{stream}"


def _in_order(line: str, texts: tuple[str, ...]) -> bool:
    at = 0
    for text in texts:
        at = line.find(text, at)
        if at < 0:
            return False
        at += len(text)
    return True


# --- pi run ------------------------------------------------------------------------------


def test_run_shows_a_missing_bracketed_script_path_on_one_line(here: Path) -> None:
    missing = here / "d[/]x[" / "]y[bold]z[/bold].json"

    result = invoke("run", "hi", "--model", f"scripted:{missing}")

    assert result.exit_code == 2
    assert_one_line(result.stderr, "error: ", "cannot read script ", str(missing))


def test_run_progress_and_stop_lines_show_outside_text_literally(here: Path) -> None:
    result = invoke("run", HOSTILE, "--model", script(here), "--tools", tools_module(here))

    assert result.exit_code == 1
    assert result.stdout == ""
    assert_one_line(result.stderr, "step 1 ", SHOWN)  # commentary keeps its own lines
    assert_one_line(result.stderr, "no[/]such[bold]: ")
    assert_one_line(result.stderr, "tool_error: explode: ", MULTILINE_SHOWN)
    assert_one_line(result.stderr, "trace: ", str(here / "traces"))


def test_run_in_a_session_shows_its_id_and_errors_literally(here: Path) -> None:
    db = f"sqlite:///{here / 'db[/]x.db'}"
    tools = tools_module(here)

    result = invoke(
        "run", "hi", "--model", script(here), "--tools", tools, "--session", NAME, "--db", db
    )

    assert result.exit_code == 1
    assert_one_line(result.stderr, "tool_error: explode: ", MULTILINE_SHOWN)
    assert_one_line(result.stderr, f"session {NAME} · trace: ")
    refused = invoke(
        "run", "hi", "--model", "scripted:other[/].json", "--session", NAME, "--db", db
    )
    assert refused.exit_code == 2
    assert_one_line(refused.stderr, "error: ", NAME)


def test_run_json_keeps_stdout_pure_and_the_error_on_one_line(here: Path) -> None:
    missing = here / "d[/]x[" / "]y[bold]z[/bold].json"

    failed = invoke("run", "hi", "--model", f"scripted:{missing}", "--json")
    ran = invoke("run", HOSTILE, "--model", script(here), "--tools", tools_module(here), "--json")

    assert failed.exit_code == 2
    assert failed.stdout == ""
    assert_one_line(failed.stderr, "error: ", "cannot read script ", str(missing))
    assert ran.exit_code == 1
    data = json.loads(ran.stdout)
    assert data["stop_reason"] == "tool_error"
    assert data["error"] == f"explode: {MULTILINE}"
    assert data["messages"][0]["content"] == HOSTILE


# --- pi session --------------------------------------------------------------------------


def test_session_show_and_cancel_print_each_message_on_one_line(here: Path) -> None:
    db = f"sqlite:///{here / 'db[/]x.db'}"
    tools = tools_module(here)
    invoke(
        "run", MULTILINE, "--model", script(here), "--tools", tools, "--session", NAME, "--db", db,
        "--json",
    )  # fmt: skip

    shown = invoke("session", "show", NAME, "--db", db)
    cancelled = invoke("session", "cancel", NAME, "--db", db)
    missing = invoke("session", "show", NAME + "-" + "x" * 80 + "\n[red]", "--db", db)

    assert shown.exit_code == 0
    assert_one_line(shown.stdout, f"session {NAME}: ")
    assert_one_line(shown.stdout, "0 user: ", MULTILINE_SHOWN)
    assert_one_line(shown.stdout, "assistant: ", SHOWN, "no[/]such[bold]")
    assert_one_line(shown.stdout, "tool ✗ ", "[/] [bold]x[/bold] [red] :thumbs_up:")
    assert cancelled.exit_code == 0
    assert_one_line(cancelled.stderr, f"session {NAME} cancelled: ")
    assert missing.exit_code == 2
    assert_one_line(missing.stderr, "error: no session ", NAME + "-" + "x" * 80 + "\\n[red]")


# --- pi trace ----------------------------------------------------------------------------


def test_trace_show_prints_a_bracketed_path_and_outside_details_literally(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = here / "t[bold]x[" / "]y[red]"
    monkeypatch.setenv("PI_TRACE_DIR", str(traces))
    ran = invoke("run", "hi", "--model", script(here), "--tools", tools_module(here), "--json")
    trace = json.loads(ran.stdout)["trace"]

    shown = invoke("trace", "show", trace, env={"COLUMNS": "2000"})
    missing = invoke("trace", "show", str(traces / "none[/].jsonl"))

    assert shown.exit_code == 0
    assert str(traces) in shown.stdout
    assert_one_line(shown.stdout, "run_finished", "explode: ", MULTILINE_SHOWN)
    assert_one_line(shown.stdout, "no[/]such[bold]")
    assert missing.exit_code == 2
    assert_one_line(missing.stderr, "error: cannot read trace ", str(traces / "none[/].jsonl"))


# --- pi worker ---------------------------------------------------------------------------


def test_worker_prints_its_name_store_and_errors_literally(here: Path) -> None:
    db = f"sqlite:///{here / 'db[/]x.db'}"

    served = invoke("worker", "--once", "--name", NAME, "--db", db)
    bad = invoke("worker", "--once", "--db", db, "--tools", "no[/]such\n[red]:X")

    assert served.exit_code == 0
    assert_one_line(served.stderr, f"{NAME}: serving sqlite:///")
    assert_one_line(served.stderr, f"{NAME}: 0 job(s)")
    assert bad.exit_code == 2
    assert_one_line(bad.stderr, "error: tools no[/]such\\n[red]:X")


# --- pi qrp, pi bench --------------------------------------------------------------------


def test_qrp_error_shows_an_emoji_code_and_markup_literally() -> None:
    result = invoke("qrp", "encode", "--kind", "series", "--time-key", NAME, stdin=b'[{"a": 1}]')

    assert result.exit_code == 2
    assert result.stdout == ""
    assert_one_line(result.stderr, "error: kind series: time_key ", NAME)


def test_bench_usage_error_shows_the_given_value_literally() -> None:
    result = invoke("bench", "loop", "--turns", "[/]:thumbs_up:")

    assert result.exit_code == 2
    assert_one_line(result.stderr, "error: --turns must be integers >= 2, got '[/]:thumbs_up:'")


# --- every print goes through the console helper -----------------------------------------


def test_cli_modules_print_only_through_the_console_helper() -> None:
    """Markup in a printed string is how outside text got misread: only `_console`
    makes consoles, and nothing hands Rich a string to parse."""
    offences = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "_console.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            stringy = (ast.JoinedStr, ast.Constant, ast.BinOp)
            if name == "Console" or (
                name == "print" and node.args and isinstance(node.args[0], stringy)
            ):
                offences.append(f"{path.name}:{node.lineno}")
    assert offences == []


# --- argv bytes that are not UTF-8 (the real console script) -----------------------------


def pi_bytes(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PI_TRACE_DIR": str(cwd / "traces"), "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [str(PI), *args], cwd=cwd, env=env, capture_output=True, timeout=120, check=False
    )


def test_run_json_with_undecodable_argv_completes_with_replacement_characters(
    here: Path,
) -> None:
    model = script(here, [{"text": "done"}])
    db = f"sqlite:///{here / 'db.db'}"

    proc = pi_bytes(
        "run", b"hi \xff\xfe [/]", "--model", model, "--session", b"s\xff", "--db", db,
        "--json", cwd=here,
    )  # fmt: skip

    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    data = json.loads(proc.stdout.decode("utf-8"))
    assert data["status"] == "completed"
    assert data["messages"][0]["content"] == "hi \ufffd\ufffd [/]"


def test_run_with_undecodable_argv_prints_its_session_line(here: Path) -> None:
    model = script(here, [{"text": "done"}])
    db = f"sqlite:///{here / 'db.db'}"

    proc = pi_bytes(
        "run", b"hi \xff", "--model", model, "--session", b"s\xff[/]", "--db", db, cwd=here
    )

    stderr = proc.stderr.decode("utf-8")
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0, stderr
    assert proc.stdout.decode("utf-8") == "done\n"
    assert_one_line(stderr, "session s\ufffd[/] · trace: ")


def test_run_prints_the_answer_with_its_lines_and_without_terminal_codes(here: Path) -> None:
    answer = "line one\nred \x1b[31mALERT\x1b[0m [bold]x[/bold] \u2028end"
    result = invoke("run", "hi", "--model", script(here, [{"text": answer}]))

    assert result.exit_code == 0
    assert result.stdout == "line one\nred \\x1b[31mALERT\\x1b[0m [bold]x[/bold] \\u2028end\n"
    assert "\x1b" not in result.stdout


def test_run_prints_a_contract_answer_as_json(here: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    (here / "answer.json").write_text(json.dumps(schema), encoding="utf-8")
    steps = [{"text": '{"answer": "雨"}'}]
    (here / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    (here / "agent.toml").write_text(
        'model = "scripted:script.json"\noutput = "answer.json"\n', encoding="utf-8"
    )
    result = invoke("run", "hi", "--agent", str(here / "agent.toml"))

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"answer": "雨"}


@pytest.mark.parametrize("mark", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c"])
def test_bidirectional_controls_are_shown_as_escapes(mark: str) -> None:
    from pi_runtime.cli._console import plain

    shown = plain(f"ls {mark}; rm -rf ~ #")
    assert mark not in shown
    assert f"\\u{ord(mark):04x}" in shown
    assert plain(f"a{mark}\nb", lines=True) == f"a\\u{ord(mark):04x}\nb"


def test_an_approval_line_shows_every_argument_however_one_is_padded() -> None:
    from pi_runtime.cli._console import MAX_SHOWN_VALUE_CHARS, shown_arguments

    padded = {"note": "safe to approve " * 40, "cmd": "rm -rf / --no-preserve-root"}
    shown = shown_arguments(padded)
    assert 'cmd="rm -rf / --no-preserve-root"' in shown
    assert f"({len(json.dumps(padded['note']))} characters)" in shown
    assert len(shown) < MAX_SHOWN_VALUE_CHARS + 100

    many = {f"k{i}": i for i in range(25)}
    shown = shown_arguments(many)
    assert "k19=19" in shown and "k20" not in shown
    assert "… and 5 more arguments" in shown
