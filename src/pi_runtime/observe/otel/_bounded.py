"""What Pi puts on spans and metrics, made writable and bounded.

An OTLP exporter encodes a whole batch at once: one string holding a lone surrogate (a
model named from undecodable bytes, a provider's error text) failed it with "Failed to
encode span batch" and lost every span of the batch, other runs' too. And captured
content put the whole conversation on every `chat` span, however long. So every string
Pi gives OpenTelemetry (span names, attributes, status descriptions, span events, metric
attributes) goes through `bounded`: repaired (`messages.repair_text`) and cut to the
attribute length limit, `OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT` or
`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` when set (as the SDK reads them), else
`DEFAULT_LIMIT` characters. `BoundedSpan` and `BoundedHistogram` wrap what `RunSpans`
writes to, so no call site can forget.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Status

from ...messages import clipped, repair_text

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span

log = logging.getLogger("pi_runtime.observe.otel")

DEFAULT_LIMIT = 16_384
"""Characters of one string value when no variable sets the limit."""
LIMIT_ENVS = ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")


def limit_from_env() -> int:
    """The length limit of a string value: the first of `LIMIT_ENVS` set, as a whole
    number (0 or more), else `DEFAULT_LIMIT`. A value that is no such number is said in
    the log and passed over (the SDK, which reads the same variables, refuses it)."""
    for name in LIMIT_ENVS:
        value = os.environ.get(name, "").strip()
        if value.isascii() and value.isdigit():
            return int(value)
        if value:
            log.warning("%s=%r is no whole number of characters: not used", name, value[:40])
    return DEFAULT_LIMIT


def bounded(value: Any, limit: int) -> Any:
    """`value` (an attribute value) with each string repaired and at most `limit`
    characters, the last of a cut one `…`; other values as they are."""
    if isinstance(value, str):
        return bounded_text(value, limit)
    if isinstance(value, list | tuple) and any(isinstance(v, str) for v in value):
        return [bounded_text(v, limit) if isinstance(v, str) else v for v in value]
    return value


def bounded_all(attributes: Mapping[str, Any] | None, limit: int) -> dict[str, Any]:
    """`attributes` with every key and value `bounded`."""
    return {bounded_text(k, limit): bounded(v, limit) for k, v in (attributes or {}).items()}


def bounded_text(text: str, limit: int) -> str:
    """`text` repaired and at most `limit` characters, the last of a cut one `…`."""
    return repair_text(clipped(text, limit))


class BoundedSpan:
    """A span taking only bounded strings (the methods Pi calls); `span` is the span
    itself, for contexts and for the SDK."""

    __slots__ = ("limit", "span")

    def __init__(self, span: Span, limit: int) -> None:
        self.span, self.limit = span, limit

    def set_attribute(self, key: str, value: Any) -> None:
        self.span.set_attribute(bounded_text(key, self.limit), bounded(value, self.limit))

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        self.span.set_attributes(bounded_all(attributes, self.limit))

    def set_status(self, status: Status) -> None:
        description = status.description
        if description is not None:
            status = Status(status.status_code, bounded_text(description, self.limit))
        self.span.set_status(status)

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        self.span.add_event(bounded_text(name, self.limit), bounded_all(attributes, self.limit))

    def end(self, end_time: int | None = None) -> None:
        self.span.end(end_time=end_time)


class BoundedHistogram:
    """A histogram whose points' attributes are bounded."""

    __slots__ = ("histogram", "limit")

    def __init__(self, histogram: Histogram, limit: int) -> None:
        self.histogram, self.limit = histogram, limit

    def record(self, amount: float, attributes: Mapping[str, Any]) -> None:
        self.histogram.record(amount, bounded_all(attributes, self.limit))
