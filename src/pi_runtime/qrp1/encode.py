"""`encode`: a JSON value to a QRP1 document, never larger than compact JSON plus the header."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import QRPEncodeError
from .header import _EXTRA_KEY, KINDS, Header, Kind, PageInfo, format_header
from .shapes import ENCODERS, EncodeOptions, is_regular_series
from .values import checked_json_text

__all__ = ["choose_kind", "encode"]


def choose_kind(value: Any) -> Kind:
    """text for a string, record for an object, series for a list with a time field at a
    fixed step, table for any other list, record (as JSON) for a lone scalar."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "series" if is_regular_series(value) else "table"
    return "record"


def encode(
    value: Any,
    *,
    kind: Kind | None = None,
    source: str | None = None,
    snapshot: str | None = None,
    range: str | None = None,  # the header key's name
    page: PageInfo | None = None,
    time_key: str | None = None,
    t0: str | int | None = None,
    step_ms: int | None = None,
    fallback: bool = True,
    extra: Mapping[str, str] | None = None,
) -> str:
    """Encode a JSON value as one QRP1 document.

    Args:
        value: what `json.loads` could return.
        kind: record, table, series, text or receipt; chosen from the value when None.
        source, snapshot, range: where the data came from, which version, what it covers.
        page: where this page sits in a larger result (number, count, offset, total, next).
        time_key, t0, step_ms: series hints; t0 and step_ms should be the same on every
            page of one result. Found from the rows when not given.
        fallback: when the shape's body would be larger than compact JSON, carry the JSON
            instead (`body=json`). Only turn off to measure the shape itself.
        extra: `x-…` header keys for the application.

    Raises:
        QRPEncodeError: the value is not JSON, or not a value the kind takes.
    """
    value_json = checked_json_text(value)
    if kind is None:
        kind = choose_kind(value)
    elif kind not in KINDS:
        raise QRPEncodeError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    for key in extra or {}:
        if not _EXTRA_KEY.fullmatch(key):
            raise QRPEncodeError(f"extra header key {key!r} must look like x-name")
    if kind != "series" and (time_key, t0, step_ms) != (None, None, None):
        raise QRPEncodeError(f"time_key, t0 and step_ms are for a series, not a {kind}")
    if step_ms is not None and not _whole(step_ms, minimum=1):
        raise QRPEncodeError(f"step_ms must be a positive integer, got {step_ms!r}")
    if page is not None:
        _check_page(page)
    options = EncodeOptions(
        time_key=time_key, t0=t0, step_ms=step_ms, offset=page.offset if page else 0
    )
    body = ENCODERS[kind](value, options)
    common: dict[str, Any] = {
        "kind": kind,
        "source": source,
        "snapshot": snapshot,
        "range": range,
        "extra": dict(extra or {}),
    }
    if page is not None:
        common.update(
            page=page.number,
            pages=page.count,
            offset=page.offset,
            total=page.total,
            next=page.next,
        )
    as_json = format_header(Header(**common, body="json")) + "\n" + value_json
    if body is None:
        return as_json
    text = "\n".join([format_header(Header(**common, **body.header)), *body.lines])
    if fallback and len(as_json.encode()) < len(text.encode()):
        return as_json
    return text


def _whole(value: Any, *, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _check_page(page: PageInfo) -> None:
    if not _whole(page.number, minimum=1):
        raise QRPEncodeError(f"page number must be an integer >= 1, got {page.number!r}")
    if page.count is not None and not _whole(page.count, minimum=page.number):
        raise QRPEncodeError(f"page count {page.count!r} must be >= the page number {page.number}")
    if not _whole(page.offset, minimum=0):
        raise QRPEncodeError(f"page offset must be an integer >= 0, got {page.offset!r}")
    if page.total is not None and not _whole(page.total, minimum=0):
        raise QRPEncodeError(f"page total must be an integer >= 0, got {page.total!r}")
