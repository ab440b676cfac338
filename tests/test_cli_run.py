"""`pi run` and `pi trace show` as other programs see them: stdout, stderr, exit codes.

Every case drives the command line in a scratch directory holding script files and a
small tools module, so `--tools mytools:TOOLS` imports from the working directory. Most
run in-process (see `cli_support`); a few drive the real console script in a subprocess,
where stdout is the file descriptor another program reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cli_support import Ran, pi
from pi_runtime.testing import ScriptStep, function_call, text

REPO = Path(__file__).resolve().parents[1]
PROMPT = "please echo hi"

STATUSES = {"completed", "stopped", "failed", "awaiting"}
STOP_REASONS = {
    "final_answer",
    "max_steps",
    "token_budget",
    "wall_clock",
    "consecutive_errors",
    "loop_detected",
    "no_progress",
    "model_error",
    "tool_error",
    "security",
    "contract_violation",
    "cancelled",
    "awaiting_tool",
}
CONTRACT_KEYS = {
    "status",
    "stop_reason",
    "output",
    "steps",
    "usage",
    "metrics",
    "messages",
    "trace",
}
USAGE_KEYS = {"input_tokens", "output_tokens", "cached_tokens"}
METRIC_KEYS = {
    "text_tokens_before_first_tool_call",
    "time_to_first_tool_call_ms",
    "mixed_text_tool_message_rate",
    "tool_argument_truncation_count",
}

TOOLS_MODULE = '''\
"""Tools for the CLI tests."""

from pi_runtime import tool

_CALLS = 0


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@tool
def tick(a: int, b: int) -> int:
    """Count how often it was called: the result differs on every call."""
    global _CALLS
    _CALLS += 1
    return _CALLS


@tool
def broken(n: int) -> str:
    """Always fail."""
    raise RuntimeError(f"broken on purpose ({n})")


@tool
def shout(text: str) -> str:
    """Print the text (as a debugging tool author might), then return it."""
    print("debug:", text)
    return text


TOOLS = [echo, tick, broken]
ECHO = echo
CHATTY = [shout]
NOT_A_TOOL = 42
'''


COMPLETED_SCRIPT = [
    function_call("echo", {"text": "hi"}, usage={"input_tokens": 10, "output_tokens": 5}),
    text("done: hi", usage={"input_tokens": 20, "output_tokens": 7}),
]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "mytools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    return tmp_path


def write_script(directory: Path, steps: list[ScriptStep], name: str = "script.json") -> str:
    shape = [step.model_dump(mode="json", exclude_defaults=True) for step in steps]
    (directory / name).write_text(json.dumps({"steps": shape}), encoding="utf-8")
    return name


def flat(text: str) -> str:
    """Whitespace-normalised text, so line wrapping never decides a test."""
    return " ".join(text.split())


def run_steps(
    workdir: Path,
    steps: list[ScriptStep],
    *extra: str,
    tools: str = "mytools:TOOLS",
    process: bool = False,
) -> Ran:
    """`pi run PROMPT` on a script of `steps`, with the tools of `tools` and `extra` flags."""
    script = write_script(workdir, steps)
    return pi(
        "run",
        PROMPT,
        "--model",
        f"scripted:{script}",
        "--tools",
        tools,
        *extra,
        cwd=workdir,
        process=process,
    )


def run_script(
    workdir: Path, steps: list[ScriptStep], *extra: str, process: bool = False
) -> tuple[Ran, dict[str, Any]]:
    """`pi run --json` on a script; checks stdout is exactly one contract JSON object."""
    proc = run_steps(workdir, steps, "--json", *extra, process=process)
    assert "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)  # raises on anything besides one JSON value
    assert isinstance(data, dict), proc.stdout
    assert_contract(data)
    return proc, data


def assert_contract(data: dict[str, Any]) -> None:
    assert data.keys() >= CONTRACT_KEYS
    assert data["status"] in STATUSES
    assert data["stop_reason"] in STOP_REASONS
    assert isinstance(data["steps"], int)
    assert data["steps"] >= 0
    assert data["usage"].keys() >= USAGE_KEYS
    assert all(isinstance(data["usage"][k], int) for k in USAGE_KEYS)
    assert data["metrics"].keys() >= METRIC_KEYS
    assert isinstance(data["messages"], list)
    assert isinstance(data["trace"], str)
    assert Path(data["trace"]).is_file()
    # Every tool call is answered by exactly one tool result under its id.
    call_ids = [
        block["id"]
        for m in data["messages"]
        if m["role"] == "assistant"
        for block in m["content"]
        if block["kind"] == "tool_call"
    ]
    results = [m for m in data["messages"] if m["role"] == "tool"]
    assert sorted(r["tool_call_id"] for r in results) == sorted(call_ids)
    assert all(isinstance(r["is_error"], bool) for r in results)


def trace_events(path: str) -> list[dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# --- completed runs ----------------------------------------------------------------------


def test_completed_run_prints_one_contract_object_and_exits_0(workdir: Path) -> None:
    proc, data = run_script(workdir, COMPLETED_SCRIPT, process=True)

    assert proc.returncode == 0, proc.stderr
    assert data["status"] == "completed"
    assert data["stop_reason"] == "final_answer"
    assert data["output"] == "done: hi"
    assert data["steps"] == 2
    assert data["usage"] == {
        "input_tokens": 30,
        "output_tokens": 12,
        "cached_tokens": 0,
        "cost_usd": None,  # a scripted model's price is unknown, never 0
        "source": "provider",
    }
    assert data["messages"][0] == {"role": "user", "content": PROMPT}
    (result,) = [m for m in data["messages"] if m["role"] == "tool"]
    assert result["name"] == "echo"
    assert result["is_error"] is False
    assert "hi" in result["content"]
    assert Path(data["trace"]).parent == workdir / "traces"


def test_json_trace_records_the_run_from_start_to_finish(workdir: Path) -> None:
    _, data = run_script(workdir, COMPLETED_SCRIPT)

    events = trace_events(data["trace"])
    assert events[0]["kind"] == "run_started"
    assert events[-1]["kind"] == "run_finished"
    assert events[-1]["stop_reason"] == "final_answer"
    assert [e["name"] for e in events if e["kind"] == "tool_result"] == ["echo"]


def test_tool_choice_applies_to_the_first_model_call_only(workdir: Path) -> None:
    proc, data = run_script(workdir, COMPLETED_SCRIPT, "--tool-choice", "echo")

    assert proc.returncode == 0, proc.stderr
    requests = [e for e in trace_events(data["trace"]) if e["kind"] == "model_request"]
    assert [r["tool_choice"] for r in requests] == ["echo", "auto"]


def test_tools_attr_may_hold_a_single_tool(workdir: Path) -> None:
    proc = run_steps(workdir, COMPLETED_SCRIPT, "--json", tools="mytools:ECHO")

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "completed"


def test_json_stdout_stays_one_object_when_a_tool_prints(workdir: Path) -> None:
    steps = [function_call("shout", {"text": "hello"}), text("said hello")]
    proc = run_steps(
        workdir,
        steps,
        "--json",
        tools="mytools:CHATTY",
        process=True,  # a tool's print must not reach file descriptor 1 either
    )

    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # a tool's print() must not corrupt the contract
    assert data["output"] == "said hello"


# --- runs stopped by a guard -------------------------------------------------------------

NEVER = text("this answer must never be reached")

GUARD_CASES: dict[str, tuple[list[ScriptStep], list[str]]] = {
    "max_steps": (
        [function_call("echo", {"text": "a"}), function_call("echo", {"text": "b"}), NEVER],
        ["--max-steps", "2"],
    ),
    "token_budget": (
        [
            function_call("echo", {"text": "a"}, usage={"input_tokens": 80, "output_tokens": 30}),
            NEVER,
        ],
        ["--token-budget", "100"],
    ),
    "wall_clock": (
        [function_call("echo", {"text": "a"}), text("too late", delay_ms=60_000)],
        ["--timeout", "0.5"],
    ),
    "consecutive_errors": (
        [
            function_call("broken", {"n": 1}),
            function_call("broken", {"n": 2}),
            function_call("broken", {"n": 3}),
            NEVER,
        ],
        [],
    ),
    # The same call spelled three ways (key order, whitespace): a loop, though each
    # result differs, so no-progress does not fire first.
    "loop_detected": (
        [
            function_call("tick", {"a": 1, "b": 2}),
            function_call("tick", {"b": 2, "a": 1}),
            function_call("tick", '{ "a" : 1,\n "b" : 2 }'),
            NEVER,
        ],
        [],
    ),
    # The same call spread out (A B C A D E A): never back to back (that call would not
    # run) nor three times within the loop window, so only no-progress sees it.
    "no_progress": (
        [
            function_call("echo", {"text": "same"}),
            function_call("echo", {"text": "b"}),
            function_call("echo", {"text": "c"}),
            function_call("echo", {"text": "same"}),
            function_call("echo", {"text": "d"}),
            function_call("echo", {"text": "e"}),
            function_call("echo", {"text": "same"}),
            NEVER,
        ],
        [],
    ),
}


@pytest.mark.parametrize("guard", sorted(GUARD_CASES))
def test_guard_stopped_run_prints_contract_json_and_exits_1(workdir: Path, guard: str) -> None:
    steps, extra = GUARD_CASES[guard]
    proc, data = run_script(workdir, steps, *extra)

    assert proc.returncode == 1, proc.stderr
    assert data["status"] == "stopped"
    assert data["stop_reason"] == guard
    assert data["output"] is None
    assert "never be reached" not in proc.stdout
    events = trace_events(data["trace"])
    assert events[-1]["kind"] == "run_finished"
    assert events[-1]["stop_reason"] == guard
    assert [e["guard"] for e in events if e["kind"] == "guard"] == [guard]


def test_guard_counts_are_where_the_guard_says(workdir: Path) -> None:
    steps, extra = GUARD_CASES["max_steps"]
    _, data = run_script(workdir, steps, *extra)
    assert data["steps"] == 2

    steps, extra = GUARD_CASES["consecutive_errors"]
    _, data = run_script(workdir, steps, *extra)
    results = [m for m in data["messages"] if m["role"] == "tool"]
    assert [r["is_error"] for r in results] == [True, True, True]


def test_script_too_short_is_a_model_error_exit_1(workdir: Path) -> None:
    proc, data = run_script(workdir, [function_call("echo", {"text": "a"})])

    assert proc.returncode == 1, proc.stderr
    assert data["status"] == "failed"
    assert data["stop_reason"] == "model_error"
    assert data["output"] is None
    assert data["steps"] == 1


# --- bad usage: exit 2, a clear message on stderr, nothing on stdout ----------------------

BAD_FILES = {
    "malformed.json": '{"steps": [ {"text": "unclosed" ',
    "wrong_shape.json": json.dumps({"steps": [{"txt": "typo in a field name"}]}),
    "no_steps.json": json.dumps({"turns": []}),
    "syntaxerror_tools.py": "def broken(:\n",
    "exiting_tools.py": "import sys\n\nsys.exit(0)\n",
    "unsayable_tools.py": (
        "class Unsayable(Exception):\n    def __str__(self):\n        raise ValueError\n\n"
        "raise Unsayable()\n"
    ),
}

BAD_USAGE: dict[str, tuple[list[str], list[str]]] = {
    "unknown model spec": (["--model", "nosuchprovider:thing"], ["unknown model spec"]),
    "missing script file": (["--model", "scripted:absent.json"], ["absent.json"]),
    "malformed script json": (["--model", "scripted:malformed.json"], ["not valid JSON"]),
    "script field typo": (["--model", "scripted:wrong_shape.json"], ["script format", "txt"]),
    "script without steps": (["--model", "scripted:no_steps.json"], ["script format"]),
    "module not importable": (
        ["--tools", "pi_no_such_module_xyz:TOOLS"],
        ["cannot import", "pi_no_such_module_xyz"],
    ),
    "module with a syntax error": (
        ["--tools", "syntaxerror_tools:TOOLS"],
        ["cannot import", "syntaxerror_tools"],
    ),
    "module calling sys.exit at import": (
        ["--tools", "exiting_tools:TOOLS"],
        ["importing 'exiting_tools' called sys.exit(0)"],
    ),
    "module raising an error that cannot be said": (
        ["--tools", "unsayable_tools:TOOLS"],
        ["cannot import 'unsayable_tools': Unsayable"],
    ),
    "attribute missing": (["--tools", "mytools:missing"], ["no attribute", "missing"]),
    "attribute not a tool": (["--tools", "mytools:NOT_A_TOOL"], ["NOT_A_TOOL", "@tool"]),
    "two tools of one name": (
        ["--tools", "mytools:TOOLS", "--tools", "mytools:ECHO"],
        ["share the name", "echo"],
    ),
    "tools without colon": (["--tools", "mytools"], ["MODULE:ATTR"]),
    "invalid tool choice": (["--tool-choice", "bogus"], ["'bogus'", "required"]),
    "max steps zero": (["--max-steps", "0"], ["--max-steps"]),
    "token budget zero": (["--token-budget", "0"], ["--token-budget"]),
    "timeout zero": (["--timeout", "0"], ["--timeout"]),
}


@pytest.mark.parametrize("case", sorted(BAD_USAGE))
def test_bad_usage_exits_2_with_message_on_stderr_only(workdir: Path, case: str) -> None:
    for name, content in BAD_FILES.items():
        (workdir / name).write_text(content, encoding="utf-8")
    good = write_script(workdir, COMPLETED_SCRIPT, "good.json")
    args, fragments = BAD_USAGE[case]
    defaults = {"--model": f"scripted:{good}", "--tools": "mytools:TOOLS"}
    for flag, value in defaults.items():
        if flag not in args:
            args = [*args, flag, value]

    proc = pi("run", PROMPT, *args, "--json", cwd=workdir)

    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    message = flat(proc.stderr)
    for fragment in fragments:
        assert fragment in message, message
    assert "Traceback" not in proc.stderr
    assert not (workdir / "traces").exists()  # misuse is caught before any run starts


@pytest.mark.parametrize(
    "case",
    ["invalid tool choice", "module not importable", "missing script file", "max steps zero"],
)
def test_bad_usage_on_a_new_session_stores_nothing(workdir: Path, case: str) -> None:
    """A new session keeps the agent it starts with: misuse must not store it, or the
    fixed command is refused ("a session keeps its agent")."""
    from pi_runtime.durable import open_store

    good = write_script(workdir, COMPLETED_SCRIPT, "good.json")
    args, _ = BAD_USAGE[case]
    defaults = {"--model": f"scripted:{good}", "--tools": "mytools:TOOLS"}
    db = f"sqlite:///{workdir / 'sessions.db'}"
    fixed = [a for flag, value in defaults.items() for a in (flag, value)]
    bad = [*args, *(a for flag, value in defaults.items() if flag not in args
                     for a in (flag, value))]  # fmt: skip

    proc = pi("run", PROMPT, *bad, "--session", "s1", "--db", db, "--json", cwd=workdir)

    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    store = open_store(db)
    try:
        assert store.get_session("s1") is None
    finally:
        store.close()
    proc = pi("run", PROMPT, *fixed, "--session", "s1", "--db", db, "--json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "completed"


# --- human output ------------------------------------------------------------------------


def test_without_json_progress_goes_to_stderr_and_the_answer_to_stdout(workdir: Path) -> None:
    proc = run_steps(workdir, COMPLETED_SCRIPT)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done: hi\n"
    err = flat(proc.stderr)
    assert "echo" in err
    assert "completed" in err
    assert "final_answer" in err
    match = re.search(r"trace: (\S+\.jsonl)", err)
    assert match, err
    trace = Path(match.group(1))
    assert trace.is_file()
    assert trace.parent == workdir / "traces"


def test_without_json_a_stopped_run_prints_no_answer_and_exits_1(workdir: Path) -> None:
    proc = run_steps(workdir, GUARD_CASES["max_steps"][0], "--max-steps", "2")

    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    err = flat(proc.stderr)
    assert "max_steps" in err
    assert "trace:" in err


# --- pi trace show -----------------------------------------------------------------------


def test_trace_show_names_the_tools_and_the_stop_reason(workdir: Path) -> None:
    steps, extra = GUARD_CASES["consecutive_errors"]
    _, data = run_script(workdir, steps, *extra)

    proc = pi("trace", "show", data["trace"], cwd=workdir, process=True)

    assert proc.returncode == 0, proc.stderr
    out = flat(proc.stdout)
    assert "broken" in out
    assert "echo" in out  # offered tools are listed at run start
    assert "consecutive_errors" in out


def test_trace_show_of_a_completed_run(workdir: Path) -> None:
    _, data = run_script(workdir, COMPLETED_SCRIPT)

    proc = pi("trace", "show", data["trace"], cwd=workdir)

    assert proc.returncode == 0, proc.stderr
    out = flat(proc.stdout)
    assert "echo" in out
    assert "final_answer" in out


def test_trace_show_of_a_missing_file_exits_2(workdir: Path) -> None:
    proc = pi("trace", "show", str(workdir / "nope.jsonl"), cwd=workdir)

    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "nope.jsonl" in flat(proc.stderr)


def test_trace_show_of_a_file_that_is_not_jsonl_exits_2(workdir: Path) -> None:
    bad = workdir / "bad.jsonl"
    bad.write_text('{"kind": "run_started"\nnot json\n', encoding="utf-8")

    proc = pi("trace", "show", str(bad), cwd=workdir)

    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "bad.jsonl" in flat(proc.stderr)


# --- the bundled demo --------------------------------------------------------------------


def test_make_demo_command_completes(tmp_path: Path) -> None:
    proc = pi(
        "run",
        "北京 12 月 5 日天气怎么样？如果下雨，提醒我带伞。",
        "--model",
        "scripted:examples/weather/script.json",
        "--tools",
        "examples.weather.tools:TOOLS",
        "--json",
        cwd=REPO,
        traces=tmp_path,
        process=True,  # what `make demo` runs
    )

    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert_contract(data)
    assert data["status"] == "completed"
    assert data["stop_reason"] == "final_answer"
    assert "带伞" in data["output"]
    results = [m for m in data["messages"] if m["role"] == "tool"]
    assert [r["name"] for r in results] == ["get_weather", "create_reminder"]
    assert not any(r["is_error"] for r in results)
    assert Path(data["trace"]).parent == tmp_path
