"""The data-plane methods of `SqlStore` (`DataStore`), each one transaction."""

from __future__ import annotations

from typing import Unpack

from ..data.fields import NewReference, NewSnapshot
from . import _data
from ._sql_base import SqlBase
from .records import PageRecord, ReferenceRecord, SnapshotRecord


class DataSql(SqlBase):
    """`DataStore` over SQL, and the purge of what expired."""

    def put_snapshot(self, **fields: Unpack[NewSnapshot]) -> SnapshotRecord:
        return self._do(lambda tx: _data.put_snapshot(tx, fields))

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord | None:
        return self._do(lambda tx: _data.get_snapshot(tx, snapshot_id), read=True)

    def get_page(self, snapshot_id: str, seq: int) -> PageRecord | None:
        return self._do(lambda tx: _data.get_page(tx, snapshot_id, seq), read=True)

    def create_reference(self, **fields: Unpack[NewReference]) -> ReferenceRecord:
        return self._do(lambda tx: _data.create_reference(tx, fields))

    def get_reference(self, ref_id: str) -> ReferenceRecord | None:
        return self._do(lambda tx: _data.get_reference(tx, ref_id), read=True)

    def purge_expired(self) -> int:
        return self._do(_data.purge_expired)

    def signing_key(self, name: str) -> str:
        return self._do(lambda tx: _data.signing_key(tx, name))
