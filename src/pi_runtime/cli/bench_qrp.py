"""`pi bench qrp`: compact JSON against QRP1 — a markdown table, CSV/JSON and a PNG chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

_HEADINGS = ("case", "rows", "JSON bytes", "QRP1 bytes", "bytes saved", "JSON tokens",
             "QRP1 tokens", "tokens saved", "seed: bytes / tokens saved")  # fmt: skip


def _seed_saved(row: dict[str, Any]) -> str:
    if "seed_qrp_bytes" not in row:
        return "—"
    by = 100 * (1 - row["seed_qrp_bytes"] / row["seed_json_bytes"])
    tok = 100 * (1 - row["seed_qrp_tokens"] / row["seed_json_tokens"])
    return f"{by:.1f} % / {tok:.1f} %"


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table, with the seed's figures where it gave them."""
    lines = ["| " + " | ".join(_HEADINGS) + " |", "|" + "---|" * len(_HEADINGS)]
    for row in result["rows"]:
        cells = [row["case"], f"{row['rows']:,}", f"{row['json_bytes']:,}",
                 f"{row['qrp_bytes']:,}", f"{row['bytes_saved_pct']} %",
                 f"{row['json_tokens']:,}", f"{row['qrp_tokens']:,}",
                 f"{row['tokens_saved_pct']} %", _seed_saved(row)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    for row in result["rows"]:
        if row["case"] == "products":
            notes.append(
                f"products, seed's path expansion rebuilt: {row['paths_bytes']:,} B / "
                f"{row['paths_tokens']:,} tok (seed: JSON {row['seed_json_bytes']:,} B / "
                f"{row['seed_json_tokens']:,} tok, paths {row['seed_paths_bytes']:,} B / "
                f"{row['seed_paths_tokens']:,} tok)"
            )
        if row["case"] == "relay-locator":
            notes.append(
                f"relay-locator: the locator arguments are {row['qrp_tokens']} tokens "
                f"(seed: {row['seed_qrp_tokens']})"
            )
    notes.append(
        f"tokens: exact {result['tokenizer']} counts; pages of at most {result['page_rows']} "
        f"rows; a next page costs a {result['cursor_bytes']}-byte cursor on both sides"
    )
    return "\n".join([*lines, "", *(f"- {n}" for n in notes)])


def plot_retained(result: dict[str, Any], out: Path) -> Path | None:
    """Bars of QRP1 size as % of JSON (bytes and tokens); None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    bars: list[tuple[str, float, float]] = []
    for r in result["rows"]:
        label = f"{r['case']}\n{r['rows']:,}"
        bars.append((label, r["qrp_bytes"] / r["json_bytes"], r["qrp_tokens"] / r["json_tokens"]))
        if "paths_bytes" in r:  # the seed's generic path expansion, for contrast
            bars.append(("products\npath expansion", r["paths_bytes"] / r["json_bytes"],
                         r["paths_tokens"] / r["json_tokens"]))  # fmt: skip
    fig, ax = plt.subplots(figsize=(11, 4.5))
    xs = range(len(bars))
    for shift, index, name in ((-0.2, 1, "bytes"), (0.2, 2, "tokens (o200k_base)")):
        heights = [100 * float(b[index]) for b in bars]
        drawn = ax.bar([x + shift for x in xs], heights, width=0.4, label=name)
        ax.bar_label(drawn, fmt="%.0f", fontsize=7)
    labels = [b[0] for b in bars]
    ax.axhline(100, color="grey", linewidth=1, linestyle="--")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("QRP1 (or relay mode) as % of compact JSON")
    ax.legend()
    ax.set_title(f"pi bench {result['bench']}: what is left of the JSON size")
    path = out / f"{result['bench']}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def bench_qrp(
    out: Annotated[Path, typer.Option("--out", help="Directory for CSV/JSON/PNG.")] = Path(
        "bench-results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")] = False,
) -> None:
    """Compact JSON vs QRP1 on the seed's payloads: K-lines, products, relays."""
    from ..bench.qrp import measure
    from ..bench.report import write_files

    result = measure()
    files = write_files(result, out)
    png = plot_retained(result, out)
    result["files"] = [str(p) for p in [*files, *([png] if png else [])]]
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    typer.echo(markdown(result))
    typer.echo("\nfiles: " + ", ".join(result["files"]))
