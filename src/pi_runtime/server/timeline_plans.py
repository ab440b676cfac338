"""Plans and replans in a run's timeline: the `plan_*`, `replanned` and `route_chosen`
events of plan mode, folded into each plan's steps and verdicts (see `timeline`).

Also the readers both use for a trace event's fields: a field of the wrong type (a newer
Pi's trace, a damaged line) reads as absent, so no field can make the timeline fail.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_TEXT = 20_000


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """`text`, cut to `limit` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters in the raw trace]"


def number(value: Any) -> int | float | None:
    """`value` if it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def whole(value: Any) -> int | None:
    """`value` if it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text(value: Any, absent: str = "") -> str:
    """`value` if it is a string, else `absent`."""
    return value if isinstance(value, str) else absent


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is an object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def items(value: Any) -> list[Any]:
    """`value` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class PlanRow:
    """What a plan event shows as a timeline row."""

    kind: str
    name: str
    status: str = ""
    detail: str = ""


class PlanLog:
    """Each plan (revision 0, then each replan's) with its steps, and the replans."""

    def __init__(self) -> None:
        self.plans: list[dict[str, Any]] = []
        self.replans: list[dict[str, Any]] = []
        # revision → step number → step, of the latest plan of that revision
        self._latest: dict[int, dict[int, dict[str, Any]]] = {}

    def feed(self, e: Mapping[str, Any]) -> PlanRow | None:
        """Fold the event in; its row, or None for an event of another kind."""
        kind = e.get("kind")
        if kind == "plan_created":
            return self._created(e)
        if kind == "plan_step_started":
            step = self._step(e)
            if step is not None:
                step["started"] = True
            name = f"step {e.get('number')}/{e.get('total')}"
            return PlanRow("plan_step", name, "started", text(e.get("goal")))
        if kind == "plan_step_finished":
            return self._finished(e)
        if kind == "replanned":
            keys = ("number", "replans", "max_replans")
            reason = clip(text(e.get("reason")))
            self.replans.append({**{k: whole(e.get(k)) for k in keys}, "reason": reason})
            name = f"replan {e.get('replans')} of {e.get('max_replans')}"
            return PlanRow("replan", name, detail=reason)
        if kind == "route_chosen":
            mode = text(e.get("mode"), "None")
            return PlanRow("route", mode, "fallback" if e.get("fallback") else "")
        return None

    def _created(self, e: Mapping[str, Any]) -> PlanRow:
        steps: list[dict[str, Any]] = [
            {
                "number": i,
                "goal": clip(text(s.get("goal")), 2000),
                "tools": items(s.get("tools")),
            }
            for i, s in enumerate(items(e.get("steps")), 1)
            if isinstance(s, Mapping)
        ]
        revision = whole(e.get("revision")) or 0
        fallback = bool(e.get("fallback"))
        self.plans.append({"revision": revision, "fallback": fallback, "steps": steps})
        self._latest[revision] = {step["number"]: step for step in steps}
        name = f"revision {revision}" if revision else "plan"
        return PlanRow("plan", name, "fallback" if fallback else "", f"{len(steps)} step(s)")

    def _finished(self, e: Mapping[str, Any]) -> PlanRow:
        verdict: dict[str, Any] = {k: bool(e.get(k)) for k in ("done", "replan", "fallback")}
        verdict.update(
            outcome=text(e.get("outcome")) or None, model_calls=whole(e.get("model_calls"))
        )
        reason = verdict["reason"] = clip(text(e.get("reason")), 2000)
        step = self._step(e)
        if step is not None:
            step.update(verdict)
        status = "done" if e.get("done") else ("replan" if e.get("replan") else "not done")
        return PlanRow("plan_step", f"step {e.get('number')}", status, reason)

    def _step(self, e: Mapping[str, Any]) -> dict[str, Any] | None:
        """The step the event names, in the latest plan of its revision."""
        wanted = whole(e.get("number"))
        steps = self._latest.get(whole(e.get("revision")) or 0, {})
        return steps.get(wanted) if wanted is not None else None
