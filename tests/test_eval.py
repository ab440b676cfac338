"""`pi eval`: suites of cases, each on a fresh agent, scored, reported; exit 0/1/2."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import pi_inprocess
from pi_runtime.evals import arguments_match

TOOLS = '''
from pi_runtime import tool

@tool
def lookup(city: str, day: int = 1) -> dict:
    """Weather of a city."""
    return {"city": city, "sky": "rain" if city == "Chengdu" else "sun"}

@tool
def remind(text: str) -> str:
    """Create a reminder."""
    return "ok"

@tool
def delete_all() -> str:
    """Delete everything."""
    return "gone"

TOOLS = [lookup, remind, delete_all]
'''

AGENT = """
model = "scripted:rainy.json"
tools = ["evaltools:TOOLS"]
"""


def step_call(name: str, arguments: dict[str, Any], **usage: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}], "usage": usage}


def step_text(text: str, **usage: Any) -> dict[str, Any]:
    return {"text": text, "usage": usage}


RAINY = [
    step_call("lookup", {"city": "Chengdu", "day": 2.0}, input_tokens=100, output_tokens=10),
    step_call("remind", {"text": "umbrella"}, input_tokens=120, output_tokens=12),
    step_text("Rain in Chengdu; reminder set.", input_tokens=140, output_tokens=14),
]
SUNNY = [
    step_call("lookup", {"city": "Hangzhou"}, input_tokens=100, output_tokens=10),
    step_text("Sun in Hangzhou, no umbrella needed.", input_tokens=120, output_tokens=12),
]
# a model that reminds on a sunny day and calls the forbidden tool
CARELESS = [
    step_call("lookup", {"city": "Hangzhou", "day": 3}),
    step_call("remind", {"text": "umbrella"}),
    step_call("delete_all", {}),
    step_text("Done."),
]

RAIN_CASE = """
[[case]]
name = "rain-chengdu"
prompt = "Will it rain in Chengdu on day 2? Remind me if so."
expect_tools = [{ name = "lookup", arguments = { city = "Chengdu", day = 2 } }, { name = "remind" }]
forbid_tools = ["delete_all"]
expect_output = "[Rr]ain"
expect_stop = "final_answer"
"""
SUN_CASE = """
[[case]]
name = "sun-hangzhou"
prompt = "Will it rain in Hangzhou? Remind me if so."
expect_tools = [{ name = "lookup", arguments = { city = "Hangzhou" } }]
forbid_tools = ["remind", "delete_all"]
expect_output = "[Ss]un"
script = "sunny.json"
"""


def write(folder: Path, name: str, content: Any) -> Path:
    path = folder / name
    text = content if isinstance(content, str) else json.dumps({"steps": content})
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    write(tmp_path, "evaltools.py", TOOLS)
    write(tmp_path, "agent.toml", AGENT)
    write(tmp_path, "rainy.json", RAINY)
    write(tmp_path, "sunny.json", SUNNY)
    write(tmp_path, "careless.json", CARELESS)
    # the agent's own script serves two cases: each starts it over
    again = RAIN_CASE.replace('"rain-chengdu"', '"rain-chengdu-again"')
    write(tmp_path, "suite.toml", 'agent = "agent.toml"\n' + RAIN_CASE + again + SUN_CASE)
    return tmp_path


def pi_eval(folder: Path, *args: str) -> Any:
    return pi_inprocess("eval", *args, cwd=folder, env={"PI_TRACE_DIR": str(folder / "traces")})


def eval_json(folder: Path, *args: str) -> tuple[int, dict[str, Any]]:
    ran = pi_eval(folder, *args, "--json")
    assert ran.returncode in (0, 1), ran.stderr
    return ran.returncode, json.loads(ran.stdout)


# --- passing and failing --------------------------------------------------------------


def test_a_passing_suite_exits_0_with_every_case_in_the_table(suite_dir: Path) -> None:
    ran = pi_eval(suite_dir, "suite.toml")

    assert ran.returncode == 0, ran.stdout + ran.stderr
    for name in ("rain-chengdu", "rain-chengdu-again", "sun-hangzhou"):
        assert name in ran.stdout
    assert "3/3 passed" in ran.stdout
    assert "FAIL" not in ran.stdout


def test_a_case_that_must_fail_is_reported_with_its_failures_and_exits_1(
    suite_dir: Path,
) -> None:
    # the sunny case on a model that reminds anyway and deletes everything
    write(suite_dir, "suite.toml", 'agent = "agent.toml"\n' + SUN_CASE.replace("sunny", "careless"))

    ran = pi_eval(suite_dir, "suite.toml")
    code, data = eval_json(suite_dir, "suite.toml")

    assert ran.returncode == 1
    assert "FAIL" in ran.stdout
    assert "forbidden tool remind was called 1 time(s)" in ran.stdout
    assert code == 1
    (row,) = data["rows"]
    assert row["passed"] is False
    assert "forbidden tool remind was called 1 time(s)" in row["failures"]
    assert "forbidden tool delete_all was called 1 time(s)" in row["failures"]
    assert any(f.startswith("expect_output /[Ss]un/ not found") for f in row["failures"])
    assert data["summary"]["scripted:rainy.json"]["passed"] == 0


def test_expected_calls_must_succeed_and_come_in_order(suite_dir: Path) -> None:
    case = """
