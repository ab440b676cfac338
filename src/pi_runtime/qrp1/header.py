"""The one header line: `QRP1|kind|key=value|…` — what the body is and where it came from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .columns import Column, format_cols, parse_cols
from .errors import QRPDecodeError
from .escape import escape_header
from .scan import LineScanner
from .timefmt import parse_t0

__all__ = ["KINDS", "MAGIC", "Header", "Kind", "PageInfo", "format_header", "parse_header"]

MAGIC = "QRP1"
Kind = Literal["record", "table", "series", "text", "receipt"]
KINDS: tuple[str, ...] = get_args(Kind)

# Wire order of the keys; `x-…` extension keys follow `next`.
_KEYS = (
    "source", "snapshot", "range", "page", "offset", "total",
    "rows", "fields", "t0", "step_ms", "len", "body", "cols", "next",
)  # fmt: skip
_SHAPE_KEYS = {"rows", "fields", "t0", "step_ms", "len", "cols"}
_ALLOWED_SHAPE_KEYS: dict[str, set[str]] = {
    "record": {"fields"},
    "table": {"rows", "cols"},
    "series": {"rows", "cols", "t0", "step_ms"},
    "text": {"len"},
    "receipt": set(),
}
_REQUIRED_SHAPE_KEYS: dict[str, set[str]] = {
    "record": {"fields"},
    "table": {"rows", "cols"},
    "series": {"rows", "cols"},
    "text": {"len"},
    "receipt": set(),
}
_COUNT = re.compile(r"0|[1-9][0-9]*")
_POSITIVE = re.compile(r"[1-9][0-9]*")
_PAGE = re.compile(r"([1-9][0-9]*)(?:/([1-9][0-9]*))?")
_EXTRA_KEY = re.compile(r"x-[a-z0-9][a-z0-9_.-]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class PageInfo:
    """Where a page sits in a larger result: page `number` of `count`, its first row's
    index `offset` in the whole result, the result's `total` rows, and the cursor `next`."""

    number: int
    count: int | None = None
    offset: int = 0
    total: int | None = None
    next: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    """A parsed header. `length` is the wire key `len`; `extra` holds `x-…` keys."""

    kind: Kind
    source: str | None = None
    snapshot: str | None = None
    range: str | None = None
    page: int | None = None
    pages: int | None = None
    offset: int | None = None
    total: int | None = None
    rows: int | None = None
    fields: int | None = None
    t0: str | int | None = None
    step_ms: int | None = None
    length: int | None = None
    body: Literal["json"] | None = None
    cols: tuple[Column, ...] | None = None
    next: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def _wire_values(header: Header) -> dict[str, str | None]:
    page = None
    if header.page is not None:
        page = str(header.page) + ("" if header.pages is None else f"/{header.pages}")

    def text(value: str | None) -> str | None:
        return None if value is None else escape_header(value)

    def number(value: int | str | None) -> str | None:
        return None if value is None else str(value)

    return {
        "source": text(header.source),
        "snapshot": text(header.snapshot),
        "range": text(header.range),
        "page": page,
        "offset": number(header.offset),
        "total": number(header.total),
        "rows": number(header.rows),
        "fields": number(header.fields),
        "t0": number(header.t0),
        "step_ms": number(header.step_ms),
        "len": number(header.length),
        "body": header.body,
        "cols": None if header.cols is None else format_cols(header.cols),
        "next": text(header.next),
    }


def format_header(header: Header) -> str:
    parts = [MAGIC, header.kind]
    parts.extend(f"{k}={v}" for k, v in _wire_values(header).items() if v is not None)
    parts.extend(f"{k}={escape_header(v)}" for k, v in header.extra.items())
    return "|".join(parts)


def _convert(key: str, text: str, scanner: LineScanner, pos: int) -> Any:
    if key in ("offset", "total", "rows", "fields", "len") and not _COUNT.fullmatch(text):
        raise scanner.error(f"{key} must be a whole number, found {text!r}", pos)
    if key in ("offset", "total", "rows", "fields", "len"):
        return _whole(key, text, scanner, pos)
    if key == "step_ms":
        if not _POSITIVE.fullmatch(text):
            raise scanner.error(f"step_ms must be a positive whole number, found {text!r}", pos)
        return _whole(key, text, scanner, pos)
    if key == "t0":
        t0 = parse_t0(text)
        if t0 is None:
            raise scanner.error(
                f"t0 must be an ISO-8601 UTC time (2026-09-08T00:00:00Z, optional .mmm) "
                f"or epoch milliseconds, found {text!r}",
                pos,
            )
        return t0
    if key == "body" and text != "json":
        raise scanner.error(f"body can only be json, found {text!r}", pos)
    if key == "page":
        return _page(text, scanner, pos)
    return text


