"""The data-plane methods of `SqlStore` (`DataStore`), each one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from . import _data
from ._sql_base import SqlBase
from .records import PageRecord, ReferenceRecord, SnapshotRecord


class DataSql(SqlBase):
    """`DataStore` over SQL, and the purge of what expired."""

    def put_snapshot(
        self,
        *,
        owner: str,
        source: str,
        pages: Sequence[str],
        page_rows: Sequence[int] | None = None,
        locator: dict[str, Any] | None = None,
        version: str | None = None,
        meta: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> SnapshotRecord:
        return self._do(
            lambda tx: _data.put_snapshot(
                tx,
                owner=owner,
                source=source,
                pages=pages,
                page_rows=page_rows,
                locator=locator,
                version=version,
                meta=meta,
                expires_at=expires_at,
            )
        )

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord | None:
        return self._do(lambda tx: _data.get_snapshot(tx, snapshot_id), read=True)

    def get_page(self, snapshot_id: str, seq: int) -> PageRecord | None:
        return self._do(lambda tx: _data.get_page(tx, snapshot_id, seq), read=True)

    def create_reference(
        self,
        *,
        owner: str,
        snapshot_id: str,
        kind: str,
        meta: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> ReferenceRecord:
        return self._do(
            lambda tx: _data.create_reference(
                tx,
                owner=owner,
                snapshot_id=snapshot_id,
                kind=kind,
                meta=meta,
                expires_at=expires_at,
            )
        )

    def get_reference(self, ref_id: str) -> ReferenceRecord | None:
        return self._do(lambda tx: _data.get_reference(tx, ref_id), read=True)

    def purge_expired(self) -> int:
        return self._do(_data.purge_expired)

    def signing_key(self, name: str) -> str:
        return self._do(lambda tx: _data.signing_key(tx, name))
