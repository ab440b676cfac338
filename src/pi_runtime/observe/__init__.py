"""Observe: run events, JSONL traces and per-run metrics."""

from .events import (
    Event,
    GuardTriggered,
    JobStarted,
    LoopPhase,
    MessageAppended,
    ModelDelta,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RunFinished,
    RunStarted,
    SecurityAudit,
    ToolFinished,
    ToolRetried,
    Transition,
    event_to_dict,
)
from .metrics import compute_metrics
from .projection import UserUpdate, first_sentence, project_for_user
from .trace import TRACE_DIR_ENV, Recorder, TraceWriter, default_trace_dir, read_trace

__all__ = [
    "TRACE_DIR_ENV",
    "Event",
    "GuardTriggered",
    "JobStarted",
    "LoopPhase",
    "MessageAppended",
    "ModelDelta",
    "ModelFailed",
    "ModelRequested",
    "ModelResponded",
    "Recorder",
    "RunFinished",
    "RunStarted",
    "SecurityAudit",
    "ToolFinished",
    "ToolRetried",
    "TraceWriter",
    "Transition",
    "UserUpdate",
    "compute_metrics",
    "default_trace_dir",
    "event_to_dict",
    "first_sentence",
    "project_for_user",
    "read_trace",
]
