"""`Telemetry`: the tracer and GenAI metric instruments runs export to."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics, trace

from ._bounded import BoundedHistogram, BoundedSpan, bounded_all, bounded_text, limit_from_env

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, SpanKind

    from ...messages import Message
    from ..events import Event
    from ._spans import RunSpans

SCOPE = "pi_runtime"

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)  # fmt: skip
"""The conventions' advised boundaries of `gen_ai.client.token.usage`."""
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92)  # fmt: skip
"""… and of `gen_ai.client.operation.duration` (seconds)."""

MAX_OPEN_RUNS = 10_000
"""Runs kept findable by their sub-agents; a run that never ended (a bug) is forgotten
oldest first past this."""


class Telemetry:
    """Where runs export: a tracer, the two GenAI client histograms, the content switch.

    Args:
        tracer_provider: spans go here (None: the global provider).
        meter_provider: metrics go here (None: the global provider).
        capture_content: record messages, instructions and tool arguments and results.
        owned: the providers Pi installed itself: `shutdown` shuts them down (others
            are only flushed: their owner shuts them down).
        limit: the most characters of a string on a span or metric (None: as the
            environment says, see `_bounded`).
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        capture_content: bool = False,
        owned: tuple[Any, ...] = (),
    ) -> None:
        self.limit = limit_from_env()
        self.tracer_provider = tracer_provider or trace.get_tracer_provider()
        self.meter_provider = meter_provider or metrics.get_meter_provider()
        self.tracer = self.tracer_provider.get_tracer(SCOPE)
        meter = self.meter_provider.get_meter(SCOPE)
        self.token_usage = self._histogram(
            meter,
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = self._histogram(
            meter,
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.capture_content = capture_content
        self.owned = owned
        self.runs: dict[str, RunSpans] = {}
        """Runs under way by run id: a sub-agent's run finds the call that started it."""

    def _histogram(self, meter: Any, name: str, **options: Any) -> BoundedHistogram:
        return BoundedHistogram(meter.create_histogram(name, **options), self.limit)

    def start_span(
        self,
        name: str,
        *,
        context: Context | None,
        kind: SpanKind,
        attributes: Mapping[str, Any],
        start_time: int,
        links: Sequence[Link] = (),
    ) -> BoundedSpan:
        """A span started with the tracer, its name and attributes bounded, as all that
        is set on it later is."""
        limit = self.limit
        span = self.tracer.start_span(
            bounded_text(name, limit),
            context=context,
            kind=kind,
            attributes=bounded_all(attributes, limit),
            links=links,
            start_time=start_time,
        )
        return BoundedSpan(span, limit)

    def listener(
        self,
        agent_name: str | None,
        then: Callable[[Event], None] | None = None,
        history: Sequence[Message] = (),
    ) -> Callable[[Event], None]:
        """What a run's recorder calls with each event: builds its spans, then passes
        the event on to `then` (the run's own listener, if any).

        `history`: the conversation before the run (recorded on `chat` spans when
        content is captured)."""
        from ._spans import RunSpans

        if len(self.runs) >= MAX_OPEN_RUNS:
            self.runs.pop(next(iter(self.runs)))
        spans = RunSpans(self, agent_name, history if self.capture_content else ())
        if then is None:
            return spans.on_event

        def both(event: Event) -> None:
            spans.on_event(event)
            then(event)

        return both

    def flush(self, timeout_ms: int = 30_000) -> None:
        """Export what is buffered now (a short-lived process about to exit)."""
        for provider in (self.tracer_provider, self.meter_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                flush(timeout_ms)

    def shutdown(self) -> None:
        self.flush()
        for provider in self.owned:
            provider.shutdown()
