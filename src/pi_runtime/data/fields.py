"""The fields of the data plane's two writes, declared once and checked once.

`NewSnapshot` and `NewReference` are the keyword arguments of `DataStore.put_snapshot`
and `DataStore.create_reference`; every store takes them as `**fields` and hands them to
`new_snapshot` / `new_reference`, which refuse bad values with a `UserError` (before
anything is stored) and build the records. The store adds only what is its own: the new
id, the time, and whether the snapshot a reference names exists.

No `from __future__ import annotations` here: `NotRequired` must be seen at run time, so
that the keys a caller may pass are read off the classes themselves.
"""

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from ..exceptions import UserError
from ..messages import check_keywords, check_name, repair_text, repair_value
from .storage import PageRecord, ReferenceRecord, SnapshotRecord, pages_digest

__all__ = [
    "NewReference",
    "NewSnapshot",
    "check_json",
    "check_name",
    "new_reference",
    "new_snapshot",
]


class NewSnapshot(TypedDict):
    """What `put_snapshot` stores: `pages` whole, with the rows each holds if known."""

    owner: str
    source: str
    pages: Sequence[str]
    page_rows: NotRequired[Sequence[int] | None]
    locator: NotRequired[dict[str, Any] | None]
    version: NotRequired[str | None]
    meta: NotRequired[dict[str, Any] | None]
    expires_at: NotRequired[datetime | None]


class NewReference(TypedDict):
    """What `create_reference` stores: a handle on an existing snapshot."""

    owner: str
    snapshot_id: str
    kind: str
    meta: NotRequired[dict[str, Any] | None]
    expires_at: NotRequired[datetime | None]


def check_json(what: str, value: Any) -> Any:
    """`value` if it is plain JSON (no NaN or infinities, which PostgreSQL refuses)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{what} must be plain JSON: {exc}") from exc
    return value


def new_snapshot(
    fields: Mapping[str, object], *, id: str, created_at: datetime
) -> tuple[SnapshotRecord, list[PageRecord]]:
    """The snapshot `fields` describe, stored under `id`, and its pages in order."""
    check_keywords("put_snapshot", NewSnapshot, fields)
    owner = check_name("owner", fields["owner"])
    source = check_name("source", fields["source"])
    pages = fields["pages"]
    if isinstance(pages, str) or not isinstance(pages, Sequence):
        raise UserError(f"snapshot pages must be a list of strings, not {type(pages).__name__}")
    if any(not isinstance(body, str) for body in pages):
        raise UserError("snapshot pages must be strings")
    page_rows = fields.get("page_rows")
    if page_rows is not None:
        if isinstance(page_rows, str) or not isinstance(page_rows, Sequence):
            raise UserError(f"page_rows must be a list of counts, not {type(page_rows).__name__}")
        if len(page_rows) != len(pages):
            raise UserError(f"page_rows has {len(page_rows)} counts for {len(pages)} pages")
        if any(type(rows) is not int or rows < 0 for rows in page_rows):
            raise UserError("page_rows must be non-negative integers")
    version = fields.get("version")
    if version is not None and not isinstance(version, str):
        raise UserError(f"snapshot version must be a string, not {type(version).__name__}")
    if version is not None:
        # Often a model's text: a lone surrogate is repaired, as no store could write it.
        version = repair_text(version)
    snapshot = SnapshotRecord(
        id=id,
        owner=owner,
        source=source,
        locator=_json_object("snapshot locator", fields.get("locator")),
        version=version,
        digest=pages_digest(pages),
        page_count=len(pages),
        row_count=None if page_rows is None else sum(page_rows),
        meta=_json_object("snapshot meta", fields.get("meta")),
        created_at=created_at,
        expires_at=_expiry(fields.get("expires_at")),
    )
    records = [
        PageRecord(
            snapshot_id=id,
            seq=seq,
            body=body,
            row_count=None if page_rows is None else page_rows[seq],
        )
        for seq, body in enumerate(pages)
    ]
    return snapshot, records


def new_reference(
    fields: Mapping[str, object], *, id: str, created_at: datetime
) -> ReferenceRecord:
    """The reference `fields` describe, under `id` (the store checks its snapshot exists)."""
    check_keywords("create_reference", NewReference, fields)
    owner = check_name("owner", fields["owner"])
    kind = check_name("reference kind", fields["kind"])
    snapshot_id = fields["snapshot_id"]
    if not isinstance(snapshot_id, str):
        raise UserError(f"snapshot_id must be a string, not {type(snapshot_id).__name__}")
    return ReferenceRecord(
        id=id,
        owner=owner,
        snapshot_id=snapshot_id,
        kind=kind,
        meta=_json_object("reference meta", fields.get("meta")),
        created_at=created_at,
        expires_at=_expiry(fields.get("expires_at")),
    )


def _json_object(what: str, value: object) -> dict[str, Any] | None:
    """A copy of `value`, as JSON gives it back (what the SQL stores return too), so that
    a caller changing its dict later changes nothing stored; lone surrogates repaired."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UserError(f"{what} must be a JSON object or None, not {type(value).__name__}")
    check_json(what, value)
    copy: dict[str, Any] = repair_value(json.loads(json.dumps(value)))
    return copy


def _expiry(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise UserError(f"expires_at must be a datetime or None, not {type(value).__name__}")
    if value.tzinfo is None:
        raise UserError("expires_at must be timezone-aware")
    return value
