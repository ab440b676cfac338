"""The loop: the state machine, its guards, the driver and `Agent`."""

from ..messages.canonical import action_hash, canonical_json
from ._sync import run_blocking
from .agent import Agent
from .escalation import EscalateHook, Escalation, EscalationContext
from .guards import Limits, detect_loop, detect_no_progress
from .run_result import RunResult
from .run_stream import RunStream
from .state import RunState

__all__ = [
    "Agent",
    "EscalateHook",
    "Escalation",
    "EscalationContext",
    "Limits",
    "RunResult",
    "RunState",
    "RunStream",
    "action_hash",
    "canonical_json",
    "detect_loop",
    "detect_no_progress",
    "run_blocking",
]
