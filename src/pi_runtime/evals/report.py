"""An eval's report: a table on screen (one model: a row per run; several: side by side),
and `eval-<suite>.json`, `.csv` and `.png` in the output folder.

Case names, model labels and failures come from files and models: every cell is shown
literally, control characters escaped, so none can break the table or drive a terminal.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..cli._console import literal, plain, say

_MAX_STEM_CHARS = 100
"""Characters of a suite's name a report file name keeps (a file name may have 255 bytes)."""
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def print_report(result: dict[str, Any], screen: Console) -> None:
    """The table of `result` (see `pi eval`), the failures under it, one line each."""
    rows, summary = result["rows"], result["summary"]
    if len(summary) > 1:
        screen.print(_comparison(result["suite"], rows, summary))
    else:
        screen.print(_runs(result["suite"], rows, repeat=result["repeat"]))
    for row in rows:
        for failure in row["failures"]:
            attempt = f" #{row['attempt']}" if result["repeat"] > 1 else ""
            say(screen, ("FAIL", "red"), f" {row['case']}{attempt} [{row['model']}]: ", failure)
    for model, totals in summary.items():
        say(
            screen,
            f"{model}: {totals['passed']}/{totals['total']} passed "
            f"({totals['success_rate']:.0%}) · cost {_cost(totals['cost_usd'])} · "
            f"mean {_num(totals['mean_wall_ms'])} ms",
        )


def _runs(suite: str, rows: list[dict[str, Any]], *, repeat: int) -> Table:
    table = Table(title=literal(f"pi eval {suite}"))
    columns = (
        ("case", "left"),
        ("#", "right"),
        ("result", "left"),
        ("stop", "left"),
        ("steps", "right"),
        ("tokens in/out", "right"),
        ("cost $", "right"),
        ("wall ms", "right"),
        ("first token ms", "right"),
    )
    for name, justify in columns:
        if name != "#" or repeat > 1:
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        attempt = [str(row["attempt"])] if repeat > 1 else []
        table.add_row(
            literal(row["case"]),
            *attempt,
            _verdict(row["passed"]),
            literal(row["stop_reason"]),
            str(row["steps"]),
            f"{row['input_tokens']}/{row['output_tokens']}",
            _cost(row["cost_usd"]),
            _num(row["wall_ms"]),
            _num(row["first_token_ms"]),
        )
    return table


def _comparison(suite: str, rows: list[dict[str, Any]], summary: dict[str, Any]) -> Table:
    """Cases down, models across: each cell the case's passes over its attempts."""
    models = list(summary)
    table = Table(title=literal(f"pi eval {suite}: side by side"))
    table.add_column("case")
    for model in models:
        table.add_column(literal(model), justify="right")
    for case in dict.fromkeys(r["case"] for r in rows):
        cells: list[Text | str] = [literal(case)]
        for model in models:
            mine = [r for r in rows if r["case"] == case and r["model"] == model]
            passed = sum(r["passed"] for r in mine)
            if len(mine) == 1:
                cells.append(_verdict(bool(passed)))
            else:
                style = "green" if passed == len(mine) else "red"
                cells.append(Text(f"{passed}/{len(mine)}", style=style))
        table.add_row(*cells)
    table.add_section()
    for title, key, shown in (
        ("success rate", "success_rate", lambda v: f"{v:.0%}"),
        ("mean steps", "mean_steps", _num),
        ("mean wall ms", "mean_wall_ms", _num),
        ("cost $", "cost_usd", _cost),
    ):
        table.add_row(title, *(shown(summary[m][key]) for m in models))
    return table


def _verdict(passed: bool) -> Text:
    return Text("pass", style="green") if passed else Text("FAIL", style="bold red")


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _cost(value: float | None) -> str:
    """A cost, or `—` when unknown (never shown as 0)."""
    return "—" if value is None else f"{value:.6f}"


def write_report(result: dict[str, Any], out: Path) -> list[Path]:
    """`eval-<suite>.json` (everything), `.csv` (a row per run) and, with matplotlib,
    `.png` (success rate per model) in `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    stem = report_stem(result["suite"])
    json_path = out / f"{stem}.json"
    json_path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", "utf-8")
    csv_path = out / f"{stem}.csv"
    rows = result["rows"]
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["case"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(v) for k, v in row.items()})
    written = [json_path, csv_path]
    png = _plot(result, out / f"{stem}.png")
    return [*written, png] if png else written


def report_stem(suite: str) -> str:
    """`eval-<suite>`, the report files' name without extension: letters, digits, `_ . -`
    only, a long name cut with a hash of it added, so that any file system takes it and
    two suites alike but for their ends keep apart."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", suite).strip(".") or "suite"
    if len(name) > _MAX_STEM_CHARS:
        digest = hashlib.sha256(suite.encode("utf-8", "surrogatepass")).hexdigest()
        name = f"{name[:_MAX_STEM_CHARS]}-{digest[:12]}"
    return "eval-" + name


def _cell(value: Any) -> Any:
    """A CSV cell: a list joined with ` | `; text a spreadsheet would run as a formula
    (it starts with = + - @, a tab or a carriage return) behind a `'`, the OWASP rule.
    Case names come from suites and tool names from models. Numbers stay numbers."""
    if isinstance(value, list):
        value = " | ".join(value)
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _plot(result: dict[str, Any], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    summary = result["summary"]
    fig, ax = plt.subplots(figsize=(7, 4))
    # labels are outside text: `$` would start matplotlib's math mode
    labels = [plain(m).replace("$", r"\$") for m in summary]
    ax.bar(labels, [100 * s["success_rate"] for s in summary.values()])
    ax.set_ylabel("cases passed (%)")
    ax.set_ylim(0, 100)
    ax.tick_params(axis="x", labelrotation=20)
    ax.set_title("pi eval " + plain(result["suite"]).replace("$", r"\$"))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
