"""A small MCP server for the example: unit conversion and a notebook, over stdio.

Pi starts it (`[mcp.desk]` in agent.toml) and keeps one session with it for the agent's
life, so the notes it keeps in memory last across the agent's calls. Run alone, it
speaks MCP on stdin/stdout: `python server.py`.
"""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("desk")
NOTES: list[str] = []
FACTORS = {("km", "mi"): 0.621371, ("mi", "km"): 1.609344, ("kg", "lb"): 2.204623}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def convert(value: float, unit: str, to: str) -> float:
    """Convert a value between units: km and mi, kg to lb."""
    factor = FACTORS.get((unit, to))
    if factor is None:
        raise ValueError(f"cannot convert {unit} to {to}; known: {sorted(FACTORS)}")
    return round(value * factor, 3)


@server.tool()
def add_note(text: str) -> str:
    """Write a note in the notebook; returns how many notes it holds."""
    NOTES.append(text)
    return f"{len(NOTES)} note(s) kept"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_notes() -> list[str]:
    """Every note in the notebook, oldest first."""
    return list(NOTES)


@server.tool()
def clear_notes() -> str:
    """Throw every note away."""
    NOTES.clear()
    return "cleared"


if __name__ == "__main__":
    server.run()  # stdio
