"""Sessions and their messages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, and_, bindparam, func, or_, select

from ..exceptions import UserError
from ..messages import Message, ToolResultMessage, message_to_dict
from . import _rows
from . import schema as t
from ._stmts import key
from ._tx import Tx, check_id, check_json, new_id
from .errors import Conflict, NotFound
from .records import SESSION_STATUSES, SessionRecord, StoredMessage

_INSERT_MESSAGE = t.messages.insert()
_ANSWERED = select(t.messages.c.tool_call_id).where(
    t.messages.c.session_id == bindparam(key("session_id")),
    t.messages.c.tool_call_id.in_(bindparam("calls", expanding=True)),
)
_HAS_RESULT = select(t.messages.c.seq).where(
    t.messages.c.session_id == bindparam(key("session_id")),
    t.messages.c.tool_call_id == bindparam(key("tool_call_id")),
)
_MESSAGES = (
    select(t.messages)
    .where(
        t.messages.c.session_id == bindparam(key("session_id")),
        t.messages.c.seq > bindparam("after"),
    )
    .order_by(t.messages.c.seq)
)


def create_session(tx: Tx, session_id: str | None, agent: dict[str, Any] | None) -> SessionRecord:
    sid = check_id("session id", session_id) if session_id is not None else new_id("session")
    if agent is not None:
        check_json("agent", agent)
    exists = tx.conn.execute(select(t.sessions.c.id).where(t.sessions.c.id == sid)).first()
    if exists is not None:
        raise Conflict(f"session {sid!r} already exists")
    tx.conn.execute(
        t.sessions.insert().values(
            id=sid,
            status="idle",
            version=1,
            message_count=0,
            agent=agent,
            created_at=tx.now,
            updated_at=tx.now,
        )
    )
    created = get_session(tx, sid)
    assert created is not None  # inserted just now
    return created


def get_session(tx: Tx, session_id: str) -> SessionRecord | None:
    row = tx.find(t.sessions, id=session_id)
    return None if row is None else _rows.session(row)


MAX_SESSION_PAGE = 500


def list_sessions(tx: Tx, *, prefix: str, limit: int, after: str | None) -> list[SessionRecord]:
    """A page of the sessions in the namespace `prefix`, newest first (ties: by id), after
    the session `after`. A session id holding a `/` after the prefix is in a namespace
    below it, someone else's (tenancy): it is left out."""
    if not 1 <= limit <= MAX_SESSION_PAGE:
        raise UserError(f"a page holds 1 to {MAX_SESSION_PAGE} sessions, not {limit}")

    def within(sid: str) -> bool:
        return sid.startswith(prefix) and "/" not in sid[len(prefix) :]

    c = t.sessions.c
    # Its ids start with `prefix` and hold no `/` after it: they are those in the
    # namespace of `prefix` that start with it (any `/` after the prefix would be their
    # last). One equality the namespace index serves, newest first: a page reads just
    # the page, where a test of the ids read every newer session of every other tenant.
    namespace = prefix[: prefix.rfind("/") + 1]
    query = select(t.sessions).where(t.namespace_of(c.id) == namespace)
    if prefix != namespace:
        # LIKE narrows (SQLite's ignores ASCII case: `a/B` would match `a/b…`); the
        # equal beginning decides
        query = query.where(
            c.id.startswith(prefix, autoescape=True), func.substr(c.id, 1, len(prefix)) == prefix
        )
    if after is not None:
        found = None
        if within(after):
            found = tx.conn.execute(select(c.created_at).where(c.id == after)).one_or_none()
        if found is None:
            raise NotFound(f"no session {after!r} to page after")
        query = query.where(
            or_(
                c.created_at < found.created_at,
                and_(c.created_at == found.created_at, c.id < after),
            )
        )
    query = query.order_by(c.created_at.desc(), c.id.desc()).limit(limit)
    return [_rows.session(row) for row in tx.conn.execute(query)]


def set_session_status(
    tx: Tx, session_id: str, status: str, expected_version: int
) -> SessionRecord:
    """Compare-and-set: change the status only if the session is still at that version."""
    if status not in SESSION_STATUSES:
        raise UserError(f"unknown session status {status!r}; one of {', '.join(SESSION_STATUSES)}")
    row = tx.lock_session(session_id)
    if row.version != expected_version:
        raise Conflict(
            f"session {session_id!r} is at version {row.version}, not {expected_version}"
        )
    tx.set_session_status(session_id, status)
    changed = get_session(tx, session_id)
    assert changed is not None  # locked above
    return changed


def append_messages(
    tx: Tx,
    session_id: str,
    messages: Sequence[Message],
    *,
    run_id: str | None = None,
    expect_seq: int | None = None,
    locked: Row[Any] | None = None,
    unanswered: bool = False,
    status: str | None = None,
) -> list[int]:
    """Store `messages` after the session's last one; return their `seq`s.

    `expect_seq` fences a stale writer: the first new message must land exactly there.
    A tool result for a call that already has one is refused: one call, one result.
    `locked`: the session's row, if the caller locked it in this transaction and wrote
    no messages since (saves locking it again). `unanswered`: the caller found, in this
    transaction and under that lock, that no call of these results has one yet.
    `status`: the session's new status, set with the count (one write of the session
    row, not two; set even when there are no messages).
    """
    row = locked if locked is not None else tx.lock_session(session_id)
    start = row.message_count
    if expect_seq is not None and expect_seq != start:
        raise Conflict(
            f"session {session_id!r} has {start} messages; the writer expected {expect_seq}"
        )
    if not messages:
        if status is not None:
            tx.set_session_status(session_id, status)
        return []
    results = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    twice = sorted(k for k, n in Counter(results).items() if n > 1)
    if twice:
        raise Conflict(f"tool call {twice[0]!r} is given two results")
    if results and not unanswered:
        answered = tx.conn.execute(
            _ANSWERED, {key("session_id"): session_id, "calls": results}
        ).first()
        if answered is not None:
            raise Conflict(f"tool call {answered.tool_call_id!r} already has a result")
    tx.conn.execute(
        _INSERT_MESSAGE,
        [
            {
                "session_id": session_id,
                "seq": start + i,
                "role": m.role,
                "tool_call_id": m.tool_call_id if isinstance(m, ToolResultMessage) else None,
                "run_id": run_id,
                "payload": message_to_dict(m),
                "created_at": tx.now,
            }
            for i, m in enumerate(messages)
        ],
    )
    count = start + len(messages)
    if status is not None:
        tx.set_session_status(session_id, status, message_count=count)
    else:
        tx.change(t.sessions, {"id": session_id}, message_count=count, updated_at=tx.now)
    return list(range(start, count))


def has_result(tx: Tx, session_id: str, tool_call_id: str) -> bool:
    params = {key("session_id"): session_id, key("tool_call_id"): tool_call_id}
    return tx.conn.execute(_HAS_RESULT, params).first() is not None


def load_messages(
    tx: Tx, session_id: str, after_seq: int | None = None, *, known: bool = False
) -> list[StoredMessage]:
    """The session's messages after `after_seq`. `known`: the caller knows the session
    exists (a run of it was read), so it is not looked up (NotFound otherwise)."""
    if not known and get_session(tx, session_id) is None:
        raise NotFound(f"no session {session_id!r}")
    params = {key("session_id"): session_id, "after": -1 if after_seq is None else after_seq}
    return [_rows.message(row) for row in tx.conn.execute(_MESSAGES, params)]
