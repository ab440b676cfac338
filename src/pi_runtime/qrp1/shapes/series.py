"""`series`: rows in time order; times as `dt_ms` offsets from a `t0` fixed across pages.

When rows are a fixed step apart, `step_ms` in the header replaces the time column: row k
of a page is at t0 + (offset + k) · step_ms. Everything else is a table's columns.
"""

from __future__ import annotations

from typing import Any

from ..columns import Column, build_columns
from ..errors import QRPDecodeError, QRPEncodeError
from ..header import Header
from ..rows import read_rows, row_columns, write_rows
from ..timefmt import TimeFormat, from_ms, parse_time, time_format, to_ms
from .base import Body, EncodeOptions, same_shaped

__all__ = ["decode_series", "encode_series", "is_regular_series"]

# Integer fields under these names are read as epoch milliseconds.
_EPOCH_NAMES = ("time", "timestamp", "ts", "t", "open_time", "time_ms", "timestamp_ms")
_TIME_HINT = (
    "a field holding ISO-8601 UTC times (2026-09-08T00:00:00Z, optionally .mmm) "
    "or integer epoch milliseconds"
)


def _times(rows: list[Any], key: str) -> tuple[TimeFormat, list[int]] | int:
    """The format and epoch ms of every row's `key`, or the index of the first row whose
    value is not a time spelled like the first one."""
    first = parse_time(rows[0][key])
    if first is None:
        return 0
    fmt = first[0]
    times = []
    for index, row in enumerate(rows):
        parsed = parse_time(row[key])
        if parsed is None or parsed[0] != fmt:
            return index
        times.append(parsed[1])
    return fmt, times


def _find_time_key(rows: list[Any], keys: list[str]) -> tuple[str, TimeFormat, list[int]] | None:
    for key in keys:
        if isinstance(rows[0][key], str):
            found = _times(rows, key)
            if not isinstance(found, int):
                return key, *found
    for key in keys:
        if key in _EPOCH_NAMES and not isinstance(rows[0][key], str):
            found = _times(rows, key)
            if not isinstance(found, int) and found[0] == "ms":
                return key, *found
    return None


def _step(times: list[int], t0: int, offset: int, step_ms: int | None) -> int | None:
    """The fixed step the rows follow from t0, or None when they do not."""
    step = step_ms
    if step is None:
        if len(times) < 2 or times[1] <= times[0]:
            return None
        step = times[1] - times[0]
    regular = all(t == t0 + (offset + k) * step for k, t in enumerate(times))
    if step_ms is not None and not regular:
        bad = next(k for k, t in enumerate(times) if t != t0 + (offset + k) * step)
        raise QRPEncodeError(
            f"row {bad} is not at t0 + (offset + {bad}) * step_ms ({step_ms}); "
            "leave step_ms unset for an irregular series"
        )
    return step if regular else None


def _prepare(
    value: Any, options: EncodeOptions
) -> tuple[list[str], str, TimeFormat, int, list[int]]:
    if not isinstance(value, list):
        raise QRPEncodeError(f"kind series takes a list of objects, got {type(value).__name__}")
    keys = same_shaped(value)
    if keys is None:
        raise QRPEncodeError("kind series takes objects that all have the same keys")
    if options.time_key is None:
        found = _find_time_key(value, keys)
        if found is None:
            raise QRPEncodeError(f"kind series: no time field found; the series needs {_TIME_HINT}")
        key, fmt, times = found
    else:
        key = options.time_key
        if key not in keys:
            raise QRPEncodeError(
                f"kind series: time_key {key!r} is not a field; the series needs {_TIME_HINT}"
            )
        parsed = _times(value, key)
        if isinstance(parsed, int):
            raise QRPEncodeError(
                f"kind series: row {parsed} field {key!r} = {value[parsed][key]!r} is not a "
                f"time spelled like the first row; the series needs {_TIME_HINT}"
            )
        fmt, times = parsed
    t0 = value[0][key] if options.t0 is None else options.t0
    origin = parse_time(t0)
    if origin is None or origin[0] != fmt:
        raise QRPEncodeError(f"t0 {t0!r} must be spelled like the times ({value[0][key]!r})")
    return keys, key, fmt, origin[1], times


def is_regular_series(value: list[Any]) -> bool:
    """Whether auto kind should pick series: a time field and a fixed step."""
    if len(value) < 2:
        return False
    try:
        _, _, _, t0, times = _prepare(value, EncodeOptions())
    except QRPEncodeError:
        return False
    return _step(times, t0, 0, None) is not None


def encode_series(value: Any, options: EncodeOptions) -> Body | None:
    if isinstance(value, list) and not value:
        if options.t0 is not None and time_format(options.t0) is None:
            raise QRPEncodeError(f"t0 {options.t0!r} is not {_TIME_HINT}")
        return Body({"rows": 0, "cols": (), "t0": options.t0}, [])
    keys, key, _, t0, times = _prepare(value, options)
    step = _step(times, t0, options.offset, options.step_ms)
    others = build_columns(value, [k for k in keys if k != key])
    columns = [*others]
    columns.insert(keys.index(key), Column(key, "dt_ms"))
    rows = value if step else [{**row, key: t - t0} for row, t in zip(value, times, strict=True)]
    lines = write_rows(rows, row_columns(columns, implied_time=step is not None))
    t0_text = value[0][key] if options.t0 is None else options.t0
    fields = {"rows": len(value), "t0": t0_text, "step_ms": step, "cols": tuple(columns)}
    return Body(fields, lines)


def decode_series(header: Header, lines: list[str], first_lineno: int) -> tuple[Any, int]:
    assert header.rows is not None and header.cols is not None
    if header.rows == 0:
        return [], 0
    assert header.t0 is not None
    fmt = "ms" if isinstance(header.t0, int) else time_format(header.t0)
    assert fmt is not None
    t0 = to_ms(header.t0)
    time_key = next(c.name for c in header.cols if c.type == "dt_ms")
    step = header.step_ms
    live = row_columns(header.cols, implied_time=step is not None)
    rows = read_rows(lines, first_lineno, header.cols, live, header.rows)
    offset = header.offset or 0
    for index, row in enumerate(rows):
        dt = (offset + index) * step if step is not None else row[time_key]
        if dt is None:
            raise QRPDecodeError(
                "a series row needs its dt_ms", line=first_lineno + index, column=1
            )
        try:
            row[time_key] = from_ms(t0 + dt, fmt)
        except ValueError as exc:
            raise QRPDecodeError(str(exc), line=first_lineno + index, column=1) from None
    return rows, header.rows
