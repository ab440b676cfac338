"""Plans and replans in a run's timeline: the `plan_*`, `replanned` and `route_chosen`
events of plan mode, folded into each plan's steps and verdicts (see `timeline`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_TEXT = 20_000


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """`text`, cut to `limit` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters in the raw trace]"


@dataclass(frozen=True, slots=True)
class PlanRow:
    """What a plan event shows as a timeline row."""

    kind: str
    name: str
    status: str = ""
    detail: str = ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class PlanLog:
    """Each plan (revision 0, then each replan's) with its steps, and the replans."""

    def __init__(self) -> None:
        self.plans: list[dict[str, Any]] = []
        self.replans: list[dict[str, Any]] = []

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
            return PlanRow("plan_step", name, "started", str(e.get("goal", "")))
        if kind == "plan_step_finished":
            return self._finished(e)
        if kind == "replanned":
            keys = ("number", "replans", "max_replans")
            reason = clip(str(e.get("reason", "")))
            self.replans.append({**{k: e.get(k) for k in keys}, "reason": reason})
            name = f"replan {e.get('replans')} of {e.get('max_replans')}"
            return PlanRow("replan", name, detail=reason)
        if kind == "route_chosen":
            return PlanRow("route", str(e.get("mode")), "fallback" if e.get("fallback") else "")
        return None

    def _created(self, e: Mapping[str, Any]) -> PlanRow:
        steps = [
            {
                "number": i,
                "goal": clip(str(s.get("goal", "")), 2000),
                "tools": list(s.get("tools") or []),
            }
            for i, s in enumerate(e.get("steps") or [], 1)
            if isinstance(s, Mapping)
        ]
        revision = _int(e.get("revision"))
        fallback = bool(e.get("fallback"))
        self.plans.append({"revision": revision, "fallback": fallback, "steps": steps})
        name = f"revision {revision}" if revision else "plan"
        return PlanRow("plan", name, "fallback" if fallback else "", f"{len(steps)} step(s)")

    def _finished(self, e: Mapping[str, Any]) -> PlanRow:
        verdict = {k: e.get(k) for k in ("outcome", "done", "replan", "fallback", "model_calls")}
        reason = verdict["reason"] = clip(str(e.get("reason", "")), 2000)
        step = self._step(e)
        if step is not None:
            step.update(verdict)
        status = "done" if e.get("done") else ("replan" if e.get("replan") else "not done")
        return PlanRow("plan_step", f"step {e.get('number')}", status, reason)

    def _step(self, e: Mapping[str, Any]) -> dict[str, Any] | None:
        """The step the event names, in the latest plan of its revision."""
        for plan in reversed(self.plans):
            if plan["revision"] == _int(e.get("revision")):
                for step in plan["steps"]:
                    if step["number"] == e.get("number"):
                        return step  # type: ignore[no-any-return]
                return None
        return None
