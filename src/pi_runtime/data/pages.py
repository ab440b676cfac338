"""Pages: a result the model reads, cut into QRP1 pages under a byte limit, with cursors.

`Pager.publish` freezes a list of rows as a snapshot of pages — each page a whole QRP1
document, at most `page_bytes` UTF-8 bytes once its header holds the snapshot id, the
`next` cursor and (page 1) the result's reference. `Pager.read(cursor)` serves the page a
cursor names from that snapshot: the same cursor gives the same page, byte for byte, for
as long as the snapshot is kept; a tampered, expired, foreign or mismatched cursor is
refused with a stable code (see `cursor.py`). A failed task's own error comes first.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ..exceptions import ToolError
from ..messages import ToolErrorKind, hint_for, repair_text, repair_value
from ..messages.canonical import canonical_json
from ..qrp1 import Kind, decode
from ..qrp1.header import format_header, parse_header
from .cursor import (
    CURSOR_EXPIRED,
    CURSOR_FORBIDDEN,
    CURSOR_INVALID,
    CURSOR_MISMATCH,
    KEY_NAME,
    CursorClaims,
    CursorSigner,
    binding,
    cursor_error,
)
from .layout import REF_KEY, PagePlan, split_sizes
from .refs import REFERENCE_EXPIRED, REFERENCE_FORBIDDEN, reference_error
from .storage import Clock, DataStore, SnapshotRecord, TaskState, utc_now

__all__ = [
    "DEFAULT_PAGE_BYTES",
    "DEFAULT_RETENTION_S",
    "REF_KEY",
    "TASK_ERROR_KINDS",
    "Page",
    "Pager",
    "check_task",
]

DEFAULT_PAGE_BYTES = 8_000
DEFAULT_RETENTION_S = 3600.0

TASK_ERROR_KINDS = {
    "failed": ToolErrorKind.TASK_FAILED,
    "cancelled": ToolErrorKind.TASK_CANCELLED,
    "outcome_unknown": ToolErrorKind.OUTCOME_UNKNOWN,
}
"""A task's terminal failure status → the error kind the model reads."""

_NEVER = 0xFFFFFFFF  # a cursor of a snapshot kept forever


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """One page as the model reads it.

    Attributes:
        text: the QRP1 document.
        number: 1-based, of `count`; `offset` is its first row's index in the result.
        next: the cursor of the next page; None on the last.
    """

    text: str
    snapshot: str
    number: int
    count: int
    offset: int
    rows: int
    total: int
    next: str | None


def check_task(task: TaskState | None) -> None:
    """Raise the task's own terminal error, if it failed: it says what to fix, where a
    cursor error read after it would only mislead (seed 004)."""
    if task is None or task.status not in TASK_ERROR_KINDS:
        return
    error = task.error or {}
    cause = str(error.get("kind") or "error")
    reason = str(error.get("message") or "no reason was recorded")
    verb = {"failed": "failed", "cancelled": "was cancelled"}.get(task.status, "ended")
    what = f"task {task.id} {verb} ({cause}): {reason}"
    if task.status == "outcome_unknown":
        what = f"task {task.id} was interrupted: whether its effect happened is unknown"
    hint = str(error.get("hint") or "") or hint_for(ToolErrorKind.TASK_FAILED)
    raise ToolError(what, kind=TASK_ERROR_KINDS[task.status], hint=hint)


