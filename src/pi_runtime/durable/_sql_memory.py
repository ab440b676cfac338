"""The long-term memory methods of `SqlStore` (`MemoryStore`), each one transaction."""

from __future__ import annotations

from typing import Unpack

from ..memory.facts import RECALL_WINDOW, Fact, FactOrigin
from . import _memory
from ._sql_base import SqlBase


class MemorySql(SqlBase):
    """`MemoryStore` over SQL: facts per scope."""

    def remember_fact(
        self,
        scope: str,
        text: str,
        **origin: Unpack[FactOrigin],
    ) -> tuple[Fact, bool]:
        return self._do(lambda tx: _memory.remember_fact(tx, scope, text, origin))

    def list_facts(self, scope: str, *, limit: int = RECALL_WINDOW) -> list[Fact]:
        return self._do(lambda tx: _memory.list_facts(tx, scope, limit), read=True)

    def forget_fact(self, scope: str, fact_id: str) -> bool:
        return self._do(lambda tx: _memory.forget_fact(tx, scope, fact_id))
