"""Series times: ISO-8601 UTC strings (seconds or milliseconds) or epoch milliseconds.

A series writes times as millisecond offsets from `t0`; the spelling of `t0` says how the
times were spelled, so decoding gives back the very same strings (or integers).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

__all__ = ["TimeFormat", "from_ms", "parse_t0", "parse_time", "time_format", "to_ms"]

TimeFormat = Literal["iso", "iso_ms", "ms"]

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}))?Z")
_EPOCH_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def parse_time(value: Any) -> tuple[TimeFormat, int] | None:
    """(format, epoch milliseconds) of a time value, or None when it is not a time this
    codec can carry."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "ms", value
    if not isinstance(value, str):
        return None
    match = _ISO.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second, millis = match.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=UTC
        )
    except ValueError:  # month 13, February 30, hour 24, year 0
        return None
    ms = (moment - _EPOCH) // _MS
    return ("iso", ms) if millis is None else ("iso_ms", ms + int(millis))


def time_format(value: Any) -> TimeFormat | None:
    parsed = parse_time(value)
    return None if parsed is None else parsed[0]


def to_ms(value: Any) -> int:
    """Epoch milliseconds of a value `parse_time` accepts."""
    parsed = parse_time(value)
    if parsed is None:
        raise ValueError(f"{value!r} is not a time")
    return parsed[1]


def from_ms(ms: int, fmt: TimeFormat) -> str | int:
    """A time in `fmt`; ValueError when `fmt` cannot spell it (out of range, or not whole
    seconds for the seconds format)."""
    if fmt == "ms":
        return ms
    if fmt == "iso" and ms % 1000:
        raise ValueError(f"{ms} ms is not a whole second, but t0 is spelled in seconds")
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        raise ValueError(f"{ms} ms is outside the years 1-9999") from None
    if not 1 <= moment.year <= 9999:
        raise ValueError(f"{ms} ms is outside the years 1-9999")
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if fmt == "iso_ms":
        text += f".{moment.microsecond // 1000:03d}"
    return text + "Z"


def parse_t0(text: str) -> str | int | None:
    """The header's `t0` value: an int for epoch milliseconds, the string for ISO, or None."""
    if _EPOCH_INT.fullmatch(text):
        try:
            return int(text)
        except ValueError:
            return None
    return text if time_format(text) is not None else None