[[case]]
name = "order"
prompt = "p"
expect_tools = [{ name = "remind" }, { name = "lookup", arguments = { city = "Chengdu" } }]
expect_stop = "max_steps"
"""
    write(suite_dir, "suite.toml", 'agent = "agent.toml"\n' + case)

    code, data = eval_json(suite_dir, "suite.toml")

    assert code == 1
    failures = data["rows"][0]["failures"]
    assert failures[0] == (
        'expect_tools[1]: no lookup {"city":"Chengdu"} call after the calls expected before it'
    )
    assert failures[1] == "expect_stop max_steps: stopped final_answer"


def test_a_call_the_gate_refused_does_not_count_as_made(suite_dir: Path) -> None:
    write(suite_dir, "bad_args.json", [step_call("lookup", {"town": "Chengdu"}), step_text("?")])
    case = '[[case]]\nname = "x"\nprompt = "p"\nexpect_tools = [{ name = "lookup" }]\n'
    case += 'script = "bad_args.json"\n'
    write(suite_dir, "suite.toml", 'agent = "agent.toml"\n' + case)

    code, data = eval_json(suite_dir, "suite.toml")

    assert code == 1
    assert data["rows"][0]["failures"] == ["expect_tools[0]: lookup was never called successfully"]


def test_arguments_are_a_subset_match_with_canonical_numbers() -> None:
    actual = {"city": "成都", "day": 2.0, "opts": {"unit": "c", "extra": 1}, "tags": [1, 2]}

    assert arguments_match({"city": "成都"}, actual)
    assert arguments_match({"day": 2, "opts": {"unit": "c"}}, actual)
    assert arguments_match({"tags": [1.0, 2]}, actual)
    assert not arguments_match({"tags": [1]}, actual)
    assert not arguments_match({"city": "北京"}, actual)
    assert not arguments_match({"missing": None}, actual)
    assert not arguments_match({"flag": True}, {"flag": 1})
    assert not arguments_match({"opts": {"unit": "f"}}, actual)


# --- bad suites: exit 2, file, case and key named ----------------------------------------


@pytest.mark.parametrize(
    ("suite", "message"),
    [
        (
            '[[case]]\nname = "x"\nprompt = "p"\nexpect_tools = [{ name = 3 }]\n',
            'suite.toml: case "x": expect_tools[0].name: must be a string',
        ),
        (
            '[[case]]\nname = "x"\nprompt = "p"\nexpect_output = "(unclosed"\n',
            'suite.toml: case "x": expect_output: not a valid regex',
        ),
        (
            '[[case]]\nname = "x"\nprompt = "p"\nexpect_tool = []\n',
            'suite.toml: case "x": expect_tool: unknown key',
        ),
        (
            '[[case]]\nname = "x"\nprompt = "p"\nexpect_tools = [{ name = "a", args = {} }]\n',
            'suite.toml: case "x": expect_tools[0].args: unknown key',
        ),
        (
            '[[case]]\nname = "x"\nprompt = "p"\nexpect_stop = "done"\n',
            'suite.toml: case "x": expect_stop: must be a stop reason',
        ),
        (
            '[[case]]\nname = "x"\nprompt = "p"\nscript = "nowhere.json"\n',
            'suite.toml: case "x": script: no script file at',
        ),
        ('[[case]]\nname = "x"\n', 'suite.toml: case "x": prompt: must be a non-empty string'),
        (
            '[[case]]\nname = "x"\nprompt = "p"\n[[case]]\nname = "x"\nprompt = "q"\n',
            'suite.toml: case "x": name: used by two cases',
        ),
        ('[[case]]\nprompt = "p"\n', "suite.toml: case #1: name: must be a non-empty string"),
        ('cases = []\n[[case]]\nname = "x"\nprompt = "p"\n', "suite.toml: cases: unknown key"),
        ("", "suite.toml: case: the suite needs at least one [[case]] table"),
        ('[[case]]\nname = "x\\u001b[2J"\nprompt = 1\n', 'case "x\\u001b[2J": prompt'),
        # hostile: past what `re` and tomllib can take (they raised, not refused)
        (
            "[[case]]\nname = 'x'\nprompt = 'p'\nexpect_output = 'a{99999999999}'\n",
            'suite.toml: case "x": expect_output: not a valid regex: the repetition number',
        ),
        (
            f"[[case]]\nname = 'x'\nprompt = 'p'\nexpect_output = '{'(' * 1500}a{')' * 1500}'\n",
            'suite.toml: case "x": expect_output: not a valid regex: nested too deeply',
        ),
        ("x = " + "[" * 2000 + "]" * 2000 + "\n", "suite.toml: not valid TOML: nested too deeply"),
    ],
)
def test_a_bad_suite_exits_2_naming_file_case_and_key(
    suite_dir: Path, suite: str, message: str
) -> None:
    write(suite_dir, "suite.toml", 'agent = "agent.toml"\n' + suite)

    ran = pi_eval(suite_dir, "suite.toml")

    assert ran.returncode == 2
    assert message in ran.stderr
    assert "\x1b" not in ran.stderr and "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("head", "message"),
    [
        ('agent = "missing.toml"\n', "suite.toml: agent: no agent file at"),
        ("", "suite.toml: agent: must name an agent file"),
        ('agent = "agent.toml"\nagent_x = 1\n', "suite.toml: agent_x: unknown key"),
    ],
)
def test_a_suite_without_a_usable_agent_exits_2(suite_dir: Path, head: str, message: str) -> None:
    write(suite_dir, "suite.toml", head + '[[case]]\nname = "x"\nprompt = "p"\n')

    ran = pi_eval(suite_dir, "suite.toml")

    assert ran.returncode == 2
    assert message in ran.stderr


def test_a_missing_suite_or_a_broken_agent_file_exits_2(suite_dir: Path) -> None:
    assert "nope.toml: cannot read it" in pi_eval(suite_dir, "nope.toml").stderr
    write(suite_dir, "agent.toml", AGENT + "max_stepz = 3\n")
    write(suite_dir, "suite.toml", 'agent = "agent.toml"\n' + RAIN_CASE)

    ran = pi_eval(suite_dir, "suite.toml")

    assert ran.returncode == 2
    assert "suite.toml: agent:" in ran.stderr
    assert "max_stepz" in ran.stderr


def test_a_suite_saved_with_a_byte_order_mark_runs(suite_dir: Path) -> None:
    write(suite_dir, "suite.toml", '\ufeffagent = "agent.toml"\n' + RAIN_CASE)

    code, report = eval_json(suite_dir, "suite.toml")

    assert code == 0 and [r["case"] for r in report["rows"]] == ["rain-chengdu"]


def test_a_model_that_cannot_be_made_exits_2_before_any_run(suite_dir: Path) -> None:
    ran = pi_eval(suite_dir, "suite.toml", "--model", "scripted:absent.json")

    assert ran.returncode == 2
    assert "absent.json" in ran.stderr
    assert not (suite_dir / "traces").exists()


def test_hostile_case_names_and_prompts_cannot_break_the_table(suite_dir: Path) -> None:
    hostile = "x\\u001b[31m[bold]:x:\\nsecond line[/]"
    case = f'[[case]]\nname = "{hostile}"\nprompt = "\\u001b]0;title\\u0007 {hostile}"\n'
    write(suite_dir, "suite.toml", 'agent = "agent.toml"\n' + case + 'expect_output = "nope"\n')

    ran = pi_eval(suite_dir, "suite.toml")

    assert ran.returncode == 1
    assert "\x1b" not in ran.stdout + ran.stderr
    assert "x\\x1b[31m[bold]:x:\\nsecond line[/]" in ran.stdout


# --- output: JSON, files, side by side, repeat ------------------------------------------

ROW_KEYS = {
    "case",
    "model",
    "passed",
    "failures",
    "status",
    "stop_reason",
    "steps",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "wall_ms",
    "first_token_ms",
    "text_tokens_before_first_tool_call",
    "time_to_first_tool_call_ms",
    "mixed_text_tool_message_rate",
    "tool_argument_truncation_count",
}


def test_json_prints_suite_rows_and_summary(suite_dir: Path) -> None:
    code, data = eval_json(suite_dir, "suite.toml")

    assert code == 0
    assert data["suite"] == "suite"
    assert [r["case"] for r in data["rows"]] == [
        "rain-chengdu",
        "rain-chengdu-again",
        "sun-hangzhou",
    ]
    for row in data["rows"]:
        assert row.keys() >= ROW_KEYS
        assert row["passed"] is True and row["failures"] == []
        assert row["cost_usd"] is None  # a scripted model's price is unknown
        assert row["first_token_ms"] is not None
    assert data["rows"][0]["input_tokens"] == 360
    assert data["rows"][0]["tool_calls"] == ["lookup", "remind"]
    summary = data["summary"]["scripted:rainy.json"]
    assert summary["passed"] == summary["total"] == 3
    assert summary["success_rate"] == 1.0
    assert summary["cost_usd"] is None
    assert summary["mean_steps"] == pytest.approx((3 + 3 + 2) / 3, abs=1e-3)


def test_out_writes_json_csv_and_png_that_parse(suite_dir: Path) -> None:
    ran = pi_eval(suite_dir, "suite.toml", "--out", "results")

    assert ran.returncode == 0
    out = suite_dir / "results"
    data = json.loads((out / "eval-suite.json").read_text(encoding="utf-8"))
    assert len(data["rows"]) == 3
    with (out / "eval-suite.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["case"] for r in rows] == ["rain-chengdu", "rain-chengdu-again", "sun-hangzhou"]
    assert rows[0]["tool_calls"] == "lookup | remind"
    pytest.importorskip("matplotlib")
    assert (out / "eval-suite.png").read_bytes().startswith(b"\x89PNG")
    assert list((out / "traces").glob("*.jsonl"))


def test_two_models_give_one_table_side_by_side(suite_dir: Path) -> None:
    models = ("--model", "scripted:rainy.json", "--model", "scripted:careless.json")

    ran = pi_eval(suite_dir, "suite.toml", *models)
    code, data = eval_json(suite_dir, "suite.toml", *models)

    assert ran.returncode == code == 1
    assert "side by side" in ran.stdout
    assert "success rate" in ran.stdout
    assert "scripted:careless.json" in ran.stdout
    assert list(data["summary"]) == ["scripted:rainy.json", "scripted:careless.json"]
    # the agent's own model gets each case's script; another model runs every case as is
    assert data["summary"]["scripted:rainy.json"]["passed"] == 3
    assert data["summary"]["scripted:careless.json"]["passed"] == 0


def test_repeat_runs_each_case_n_times_and_the_rate_counts_every_run(suite_dir: Path) -> None:
    write(suite_dir, "suite.toml", 'agent = "agent.toml"\n' + RAIN_CASE + SUN_CASE)

    code, data = eval_json(suite_dir, "suite.toml", "--repeat", "3")

    assert code == 0
    assert [(r["case"], r["attempt"]) for r in data["rows"]] == [
        (case, n) for case in ("rain-chengdu", "sun-hangzhou") for n in (1, 2, 3)
    ]
    assert data["summary"]["scripted:rainy.json"]["total"] == 6


def test_a_model_given_twice_is_bad_usage(suite_dir: Path) -> None:
    ran = pi_eval(suite_dir, "suite.toml", "--model", "local", "--model", "local")

    assert ran.returncode == 2
    assert "--model local is given twice" in ran.stderr


# --- the shipped suites pass on their scripted models -----------------------------------

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("example", ["weather", "contracts", "market"])
def test_the_shipped_suites_pass_on_their_scripted_models(example: str, tmp_path: Path) -> None:
    code, data = eval_json(tmp_path, str(EXAMPLES / example / "suite.toml"))

    assert code == 0, [r["failures"] for r in data["rows"] if not r["passed"]]
    assert len(data["rows"]) >= 4
