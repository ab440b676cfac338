"""Writing benchmark results: a rich table on screen, CSV + JSON + PNG on disk."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

_UNBOUNDED = 10_000  # columns a table may take when it does not print to a terminal


def print_table(result: dict[str, Any], console: Console, title: str) -> None:
    rows = result["rows"]
    if not rows:
        console.print("no rows")
        return
    table = Table(title=title)
    columns = list(rows[0].keys())
    for column in columns:
        table.add_column(
            column, justify="right" if isinstance(rows[0][column], int | float) else "left"
        )
    for row in rows:
        table.add_row(*(str(row.get(c, "")) for c in columns))
    if console.is_terminal:
        console.print(table)
        return
    # piped or logged: at its full width, not cut to 80 columns ("pos…", "0.…")
    wide = console.options.update_width(_UNBOUNDED)
    width, console.width = console.width, console.measure(table, options=wide).maximum
    try:
        console.print(table)
    finally:
        console.width = width


def write_files(result: dict[str, Any], out: Path) -> list[Path]:
    """`<bench>.json` and `<bench>.csv` in `out`; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    name = result["bench"]
    json_path = out / f"{name}.json"
    json_path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    csv_path = out / f"{name}.csv"
    rows = result["rows"]
    columns = sorted(
        {k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99
    )
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return [json_path, csv_path]


def plot_lines(
    result: dict[str, Any],
    out: Path,
    *,
    x: str,
    y: str | list[str],
    series: str | None,
    ylabel: str,
    log: bool = True,
) -> Path | None:
    """A PNG line chart of `y` over `x`: one line per `series` value, or per `y` column."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    rows = result["rows"]
    if series is not None and isinstance(y, str):
        for name in dict.fromkeys(r[series] for r in rows):
            points = [(r[x], r[y]) for r in rows if r[series] == name]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    else:
        for column in [y] if isinstance(y, str) else y:
            ax.plot([r[x] for r in rows], [r[column] for r in rows], marker=".", label=column)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.legend()
    ax.set_title(f"pi bench {result['bench']}")
    path = out / f"{result['bench']}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_bars(result: dict[str, Any], out: Path, *, x: str, y: str, ylabel: str) -> Path | None:
    """A PNG bar chart of `y` for each row's `x`, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    rows = result["rows"]
    ax.bar([str(r[x]) for r in rows], [r[y] for r in rows])
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=20)
    ax.set_title(f"pi bench {result['bench']}")
    path = out / f"{result['bench']}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
