"""The data plane's storage: snapshots stored in pages, references to them, signing keys.

The store keeps and returns these records; the rules of reading them (owner checks,
expiry, stable error codes) belong to the data layer, which sees the records whole.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from ..data.storage import pages_digest
from ..exceptions import UserError
from . import _rows
from . import schema as t
from ._tx import Tx, check_id, check_json, new_id
from .errors import NotFound
from .records import PageRecord, ReferenceRecord, SnapshotRecord


def put_snapshot(
    tx: Tx,
    *,
    owner: str,
    source: str,
    pages: Sequence[str],
    page_rows: Sequence[int] | None,
    locator: dict[str, Any] | None,
    version: str | None,
    meta: dict[str, Any] | None,
    expires_at: datetime | None,
) -> SnapshotRecord:
    check_id("owner", owner)
    check_id("source", source)
    if any(not isinstance(body, str) for body in pages):
        raise UserError("snapshot pages must be strings")
    if page_rows is not None and len(page_rows) != len(pages):
        raise UserError(f"page_rows has {len(page_rows)} counts for {len(pages)} pages")
    check_json("snapshot locator", locator)
    check_json("snapshot meta", meta)
    snapshot_id = new_id("snap")
    tx.conn.execute(
        t.snapshots.insert().values(
            id=snapshot_id,
            owner=owner,
            source=source,
            locator=locator,
            version=version,
            digest=pages_digest(pages),
            page_count=len(pages),
            row_count=None if page_rows is None else sum(page_rows),
            meta=meta,
            created_at=tx.now,
            expires_at=expires_at,
        )
    )
    if pages:
        tx.conn.execute(
            t.pages.insert(),
            [
                {
                    "snapshot_id": snapshot_id,
                    "seq": i,
                    "body": body,
                    "row_count": None if page_rows is None else page_rows[i],
                }
                for i, body in enumerate(pages)
            ],
        )
    found = get_snapshot(tx, snapshot_id)
    assert found is not None
    return found


def get_snapshot(tx: Tx, snapshot_id: str) -> SnapshotRecord | None:
    query = select(t.snapshots).where(t.snapshots.c.id == snapshot_id)
    row = tx.conn.execute(query).one_or_none()
    return None if row is None else _rows.snapshot(row)


def get_page(tx: Tx, snapshot_id: str, seq: int) -> PageRecord | None:
    query = select(t.pages).where(t.pages.c.snapshot_id == snapshot_id, t.pages.c.seq == seq)
    row = tx.conn.execute(query).one_or_none()
    return None if row is None else _rows.page(row)


def create_reference(
    tx: Tx,
    *,
    owner: str,
    snapshot_id: str,
    kind: str,
    meta: dict[str, Any] | None,
    expires_at: datetime | None,
) -> ReferenceRecord:
    check_id("owner", owner)
    check_id("reference kind", kind)
    check_json("reference meta", meta)
    if get_snapshot(tx, snapshot_id) is None:
        raise NotFound(f"no snapshot {snapshot_id!r}")
    ref_id = new_id("ref")
    tx.conn.execute(
        t.resource_refs.insert().values(
            id=ref_id,
            owner=owner,
            snapshot_id=snapshot_id,
            kind=kind,
            meta=meta,
            created_at=tx.now,
            expires_at=expires_at,
        )
    )
    found = get_reference(tx, ref_id)
    assert found is not None
    return found


def get_reference(tx: Tx, ref_id: str) -> ReferenceRecord | None:
    query = select(t.resource_refs).where(t.resource_refs.c.id == ref_id)
    row = tx.conn.execute(query).one_or_none()
    return None if row is None else _rows.reference(row)


def purge_expired(tx: Tx) -> int:
    """Delete references and snapshots past their expiry; return how many rows went."""
    gone = tx.conn.execute(
        delete(t.resource_refs).where(t.resource_refs.c.expires_at < tx.now)
    ).rowcount
    expired = select(t.snapshots.c.id).where(t.snapshots.c.expires_at < tx.now)
    tx.conn.execute(delete(t.resource_refs).where(t.resource_refs.c.snapshot_id.in_(expired)))
    tx.conn.execute(delete(t.pages).where(t.pages.c.snapshot_id.in_(expired)))
    gone += tx.conn.execute(delete(t.snapshots).where(t.snapshots.c.expires_at < tx.now)).rowcount
    return int(gone)


def signing_key(tx: Tx, name: str) -> str:
    """The named secret every worker shares, created (64 hex characters) on first use."""
    check_id("key name", name)
    query = select(t.signing_keys.c.secret).where(t.signing_keys.c.name == name)
    row = tx.conn.execute(query).first()
    if row is not None:
        return str(row.secret)
    try:
        with tx.conn.begin_nested():
            tx.conn.execute(
                t.signing_keys.insert().values(
                    name=name, secret=secrets.token_hex(32), created_at=tx.now
                )
            )
    except IntegrityError:
        pass  # another process created it first: use theirs
    return str(tx.conn.execute(query).scalar_one())