class Pager:
    """Publishes results as pages and serves them back by cursor, for one owner.

    Args:
        store: where snapshots live (`DataStore`).
        owner: whose results these are; a cursor of another owner's result is refused.
        clock: expiry is checked against it.
        page_bytes: the most UTF-8 bytes a page may have, header included (keep it under
            the returning tool's `max_result_bytes`, or the gate cuts the page).
        max_rows: the most rows a page may have (None: only bytes count).
        retention_s: how long a published result (and its cursors) is kept.
    """

    def __init__(
        self,
        store: DataStore,
        *,
        owner: str,
        clock: Clock = utc_now,
        page_bytes: int = DEFAULT_PAGE_BYTES,
        max_rows: int | None = None,
        retention_s: float = DEFAULT_RETENTION_S,
    ) -> None:
        if page_bytes < 256:
            raise ValueError(f"page_bytes must be at least 256, got {page_bytes!r}")
        if max_rows is not None and max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows!r}")
        if not retention_s > 0:
            raise ValueError(f"retention_s must be positive, got {retention_s!r}")
        self.store = store
        self.owner = owner
        self.clock = clock
        self.page_bytes = page_bytes
        self.max_rows = max_rows
        self.retention_s = retention_s
        self._signer: CursorSigner | None = None

    @property
    def signer(self) -> CursorSigner:
        if self._signer is None:  # the key is read once, on first use
            self._signer = CursorSigner(self.store.signing_key(KEY_NAME))
        return self._signer

    # Writing

    def publish(
        self,
        rows: Sequence[Any],
        *,
        source: str,
        query: Mapping[str, Any],
        sort: str | None = None,
        version: str | None = None,
        kind: Kind | None = None,
        range: str | None = None,  # the QRP1 header key's name
        time_key: str | None = None,
        extra: Mapping[str, str] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> SnapshotRecord:
        """Freeze `rows` as a snapshot of pages; cursors will be bound to `query`, `sort`
        and `version` (the source's version the rows were read at).

        Args:
            kind: `table` or `series` (chosen from the rows when None).
            extra: `x-…` header keys for the first page (a summary, say).

        Raises:
            ValueError: a single row does not fit in `page_bytes`.
            QRPEncodeError: the rows are not JSON, or not a table or series.
        """
        if not isinstance(rows, Sequence) or isinstance(rows, str):
            raise TypeError(f"publish pages a list of rows, got {type(rows).__name__}")
        plan = PagePlan.make(list(rows), kind, source, range, time_key, dict(extra or {}))
        sizes = split_sizes(
            len(plan.rows), plan.measure, self.page_bytes, self.max_rows, plan.floors()
        )
        bodies = plan.bodies(sizes)
        expires = self.clock() + timedelta(seconds=self.retention_s)
        return self.store.put_snapshot(
            owner=self.owner,
            source=source,
            pages=bodies,
            page_rows=sizes,
            locator=dict(query),
            version=version,
            meta={**(meta or {}), "sort": sort, "kind": plan.kind},
            expires_at=expires,
        )

    # Reading

    def page(
        self, snapshot: SnapshotRecord, number: int = 1, *, reference: str | None = None
    ) -> Page:
        """Page `number` (1-based) of `snapshot`, which the caller reached through a
        checked reference (it must still be this owner's and kept); `reference` is
        written into page 1's header as `x-ref`."""
        if snapshot.owner != self.owner:
            raise reference_error(REFERENCE_FORBIDDEN, f"result {snapshot.id} is not yours")
        if _past(self.clock(), snapshot.expires_at):
            raise reference_error(REFERENCE_EXPIRED, f"result {snapshot.id} is no longer kept")
        if not 1 <= number <= snapshot.page_count:
            raise ValueError(f"page {number} of a result of {snapshot.page_count} pages")
        return self._render(snapshot, number - 1, reference if number == 1 else None)

    def read(
        self,
        cursor: str,
        *,
        query: Mapping[str, Any] | None = None,
        sort: str | None = None,
        version: str | None = None,
        snapshot: str | None = None,
        task: TaskState | None = None,
    ) -> Page:
        """The page `cursor` names. `query`, `sort`, `version` and `snapshot`, when given,
        must be what the cursor was issued for.

        Raises:
            ToolError: the task's terminal error when `task` failed (first, whatever the
                cursor); else `cursor_invalid`, `cursor_expired`, `cursor_forbidden` or
                `cursor_mismatch`.
        """
        check_task(task)
        claims = self.signer.verify(cursor)
        now = self.clock()
        if claims.expires != _NEVER and now.timestamp() >= claims.expires:
            raise cursor_error(CURSOR_EXPIRED, "the cursor's retention has ended")
        stored = self.store.get_snapshot(claims.snapshot)
        if stored is None or _past(now, stored.expires_at):
            raise cursor_error(CURSOR_EXPIRED, "the result this cursor pages is no longer kept")
        if stored.owner != self.owner:
            raise cursor_error(CURSOR_FORBIDDEN, "this cursor pages another owner's result")
        _check_binding(stored, claims, query=query, sort=sort, version=version, snapshot=snapshot)
        if claims.seq >= stored.page_count:
            raise cursor_error(CURSOR_INVALID, "the cursor points past the last page")
        return self._render(stored, claims.seq, None)

    def segments(self, snapshot: SnapshotRecord) -> Iterator[list[Any]]:
        """The rows of `snapshot`, page by page (for tools reading data server-side)."""
        for seq in range(snapshot.page_count):
            row = self.store.get_page(snapshot.id, seq)
            if row is None:
                raise reference_error(REFERENCE_EXPIRED, f"result {snapshot.id} lost a page")
            value = decode(row.body)
            yield value if isinstance(value, list) else [value]

    def rows(self, snapshot: SnapshotRecord) -> list[Any]:
        """Every row of `snapshot`, in order."""
        return [row for segment in self.segments(snapshot) for row in segment]

    def _render(self, snapshot: SnapshotRecord, seq: int, reference: str | None) -> Page:
        stored = self.store.get_page(snapshot.id, seq)
        if stored is None:
            raise reference_error(REFERENCE_EXPIRED, f"result {snapshot.id} lost page {seq + 1}")
        head, newline, body = stored.body.partition("\n")
        header = parse_header(head)
        next_cursor = None
        if seq + 1 < snapshot.page_count:
            claims = CursorClaims(
                snapshot=snapshot.id,
                seq=seq + 1,
                expires=_epoch(snapshot.expires_at),
                binding=_binding_of(snapshot),
            )
            next_cursor = self.signer.sign(claims)
        extra = dict(header.extra)
        if reference is not None:
            extra = {REF_KEY: reference, **extra}
        header = replace(header, snapshot=snapshot.id, next=next_cursor, extra=extra)
        text = format_header(header) + newline + body
        assert header.page is not None and header.pages is not None and header.total is not None
        return Page(
            text=text,
            snapshot=snapshot.id,
            number=header.page,
            count=header.pages,
            offset=header.offset or 0,
            rows=stored.row_count if stored.row_count is not None else 0,
            total=header.total,
            next=next_cursor,
        )


def _past(now: datetime, expires_at: datetime | None) -> bool:
    return expires_at is not None and now >= expires_at


def _epoch(moment: datetime | None) -> int:
    return _NEVER if moment is None else min(_NEVER - 1, math.floor(moment.timestamp()))


def _sort_of(snapshot: SnapshotRecord) -> str | None:
    sort = (snapshot.meta or {}).get("sort")
    return sort if isinstance(sort, str) else None


def _binding_of(snapshot: SnapshotRecord) -> bytes:
    return binding(
        query=snapshot.locator,
        sort=_sort_of(snapshot),
        version=snapshot.version,
        digest=snapshot.digest,
    )


def _check_binding(
    stored: SnapshotRecord,
    claims: CursorClaims,
    *,
    query: Mapping[str, Any] | None,
    sort: str | None,
    version: str | None,
    snapshot: str | None,
) -> None:
    if claims.binding != _binding_of(stored):
        # Signed by us for other contents: the result changed. Never serve the new one.
        raise cursor_error(CURSOR_MISMATCH, "the result changed since this cursor was issued")
    # Compared as stored: the store repaired lone surrogates (`fields.new_snapshot`).
    query = None if query is None else repair_value(dict(query))
    sort = None if sort is None else repair_text(sort)
    version = None if version is None else repair_text(version)
    if snapshot is not None and snapshot != stored.id:
        raise cursor_error(CURSOR_MISMATCH, f"this cursor pages result {stored.id}, not {snapshot}")
    if query is not None and canonical_json(dict(query)) != canonical_json(stored.locator):
        theirs = stored.locator or {}
        differ = sorted(k for k in {*query, *theirs} if query.get(k) != theirs.get(k))
        raise cursor_error(
            CURSOR_MISMATCH,
            "this cursor continues another query (it differs in "
            + ", ".join(differ or ["spelling"])
            + ")",
        )
    if sort is not None and sort != _sort_of(stored):
        raise cursor_error(
            CURSOR_MISMATCH, f"this cursor pages in {_sort_of(stored)!r} order, not {sort!r}"
        )
    if version is not None and version != stored.version:
        raise cursor_error(
            CURSOR_MISMATCH, f"this cursor pages version {stored.version!r}, not {version!r}"
        )
