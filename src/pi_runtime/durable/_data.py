"""The data plane's storage: snapshots stored in pages, references to them, signing keys.

The store keeps and returns these records; the rules of reading them (owner checks,
expiry, stable error codes) belong to the data layer, which sees the records whole.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from ..data.fields import NewReference, NewSnapshot, new_reference, new_snapshot
from . import _rows
from . import schema as t
from ._tx import Tx, check_id, new_id
from .errors import NotFound
from .records import PageRecord, ReferenceRecord, SnapshotRecord


def put_snapshot(tx: Tx, fields: NewSnapshot) -> SnapshotRecord:
    snapshot, pages = new_snapshot(fields, id=new_id("snap"), created_at=tx.now)
    tx.conn.execute(t.snapshots.insert().values(**asdict(snapshot)))
    if pages:
        tx.conn.execute(t.pages.insert(), [asdict(page) for page in pages])
    found = get_snapshot(tx, snapshot.id)
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


def create_reference(tx: Tx, fields: NewReference) -> ReferenceRecord:
    reference = new_reference(fields, id=new_id("ref"), created_at=tx.now)
    if get_snapshot(tx, reference.snapshot_id) is None:
        raise NotFound(f"no snapshot {reference.snapshot_id!r}")
    tx.conn.execute(t.resource_refs.insert().values(**asdict(reference)))
    found = get_reference(tx, reference.id)
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
