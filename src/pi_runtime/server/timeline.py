"""A run's timeline, computed from its trace: what the web viewer shows (seed 001 §5).

    timeline(read_trace(path)) → {"run", "rows", "totals", "finished", "metrics",
                                  "model_calls", "tool_calls", "plans", "replans"}

One row per model call, tool outcome, approval, job, guard, plan event and the run's
end, in trace order. Each row has its step and phase, its own tokens and milliseconds,
and the cumulative totals after it: input and output tokens, and ms since the run began.
`model_calls` holds each request's context report, prompt version and tools offered.
`tool_calls` holds each call's arguments and result, errors first.

It reads the trace's JSON lines as dicts, not typed events: a trace written by a newer
Pi, or a live one cut at a step boundary, still renders. Each field it computes with is
read through one reader of its type (`number`, `whole`, `text`, `mapping`, `items`), and a
field of the wrong type reads as absent; fields only shown (arguments, output) pass as
they are. Every string is data to show, never markup; long ones are clipped (the raw trace
keeps them whole).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .timeline_plans import PlanLog, clip, items, mapping, number, text, whole

PREAMBLE_METRICS = (
    "text_tokens_before_first_tool_call",
    "time_to_first_tool_call_ms",
    "mixed_text_tool_message_rate",
    "tool_argument_truncation_count",
)
_NOTES = {  # kind → phase of events shown as a row with a one-line detail
    "guard": "reflect",
    "security_audit": "act",
    "guardrail_tripped": "reflect",
    "escalated": "done",
    "contract_check": "reflect",
    "tool_retry": "act",
}


def _num(value: Any) -> float:
    """`value` if it is a finite number, else 0."""
    return number(value) or 0


def _int(value: Any) -> int:
    """`value` as a whole number if it is a finite number, else 0."""
    return int(_num(value))


def _count(value: Any) -> int | None:
    """`value` as a whole number if it is a finite number, else None."""
    found = number(value)
    return None if found is None else int(found)


def _optional(value: Any) -> str | None:
    """`value` if it is a string, else None."""
    return value if isinstance(value, str) else None


def _key(value: Any) -> str:
    """A call id or tool name as a key: the string, or "None" when absent."""
    return text(value, "None")


class _Timeline:
    def __init__(self, results: Mapping[str, Mapping[str, Any]]) -> None:
        self.results = results
        self.run: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []
        self.model_calls: list[dict[str, Any]] = []
        self.calls: dict[str, dict[str, Any]] = {}
        self.plan = PlanLog()
        self.finished: dict[str, Any] | None = None
        self.metrics: Mapping[str, Any] = {}
        self.step = 0
        self.cum_in = 0
        self.cum_out = 0
        self.t_ms = 0.0

    def row(self, e: Mapping[str, Any], phase: str, kind: str, name: str, **extra: Any) -> None:
        self.cum_in += _int(extra.get("input_tokens"))
        self.cum_out += _int(extra.get("output_tokens"))
        self.rows.append(
            {
                "step": self.step,
                "phase": phase,
                "kind": kind,
                "name": name,
                "status": extra.get("status", ""),
                "input_tokens": extra.get("input_tokens"),
                "output_tokens": extra.get("output_tokens"),
                "cum_input_tokens": self.cum_in,
                "cum_output_tokens": self.cum_out,
                "ms": extra.get("ms"),
                "cum_ms": _num(e.get("t_ms")),
                "stop": extra.get("stop", ""),
                "call_id": extra.get("call_id"),
                "detail": clip(str(extra.get("detail", "")), 300),
            }
        )

    def call(self, call_id: str, name: str) -> dict[str, Any]:
        if call_id not in self.calls:
            self.calls[call_id] = {
                "call_id": call_id,
                "name": name,
                "step": self.step,
                "arguments": None,
                "raw": "",
                "truncated": False,
                "status": "requested",
                "is_error": False,
                "error_kind": None,
                "result": None,
                "duration_ms": None,
                "attempts": 0,
                "result_bytes": None,
            }
        return self.calls[call_id]

    def feed(self, e: Mapping[str, Any]) -> None:
        kind = text(e.get("kind"))
        self.t_ms = max(self.t_ms, _num(e.get("t_ms")))
        handler = getattr(self, f"on_{kind}", None)
        planned = self.plan.feed(e)
        if handler is not None:
            handler(e)
        elif planned is not None:
            self.row(
                e, "plan", planned.kind, planned.name, status=planned.status, detail=planned.detail
            )
        elif kind in _NOTES and not (kind == "contract_check" and e.get("ok")):
            self.row(e, _NOTES[kind], kind, _note_name(e), detail=_note_detail(e))

    def on_run_started(self, e: Mapping[str, Any]) -> None:
        keys = ("run_id", "model", "parent_run_id", "parent_call_id")
        self.run = {k: _optional(e.get(k)) for k in keys}
        self.run.update(tools=items(e.get("tools")), prompt=e.get("prompt"), limits=e.get("limits"))

    def on_model_request(self, e: Mapping[str, Any]) -> None:
        self.step = _int(e.get("step"))
        summary = _optional(e.get("summary"))
        self.model_calls.append(
            {
                "step": self.step,
                "role": text(mapping(e.get("prompt")).get("name"), "system"),
                "prompt": mapping(e.get("prompt")),
                "tools": items(e.get("tools")),
                "tool_choice": e.get("tool_choice"),
                "message_count": _count(e.get("message_count")),
                "counted_input_tokens": _count(e.get("input_tokens")),
                "context": mapping(e.get("context")),
                "summary": clip(summary) if summary is not None else None,
                "usage": None,
                "finish_reason": None,
                "latency_ms": None,
                "text": "",
                "tool_calls": [],
                "errors": [],
            }
        )

    def _current_call(self) -> dict[str, Any]:
        if not self.model_calls or self.model_calls[-1]["step"] != self.step:
            self.on_model_request({"step": self.step})
        return self.model_calls[-1]

    def on_model_response(self, e: Mapping[str, Any]) -> None:
        step = _count(e.get("step"))
        self.step = self.step if step is None else step
        message = mapping(e.get("message"))
        usage = mapping(message.get("usage"))
        record = self._current_call()
        texts, names = [], []
        for block in map(mapping, items(message.get("content"))):
            if block.get("kind") == "text":
                texts.append(text(block.get("text")))
            elif block.get("kind") == "tool_call":
                call = self.call(_key(block.get("id")), _key(block.get("name")))
                call.update(
                    arguments=block.get("arguments"),
                    raw=clip(text(block.get("raw"))),
                    truncated=bool(block.get("truncated")),
                    step=self.step,
                )
                names.append(call["name"])
        finish_reason = _optional(message.get("finish_reason"))
        record.update(
            usage=usage,
            finish_reason=finish_reason,
            latency_ms=number(e.get("latency_ms")),
            text=clip("\n".join(texts)),
            tool_calls=names,
        )
        self.row(
            e,
            "think",
            "model",
            "model" if record["role"] == "system" else record["role"],
            input_tokens=_int(usage.get("input_tokens")),
            output_tokens=_int(usage.get("output_tokens")),
            ms=number(e.get("latency_ms")),
            stop=finish_reason or "",
            detail=", ".join(names) or " ".join("".join(texts).split())[:120],
        )

    def on_model_error(self, e: Mapping[str, Any]) -> None:
        message = text(e.get("message"))
        self._current_call()["errors"].append(clip(message))
        status = "transient" if e.get("transient") else "error"
        self.row(e, "think", "model_error", "model", status=status, detail=message)

    def on_tool_result(self, e: Mapping[str, Any]) -> None:
        call = self.call(_key(e.get("tool_call_id")), _key(e.get("name")))
        is_error = bool(e.get("is_error"))
        error = _optional(e.get("error_kind")) if is_error else None
        attempts, result_bytes = _count(e.get("attempts")), _count(e.get("result_bytes"))
        call.update(
            status="error" if is_error else "ok",
            is_error=is_error,
            error_kind=error,
            executed=bool(e.get("executed")),
            duration_ms=number(e.get("duration_ms")),
            attempts=attempts,
            result_bytes=result_bytes,
            result_truncated=bool(e.get("result_truncated")),
        )
        detail = f"{result_bytes or 0} B" if not error else "refused by the gate"
        if error and e.get("executed"):
            detail = f"{attempts or 0} attempt(s)"
        self.row(
            e,
            "act",
            "tool",
            call["name"],
            status=error or "ok",
            ms=number(e.get("duration_ms")),
            call_id=call["call_id"],
            detail=detail,
        )

    def on_message(self, e: Mapping[str, Any]) -> None:
        message = mapping(e.get("message"))
        if message.get("role") != "tool":
            return
        call = self.call(_key(message.get("tool_call_id")), _key(message.get("name")))
        call["result"] = clip(str(message.get("content", "")))
        call["is_error"] = call["is_error"] or bool(message.get("is_error"))

    def on_approval_requested(self, e: Mapping[str, Any]) -> None:
        self._decision(e, "awaiting_approval", arguments=e.get("arguments"))

    def on_approval_granted(self, e: Mapping[str, Any]) -> None:
        edited = " with edited arguments" if e.get("edited") else ""
        self._decision(e, "approved", arguments=e.get("arguments"), detail=f"approved{edited}")

    def on_approval_rejected(self, e: Mapping[str, Any]) -> None:
        reason = text(e.get("reason"))
        self._decision(e, "rejected", detail=reason, result=clip(reason), is_error=True)

    def on_job_started(self, e: Mapping[str, Any]) -> None:
        job_id = _optional(e.get("job_id"))
        self._decision(e, "job", job_id=job_id, detail=f"job {job_id}")

    def _decision(self, e: Mapping[str, Any], status: str, detail: str = "", **fields: Any) -> None:
        call = self.call(_key(e.get("tool_call_id")), _key(e.get("name")))
        if fields.get("arguments") is None:
            fields.pop("arguments", None)
        call.update(status=status, fingerprint=_optional(e.get("fingerprint")), **fields)
        self.row(
            e,
            "act",
            "approval" if status != "job" else "job",
            call["name"],
            status=status,
            call_id=call["call_id"],
            detail=detail,
        )

    def on_child_run(self, e: Mapping[str, Any]) -> None:
        usage = mapping(e.get("usage"))
        self.row(
            e,
            "act",
            "child_run",
            _key(e.get("name")),
            status=text(e.get("status")),
            input_tokens=_int(usage.get("input_tokens")),
            output_tokens=_int(usage.get("output_tokens")),
            stop=text(e.get("stop_reason")),
            call_id=_optional(e.get("tool_call_id")),
            detail=text(e.get("run_id")),
        )

    def on_run_finished(self, e: Mapping[str, Any]) -> None:
        usage = mapping(e.get("usage"))
        output = e.get("output")
        status, stop, error = (_optional(e.get(k)) for k in ("status", "stop_reason", "error"))
        self.finished = {
            "status": status,
            "stop_reason": stop,
            "steps": _count(e.get("steps")),
            "usage": usage,
            "wall_ms": number(e.get("wall_ms")),
            "error": error,
            "output": clip(output) if isinstance(output, str) else output,
        }
        self.metrics = mapping(e.get("metrics"))
        self.row(e, "done", "done", str(status), stop=stop or "", detail=error or "")
        last = self.rows[-1]
        # The run's own totals are the truth (a child run's usage is already in them).
        last["cum_input_tokens"] = _int(usage.get("input_tokens"))
        last["cum_output_tokens"] = _int(usage.get("output_tokens"))

    def result(self) -> dict[str, Any]:
        for call_id, stored in self.results.items():
            call = self.calls.get(call_id)
            if call is not None and call["result"] is None:
                call["result"] = clip(text(stored.get("content")))
                call["is_error"] = call["is_error"] or bool(stored.get("is_error"))
        calls = sorted(self.calls.values(), key=lambda c: not c["is_error"])  # errors first
        last = self.rows[-1] if self.rows else {}
        return {
            "run": self.run,
            "rows": self.rows,
            "totals": {
                "input_tokens": last.get("cum_input_tokens", 0),
                "output_tokens": last.get("cum_output_tokens", 0),
                "ms": self.t_ms,
                "model_calls": sum(1 for r in self.rows if r["kind"] == "model"),
                "tool_calls": sum(1 for r in self.rows if r["kind"] == "tool"),
                "tool_errors": sum(1 for c in self.calls.values() if c["is_error"]),
            },
            "finished": self.finished,
            "metrics": (
                {k: self.metrics.get(k) for k in PREAMBLE_METRICS} if self.finished else None
            ),
            "model_calls": self.model_calls,
            "tool_calls": calls,
            "plans": self.plan.plans,
            "replans": self.plan.replans,
        }


def _note_name(e: Mapping[str, Any]) -> str:
    for key in ("guard", "guardrail", "name", "hook", "contract"):
        if isinstance(e.get(key), str):
            return str(e[key])
    return _key(e.get("kind"))


def _note_detail(e: Mapping[str, Any]) -> str:
    if e.get("kind") == "contract_check":
        return "; ".join(str(x) for x in items(e.get("errors")))
    if e.get("kind") == "tool_retry":
        return f"attempt {whole(e.get('attempt'))}: {_optional(e.get('error_kind'))}"
    for key in ("detail", "reason", "error"):
        if text(e.get(key)):
            return text(e.get(key))
    return ""


def timeline(
    events: Sequence[Mapping[str, Any]],
    *,
    results: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The timeline of a run from its trace `events` (dicts, as `read_trace` returns).

    `results`: stored tool results by call id (`content`, `is_error`), for calls whose
    result is not in this trace (one a person approved runs before its continuation).
    """
    builder = _Timeline(results or {})
    for event in events:
        if isinstance(event, Mapping):
            builder.feed(event)
    return builder.result()
