"""Tools of the sub-agents demo: a tide table and a marine forecast, both offline.

Each belongs to one sub-agent: the tide reader may only read tides, the forecaster only
forecasts. The coordinator has neither; it asks them, in plain language, through
`{"task": "…"}`.
"""

from __future__ import annotations

from pi_runtime import ToolError, tool

_TIDES = {
    "brest": {"high": ["06:10", "18:32"], "low": ["00:02", "12:21"], "coefficient": 92},
    "camaret": {"high": ["06:02", "18:25"], "low": ["23:55", "12:14"], "coefficient": 92},
}
_FORECAST = {
    "iroise": {"wind": "W 3-4 Bft", "sea": "slight", "visibility": "good", "gusts_kn": 18},
}


@tool
def tide_table(port: str) -> dict[str, object]:
    """High and low water at a port tomorrow (local time) and the tide coefficient.

    Args:
        port: the port's name, e.g. Brest.
    """
    found = _TIDES.get(port.strip().lower())
    if found is None:
        raise ToolError(
            f"no tide table for {port!r}",
            kind="not_found",
            hint=f"Ports with tables: {', '.join(p.title() for p in _TIDES)}.",
        )
    return {"port": port.strip().title(), **found}


@tool
def marine_forecast(area: str) -> dict[str, object]:
    """Tomorrow morning's marine forecast for a sea area.

    Args:
        area: the sea area, e.g. Iroise.
    """
    found = _FORECAST.get(area.strip().lower())
    if found is None:
        raise ToolError(f"no forecast for {area!r}", kind="not_found", hint="Try Iroise.")
    return {"area": area.strip().title(), **found}


TIDE_TOOLS = [tide_table]
FORECAST_TOOLS = [marine_forecast]