def _page(text: str, scanner: LineScanner, pos: int) -> tuple[int, int | None]:
    match = _PAGE.fullmatch(text)
    if match is None:
        raise scanner.error(f"page must be N or N/M with N, M >= 1, found {text!r}", pos)
    number = _whole("page", match.group(1), scanner, pos)
    if match.group(2) is None:
        return number, None
    count = _whole("page count", match.group(2), scanner, pos + match.start(2))
    if number > count:
        raise scanner.error(f"page {number} is past the last page {count}", pos)
    return number, count


def _whole(key: str, digits: str, scanner: LineScanner, pos: int) -> int:
    """`digits` as an int, or an error where Python will not convert that many digits."""
    try:
        return int(digits)
    except ValueError:
        raise scanner.error(f"{key} has {len(digits)} digits, too many to read", pos) from None


def _first_line_error(line: str) -> QRPDecodeError:
    if re.match(r"QRP[0-9]+(\||$)", line) and not line.startswith(MAGIC + "|"):
        version = line.split("|", 1)[0]
        return QRPDecodeError(
            f"unsupported version {version} (this reader reads QRP1)", line=1, column=1
        )
    return QRPDecodeError(
        "not a QRP1 document: the first line must start with 'QRP1|'", line=1, column=1
    )


def parse_header(line: str) -> Header:
    """Parse and check the first line of a document."""
    if not line.startswith(MAGIC + "|"):
        raise _first_line_error(line)
    scanner = LineScanner(line, 1, len(MAGIC) + 1)
    kind = scanner.read_raw("|")
    if kind not in KINDS:
        raise scanner.error(f"unknown kind {kind!r} (one of {', '.join(KINDS)})", len(MAGIC) + 1)
    values: dict[str, Any] = {}
    extra: dict[str, str] = {}
    positions: dict[str, int] = {}
    while not scanner.at_end():
        scanner.expect("|", "'|' between header fields")
        key_pos = scanner.pos
        key = scanner.read_raw("=|")
        if key not in _KEYS and not _EXTRA_KEY.fullmatch(key):
            raise scanner.error(f"unknown header key {key!r}", key_pos)
        if key in values or key in extra:
            raise scanner.error(f"duplicate header key {key!r}", key_pos)
        scanner.expect("=", f"'=' after header key {key!r}")
        positions[key] = key_pos
        value_pos = scanner.pos
        if key == "cols":
            values[key] = parse_cols(scanner)
        elif key.startswith("x-"):
            extra[key] = scanner.read_text("|")
        else:
            values[key] = _convert(key, scanner.read_text("|"), scanner, value_pos)
    _check_keys(kind, values, positions, scanner)
    page = values.pop("page", None)
    return Header(
        kind=kind,  # type: ignore[arg-type]  # checked against KINDS above
        page=None if page is None else page[0],
        pages=None if page is None else page[1],
        length=values.pop("len", None),
        extra=extra,
        **values,
    )


def _check_keys(
    kind: str, values: dict[str, Any], positions: dict[str, int], scanner: LineScanner
) -> None:
    shape_keys = _SHAPE_KEYS & values.keys()
    allowed = set() if values.get("body") == "json" else _ALLOWED_SHAPE_KEYS[kind]
    for key in sorted(shape_keys - allowed, key=positions.__getitem__):
        why = "with body=json" if values.get("body") == "json" else f"in a {kind}"
        raise scanner.error(f"header key {key!r} is not allowed {why}", positions[key])
    if values.get("body") != "json":
        missing = sorted(_REQUIRED_SHAPE_KEYS[kind] - values.keys())
        if missing:
            raise scanner.error(f"a {kind} header needs {', '.join(missing)}", len(scanner.text))
    cols = values.get("cols") or ()
    times = [c for c in cols if c.type == "dt_ms"]
    if kind != "series" and times:
        raise scanner.error("dt_ms columns exist only in a series", positions["cols"])
    if kind == "series" and len(times) > 1:
        raise scanner.error("a series has one dt_ms column", positions["cols"])
    if kind == "series" and values.get("rows") and (not times or "t0" not in values):
        raise scanner.error("a series with rows needs t0 and one dt_ms column", len(scanner.text))
