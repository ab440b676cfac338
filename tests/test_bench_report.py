"""Bench tables: in full when piped or logged, fitted to a terminal's width otherwise."""

from __future__ import annotations

import io

from rich.console import Console

from pi_runtime.bench.report import print_table

RESULT = {
    "rows": [
        {"backend": "postgresql", "mode": "clean", "workers": 4, "jobs_per_s": 124.1,
         "ratio_to_bare": 0.0276, "a_rather_long_column_name": "a rather long value"},
    ]
}  # fmt: skip


def test_a_piped_table_keeps_every_name_and_value_whole() -> None:
    out = io.StringIO()
    screen = Console(file=out, width=80, force_terminal=False, highlight=False)

    print_table(RESULT, screen, "jobs")

    text = out.getvalue()
    for name, value in RESULT["rows"][0].items():
        assert name in text and str(value) in text, text
    assert "…" not in text
    assert screen.width == 80  # the console is left as it was
    assert max(len(line) for line in text.splitlines()) > 80


def test_a_terminal_table_fits_the_terminal() -> None:
    out = io.StringIO()
    screen = Console(file=out, width=60, force_terminal=True, highlight=False, color_system=None)

    print_table(RESULT, screen, "jobs")

    assert max(len(line) for line in out.getvalue().splitlines()) <= 60
