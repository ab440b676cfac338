"""Composed runs: plan-then-execute with reflection and replanning, and routing.

`Agent(mode="plan")` or `mode = "plan"` in an agent file; `mode = "auto"` lets a router
call choose per request. The default, `react`, never enters a composed run (the composer
itself is imported only when one starts).
"""

from .briefs import FALLBACK_GOAL
from .contracts import MAX_PLAN_STEPS, plan_contract, reflection_contract, route_contract
from .roles import MODES, Composition, Mode, check_mode

__all__ = [
    "FALLBACK_GOAL",
    "MAX_PLAN_STEPS",
    "MODES",
    "Composition",
    "Mode",
    "check_mode",
    "plan_contract",
    "reflection_contract",
    "route_contract",
]
