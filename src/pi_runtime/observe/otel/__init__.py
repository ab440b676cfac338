"""OpenTelemetry export of runs: GenAI spans and metrics built from Pi's events.

Off unless asked for. `active()` is what a run calls: without `OTEL_EXPORTER_OTLP_ENDPOINT`
(or `…_TRACES_ENDPOINT` / `…_METRICS_ENDPOINT`) set, and without `configure`, it returns
None and nothing of OpenTelemetry is imported, ever: the environment is read once, at the
first run, and the answer kept. With a variable set, the first run sets up the SDK with
OTLP/HTTP exporters (`configure_from_env`); `pi serve` calls it at start-up.

Each run's events become spans (see `_spans`):

    invoke_agent {agent}          INTERNAL, one per run
    ├── chat {model}              CLIENT (INTERNAL for a model running in this process)
    └── execute_tool {tool}       INTERNAL
        └── invoke_agent {tool}   a sub-agent's run, inside the call that started it

Every run of a session shares one trace whose id is derived from the session id
(`session_trace_id`), so a continuation run by a worker, in another process, hours later,
joins the trace of the run that started the request. See docs/otel.md.

This module imports no OpenTelemetry package; `_setup` and `_spans` do, when called.
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._names import agent_name

if TYPE_CHECKING:
    from ...messages import Message
    from ..events import Event
    from ._telemetry import Telemetry

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "ENDPOINT_ENVS",
    "INSTALL_HINT",
    "active",
    "agent_name",
    "configure",
    "configure_from_env",
    "listener",
    "session_span_id",
    "session_trace_id",
    "shutdown",
]

ENDPOINT_ENVS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
"""Any of these turns export on (traces go where the first two say, metrics where the
first and the last say)."""

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""`true` records messages, system instructions and tool arguments and results on spans
(redacted of secrets); anything else, or unset, records none."""

INSTALL_HINT = "pip install 'pi-runtime[otel]'"

_UNDECIDED: Any = object()
_current: Telemetry | None = _UNDECIDED
_lock = threading.Lock()


def active() -> Telemetry | None:
    """The run exporter, or None when OpenTelemetry is off (the usual, cheap answer)."""
    telemetry = _current
    if telemetry is _UNDECIDED:
        return configure_from_env()
    return telemetry


def listener(
    then: Callable[[Event], None] | None,
    history: Sequence[Message] = (),
    source: str | None = None,
) -> Callable[[Event], None] | None:
    """What a run's recorder should call with each event: `then` itself while export is
    off; else a listener building the run's spans that passes each event on to `then`.

    Args:
        then: the run's own listener (a stream's queue), if any.
        history: the conversation before the run (for content capture).
        source: the agent file the agent came from (its name names the spans).
    """
    telemetry = active()
    if telemetry is None:
        return then
    return telemetry.listener(agent_name(source), then, history)


def configure_from_env() -> Telemetry | None:
    """Turn export on as the standard `OTEL_*` variables say, once per process.

    With no endpoint variable set (or `OTEL_SDK_DISABLED=true`) export stays off and no
    OpenTelemetry module is imported. An application that installed its own SDK tracer
    or meter provider keeps it: Pi's spans go there. Otherwise Pi installs providers
    exporting over OTLP/HTTP (protobuf), batched, flushed when the process exits.

    Without the `otel` extra installed, a warning names it and export stays off: a
    variable set for the whole machine must not stop runs.

    Returns:
        The exporter runs use, or None when export is off.
    """
    global _current
    with _lock:
        if _current is not _UNDECIDED:
            return _current
        if not _wanted(os.environ):
            _current = None
            return None
        try:
            from ._setup import from_env
        except ImportError as exc:
            warnings.warn(
                f"{_names_set()} is set but OpenTelemetry export needs packages that are "
                f"not installed ({exc.name}): {INSTALL_HINT}; runs go on without export",
                RuntimeWarning,
                stacklevel=2,
            )
            _current = None
            return None
        _current = from_env(capture_content=capture_content_from_env())
        return _current


def configure(
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    capture_content: bool | None = None,
) -> Telemetry:
    """Export runs to these providers (the global ones when None), whatever the
    environment says; for applications and tests that set OpenTelemetry up themselves.

    Args:
        tracer_provider: an `opentelemetry.trace.TracerProvider`.
        meter_provider: an `opentelemetry.metrics.MeterProvider`.
        capture_content: record message content (default: `CAPTURE_CONTENT_ENV`).

    Raises:
        UserError: the `otel` extra is not installed.
    """
    global _current
    try:
        from ._telemetry import Telemetry
    except ImportError as exc:
        from ...exceptions import UserError

        raise UserError(
            f"OpenTelemetry export needs {exc.name}, which is not installed: {INSTALL_HINT}"
        ) from None
    if capture_content is None:
        capture_content = capture_content_from_env()
    telemetry = Telemetry(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
    )
    with _lock:
        _current = telemetry
    return telemetry


def shutdown() -> None:
    """Flush what is buffered and stop exporting; later runs export nothing until
    `configure` is called again. Providers Pi installed are shut down; others are only
    flushed (their owner shuts them down)."""
    global _current
    with _lock:
        telemetry, _current = _current, None
    if telemetry is not None and telemetry is not _UNDECIDED:
        telemetry.shutdown()


def capture_content_from_env() -> bool:
    value = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    return value in ("true", "1", "yes", "span_only", "span_and_event")


def session_trace_id(session_id: str) -> str:
    """The trace id (32 hex digits) every run of session `session_id` is exported under."""
    return _session_digest(session_id)[:32]


def session_span_id(session_id: str) -> str:
    """The span id (16 hex digits) each run's `invoke_agent` span names as its parent:
    the session itself, which is never exported as a span of its own."""
    return _session_digest(session_id)[32:48]


def _session_digest(session_id: str) -> str:
    digest = hashlib.sha256(f"pi.session:{session_id}".encode()).hexdigest()
    # an all-zero id is invalid in W3C trace context: vanishingly unlikely, still kept out
    if int(digest[:32], 16) == 0 or int(digest[32:48], 16) == 0:
        digest = hashlib.sha256(f"pi.session:{session_id}:1".encode()).hexdigest()
    return digest


def _wanted(environ: os._Environ[str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_ENVS)


def _names_set() -> str:
    return " / ".join(n for n in ENDPOINT_ENVS if os.environ.get(n, "").strip())


def _reset() -> None:
    """Forget the decision (tests): the next run reads the environment again."""
    global _current
    with _lock:
        _current = _UNDECIDED
