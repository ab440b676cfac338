"""The OpenTelemetry SDK as the standard `OTEL_*` variables describe it: OTLP/HTTP.

The exporters read their own variables (endpoints, headers, timeout, compression); the
resource reads `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (service name `pi`
when neither names one). Providers an application installed first are kept.
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider

from ._telemetry import Telemetry

DEFAULT_SERVICE_NAME = "pi"


def from_env(*, capture_content: bool) -> Telemetry:
    """Providers exporting where the environment says, installed as the global ones
    unless the application installed its own; the exporter runs use."""
    resource = _resource()
    created: list[Any] = []
    tracer_provider = _tracer_provider(resource, created) if _traces_wanted() else None
    meter_provider = _meter_provider(resource, created) if _metrics_wanted() else None
    return Telemetry(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
        owned=tuple(created),
    )


def _resource() -> Resource:
    named = bool(os.environ.get("OTEL_SERVICE_NAME", "").strip()) or (
        "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    )
    return Resource.create({} if named else {SERVICE_NAME: DEFAULT_SERVICE_NAME})


def _set(name: str) -> bool:
    return bool(os.environ.get(name, "").strip())


def _traces_wanted() -> bool:
    return _set("OTEL_EXPORTER_OTLP_ENDPOINT") or _set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def _metrics_wanted() -> bool:
    return _set("OTEL_EXPORTER_OTLP_ENDPOINT") or _set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


def _tracer_provider(resource: Resource, created: list[Any]) -> trace.TracerProvider:
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current  # the application's own: its processors and exporters stand
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=resource)  # flushed and shut down at exit
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    created.append(provider)
    return provider


def _meter_provider(resource: Resource, created: list[Any]) -> metrics.MeterProvider:
    current = metrics.get_meter_provider()
    if type(current).__name__ != "_ProxyMeterProvider":  # the API names no public proxy type
        return current
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    reader = PeriodicExportingMetricReader(OTLPMetricExporter())
    provider = MeterProvider(metric_readers=[reader], resource=resource)
    metrics.set_meter_provider(provider)
    created.append(provider)
    return provider
