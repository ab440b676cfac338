"""The durable store on SQLite and PostgreSQL: migrations, URLs, sessions, messages, runs,
jobs and the data plane. Delivery and concurrency live in test_store_delivery.py and
test_store_concurrency.py."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime.durable import (
    MIGRATIONS,
    Conflict,
    LeaseLost,
    NotFound,
    Store,
    _jobs,
    open_store,
    schema,
)
from pi_runtime.exceptions import UserError
from pi_runtime.messages import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


def call(call_id: str, name: str = "compute") -> AssistantMessage:
    return AssistantMessage(
        content=(ToolCall(id=call_id, name=name, raw="{}", arguments={}),),
        finish_reason="tool_calls",
    )


def result(call_id: str, content: str = "ok", name: str = "compute") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, name=name, content=content)


def count_rows(url: str, table: sa.Table, *where: Any) -> int:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            query = sa.select(sa.func.count()).select_from(table).where(*where)
            return int(conn.execute(query).scalar_one())
    finally:
        engine.dispose()


# Migrations


def test_migrations_are_recorded_once_and_reapplying_is_a_no_op(
    store: Store, store_factory: Callable[..., Store], db_url: str
) -> None:
    names = [m.name for m in MIGRATIONS]
    assert store.migrations() == names
    assert names == [
        "0001_initial", "0002_approvals", "0003_memory_facts", "0004_sessions_created",
        "0005_sessions_namespace",
    ]  # fmt: skip
    assert store.migrate() == []
    again = store_factory()
    assert again.migrations() == names
    assert count_rows(db_url, schema.schema_migrations) == len(names)


def test_concurrent_migrators_apply_each_migration_once(db_url: str) -> None:
    barrier = threading.Barrier(6)
    failures: list[BaseException] = []
    stores: list[Store] = []

    def migrate() -> None:
        barrier.wait()
        try:
            stores.append(open_store(db_url))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for one in stores:
        one.close()
    assert failures == []
    assert count_rows(db_url, schema.schema_migrations) == len(MIGRATIONS)


def test_migrated_database_matches_the_declared_schema(store: Store, db_url: str) -> None:
    engine = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        inspector = sa.inspect(engine)
        assert set(inspector.get_table_names()) == set(schema.metadata.tables)
        for name, table in schema.metadata.tables.items():
            columns = {c["name"]: c["nullable"] for c in inspector.get_columns(name)}
            declared = {c.name: c.nullable for c in table.columns}
            assert columns == declared, name
        uniques = {u["name"] for u in inspector.get_unique_constraints("messages")}
        assert "uq_messages_tool_result" in uniques
        assert "uq_outbox_job_kind" in {
            u["name"] for u in inspector.get_unique_constraints("outbox")
        }
    finally:
        engine.dispose()


def test_a_database_migrated_by_a_newer_pi_is_refused(
    store: Store, db_url: str, clock: FakeClock
) -> None:
    engine = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(
            schema.schema_migrations.insert().values(
                name="9999_from_the_future", applied_at=clock.now
            )
        )
    engine.dispose()
    with pytest.raises(UserError, match=r"newer Pi.*9999_from_the_future"):
        open_store(db_url)


# URLs and connection errors


@pytest.mark.parametrize(
    "url",
    ["", "   ", "not a url", "mysql://u@localhost/db", "sqlite://", "sqlite:///:memory:",
     "postgresql://u@localhost"],
)  # fmt: skip
def test_bad_urls_are_user_errors_saying_what_works(url: str) -> None:
    with pytest.raises(UserError, match=r"sqlite:///PATH|database file|names no database"):
        open_store(url)


def test_unreachable_postgres_names_the_url_without_its_password() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        url = f"postgresql://pi:s3cret-pw@127.0.0.1:{port}/pi"
        with pytest.raises(UserError) as caught:
            open_store(url, connect_timeout_s=2)
    message = str(caught.value)
    assert f"127.0.0.1:{port}/pi" in message
    assert "***" in message
    assert "s3cret-pw" not in message


def test_bad_url_message_never_shows_the_password() -> None:
    with pytest.raises(UserError) as caught:
        open_store("mysql://pi:s3cret-pw@localhost/db")
    assert "s3cret-pw" not in str(caught.value)


def test_missing_psycopg_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(UserError, match=r"pip install 'psycopg\[binary\]"):
        open_store("postgresql://pi@127.0.0.1:1/pi")


def test_a_file_that_is_not_a_database_is_a_user_error(tmp_path: Any) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are not the tables you are looking for\n" * 100)
    with pytest.raises(UserError, match="cannot open the database"):
        open_store(f"sqlite:///{path}")


def test_sqlite_store_creates_its_folder(tmp_path: Any) -> None:
    opened = open_store(f"sqlite:///{tmp_path / 'deep' / 'er' / 'pi.db'}")
    try:
        assert opened.migrations() == [m.name for m in MIGRATIONS]
    finally:
        opened.close()


# Sessions and messages


def test_session_round_trip(store: Store, clock: FakeClock) -> None:
    before = clock.now
    created = store.create_session("chat-1", agent={"model": "scripted:x.json", "tools": ["m:T"]})
    assert created.status == "idle"
    assert created.message_count == 0
    assert before < created.created_at == created.updated_at <= clock.now
    assert store.get_session("chat-1") == created
    assert store.get_session("nope") is None
    generated = store.create_session()
    assert generated.id.startswith("session-")
    with pytest.raises(Conflict, match="already exists"):
        store.create_session("chat-1")


@pytest.mark.parametrize("bad", ["", " padded ", "x" * 201, "new\nline"])
def test_bad_session_ids_are_user_errors(store: Store, bad: str) -> None:
    with pytest.raises(UserError, match="session id"):
        store.create_session(bad)


def test_messages_round_trip_in_order(store: Store) -> None:
    session = store.create_session()
    conversation = [
        UserMessage(content='北京天气？ "quoted" \\ back'),
        AssistantMessage(
            content=(
                ThinkingBlock(text="hmm", signature="sig"),
                TextBlock(text="Looking it up.", phase="commentary"),
                ToolCall(
                    id="c1", name="weather", raw='{"city":"北京"}', arguments={"city": "北京"}
                ),
            ),
            finish_reason="tool_calls",
            usage=Usage(input_tokens=10, output_tokens=3),
            model="m",
        ),
        result("c1", "晴", name="weather"),
        AssistantMessage(content=(TextBlock(text="晴。"),)),
    ]
    assert store.append_messages(session.id, conversation[:2]) == [0, 1]
    assert store.append_messages(session.id, conversation[2:]) == [2, 3]
    stored = store.load_messages(session.id)
    assert [m.message for m in stored] == conversation
    assert [m.seq for m in stored] == [0, 1, 2, 3]
    assert [m.message for m in store.load_messages(session.id, after_seq=1)] == conversation[2:]
    session_now = store.get_session(session.id)
    assert session_now is not None and session_now.message_count == 4
    with pytest.raises(NotFound):
        store.load_messages("missing")
    with pytest.raises(NotFound):
        store.append_messages("missing", [UserMessage(content="x")])


def test_a_tool_call_can_never_get_two_results(store: Store, db_url: str) -> None:
    session = store.create_session()
    store.append_messages(session.id, [call("c1"), result("c1")])
    with pytest.raises(Conflict, match="'c1' already has a result"):
        store.append_messages(session.id, [result("c1", "again")])
    with pytest.raises(Conflict, match="two results"):
        store.append_messages(session.id, [call("c2"), result("c2"), result("c2")])
    assert len(store.load_messages(session.id)) == 2
    # The database itself refuses, whatever code writes the row.
    engine = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(
                schema.messages.insert().values(
                    session_id=session.id, seq=7, role="tool", tool_call_id="c1",
                    payload={}, created_at=session.created_at,
                )
            )  # fmt: skip
    finally:
        engine.dispose()


def test_expect_seq_fences_a_stale_writer(store: Store) -> None:
    session = store.create_session()
    store.append_messages(session.id, [UserMessage(content="a")], expect_seq=0)
    with pytest.raises(Conflict, match="has 1 messages; the writer expected 0"):
        store.append_messages(session.id, [UserMessage(content="b")], expect_seq=0)
    assert [m.seq for m in store.load_messages(session.id)] == [0]


def test_session_status_is_compare_and_set(store: Store) -> None:
    session = store.create_session()
    moved = store.set_session_status(session.id, "completed", expected_version=session.version)
    assert (moved.status, moved.version) == ("completed", session.version + 1)
    with pytest.raises(Conflict, match="version"):
        store.set_session_status(session.id, "idle", expected_version=session.version)
    with pytest.raises(UserError, match="unknown session status"):
        store.set_session_status(session.id, "napping", expected_version=moved.version)
    with pytest.raises(NotFound):
        store.set_session_status("missing", "idle", expected_version=1)
    current = store.get_session(session.id)
    assert current is not None and current.status == "completed"


# Runs


def test_user_run_lifecycle(store: Store) -> None:
    session = store.create_session()
    run = store.create_run(session.id, input={"prompt": "hi"})
    assert (run.kind, run.status, run.attempts) == ("user", "queued", 0)
    assert store.get_session(session.id).status == "queued"  # type: ignore[union-attr]
    claimed = store.claim_run("worker-a", lease_s=30)
    assert claimed is not None and claimed.id == run.id
    assert (claimed.status, claimed.lease_owner, claimed.attempts) == ("running", "worker-a", 1)
    assert store.get_session(session.id).status == "running"  # type: ignore[union-attr]
    assert store.claim_run("worker-b") is None
    finished = store.finish_run(
        run.id, owner="worker-a", status="completed", stop_reason="final_answer",
        result={"status": "completed", "output": "hello"},
        messages=[UserMessage(content="hi"), AssistantMessage(content=(TextBlock(text="hello"),))],
    )  # fmt: skip
    assert finished.continuation is None
    assert (finished.run.status, finished.run.stop_reason) == ("completed", "final_answer")
    assert finished.run.result == {"status": "completed", "output": "hello"}
    assert finished.run.lease_owner is None
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]
    assert [m.run_id for m in store.load_messages(session.id)] == [run.id, run.id]
    assert store.list_runs(session.id) == [finished.run]


def test_a_busy_session_refuses_a_second_run(store: Store) -> None:
    session = store.create_session()
    store.create_run(session.id, owner="cli", lease_s=30)
    with pytest.raises(Conflict, match="is running"):
        store.create_run(session.id)
    with pytest.raises(NotFound):
        store.create_run("missing")


def test_finishing_a_run_one_does_not_hold_writes_nothing(store: Store) -> None:
    session = store.create_session()
    run = store.create_run(session.id, owner="a", lease_s=30)
    with pytest.raises(LeaseLost):
        store.finish_run(
            run.id, owner="b", status="completed", stop_reason="final_answer",
            messages=[UserMessage(content="sneaky")],
        )  # fmt: skip
    assert store.load_messages(session.id) == []
    assert store.get_run(run.id).status == "running"  # type: ignore[union-attr]


def test_an_expired_run_lease_is_reclaimed_and_the_old_holder_fenced(
    store: Store, clock: FakeClock
) -> None:
    session = store.create_session()
    run = store.create_run(session.id, owner="a", lease_s=10)
    clock.advance(5)
    store.renew_run_lease(run.id, "a", lease_s=10)
    clock.advance(9)
    assert store.claim_run("b") is None  # renewed: still live
    clock.advance(2)
    taken = store.claim_run("b", lease_s=10)
    assert taken is not None and (taken.id, taken.lease_owner, taken.attempts) == (run.id, "b", 2)
    with pytest.raises(LeaseLost):
        store.renew_run_lease(run.id, "a")
    with pytest.raises(LeaseLost):
        store.finish_run(run.id, owner="a", status="completed", stop_reason="final_answer")
    done = store.finish_run(run.id, owner="b", status="completed", stop_reason="final_answer")
    assert done.run.status == "completed"


def test_a_run_interrupted_too_often_fails(store: Store, clock: FakeClock) -> None:
    session = store.create_session()
    run = store.create_run(session.id, owner="a", lease_s=10)
    for owner in ("b", "c"):
        clock.advance(11)
        assert store.claim_run(owner, lease_s=10, max_attempts=3) is not None
    clock.advance(11)
    assert store.claim_run("d", lease_s=10, max_attempts=3) is None
    failed = store.get_run(run.id)
    assert failed is not None and (failed.status, failed.stop_reason) == (
        "failed",
        "internal_error",
    )
    assert store.get_session(session.id).status == "failed"  # type: ignore[union-attr]


def test_a_run_ending_awaiting_must_wait_for_something(store: Store) -> None:
    session = store.create_session()
    run = store.create_run(session.id, owner="a")
    with pytest.raises(UserError, match="at least one job"):
        store.finish_run(
            run.id, owner="a", status="awaiting", stop_reason="awaiting_tool",
            messages=[UserMessage(content="x")],
        )  # fmt: skip
    assert store.load_messages(session.id) == []  # the whole finish rolled back
    assert store.get_run(run.id).status == "running"  # type: ignore[union-attr]
    with pytest.raises(UserError, match="finishes as one of"):
        store.finish_run(run.id, owner="a", status="queued", stop_reason=None)


# Jobs


def test_enqueue_is_idempotent_per_tool_call(store: Store) -> None:
    session = store.create_session()
    first = store.enqueue_job("compute", {"n": 1}, session_id=session.id, tool_call_id="c1")
    again = store.enqueue_job("compute", {"n": 1}, session_id=session.id, tool_call_id="c1")
    assert again.id == first.id
    with pytest.raises(Conflict, match="differently"):
        store.enqueue_job("compute", {"n": 2}, session_id=session.id, tool_call_id="c1")
    assert [j.id for j in store.list_jobs(session.id)] == [first.id]
    loose = store.enqueue_job("compute", {"n": 1})
    assert loose.id != first.id and loose.session_id is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"arguments": [1, 2]}, "JSON object"),
        ({"arguments": {"x": float("nan")}}, "plain JSON"),
        ({"arguments": {"x": object()}}, "plain JSON"),
        ({"max_attempts": 0}, "at least 1"),
        ({"tool": ""}, "tool"),
        ({"tool_call_id": "c1"}, "both session_id and tool_call_id"),
    ],
)
def test_bad_jobs_are_user_errors(store: Store, kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"tool": "compute", "arguments": {}} | kwargs
    with pytest.raises(UserError, match=match):
        store.enqueue_job(args.pop("tool"), args.pop("arguments"), **args)


def test_job_lifecycle_with_checkpoints(store: Store, db_url: str) -> None:
    job = store.enqueue_job("compute", {"segments": 3})
    claimed = store.claim_job("w1", lease_s=30)
    assert claimed is not None and (claimed.id, claimed.status, claimed.attempts) == (
        job.id, "running", 1,
    )  # fmt: skip
    assert store.claim_job("w2") is None
    store.checkpoint_job(job.id, "w1", {"segment": 1, "window": [1.5, 2.5]})
    assert store.get_job(job.id).checkpoint == {"segment": 1, "window": [1.5, 2.5]}  # type: ignore[union-attr]
    done = store.complete_job(job.id, "w1", {"crossings": 4})
    assert (done.status, done.result, done.lease_owner, done.done) == (
        "succeeded", {"crossings": 4}, None, True,
    )  # fmt: skip
    assert count_rows(db_url, schema.outbox, schema.outbox.c.job_id == job.id) == 1
    with pytest.raises(LeaseLost):
        store.complete_job(job.id, "w1", {"crossings": 5})
    assert count_rows(db_url, schema.outbox, schema.outbox.c.job_id == job.id) == 1


def test_completion_and_its_outbox_event_commit_together(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = store.enqueue_job("compute", {})
    store.claim_job("w1")

    def broken(*_: Any) -> Any:
        raise RuntimeError("the outbox write failed")

    monkeypatch.setattr(_jobs, "_event", broken)
    with pytest.raises(RuntimeError, match="outbox write failed"):
        store.complete_job(job.id, "w1", {"ok": True})
    still = store.get_job(job.id)
    assert still is not None and (still.status, still.result) == ("running", None)
    assert count_rows(db_url, schema.outbox) == 0
    monkeypatch.undo()
    assert store.complete_job(job.id, "w1", {"ok": True}).status == "succeeded"
    assert count_rows(db_url, schema.outbox) == 1


def test_an_expired_job_lease_is_reclaimable_by_another_owner_while_a_live_one_is_not(
    store: Store, clock: FakeClock
) -> None:
    job = store.enqueue_job("compute", {})
    store.claim_job("a", lease_s=10)
    clock.advance(9)
    assert store.claim_job("b") is None
    store.checkpoint_job(job.id, "a", {"done": 2}, lease_s=10)  # renews too
    clock.advance(9)
    assert store.claim_job("b") is None
    clock.advance(2)
    taken = store.claim_job("b", lease_s=10)
    assert taken is not None and (taken.lease_owner, taken.attempts) == ("b", 2)
    assert taken.checkpoint == {"done": 2}  # resumes from the last committed progress
    for stale in (
        lambda: store.renew_job_lease(job.id, "a"),
        lambda: store.checkpoint_job(job.id, "a", {"done": 3}),
        lambda: store.complete_job(job.id, "a", 1),
        lambda: store.fail_job(job.id, "a", {"kind": "x", "message": "y"}),
    ):
        with pytest.raises(LeaseLost):
            stale()
    assert store.get_job(job.id).checkpoint == {"done": 2}  # type: ignore[union-attr]


def test_an_interrupted_job_that_is_not_retry_safe_ends_outcome_unknown(
    store: Store, clock: FakeClock
) -> None:
    job = store.enqueue_job("send_payment", {"amount": 5}, retry_safe=False)
    store.claim_job("a", lease_s=10)
    clock.advance(11)
    assert store.claim_job("b") is None  # never silently retried
    ended = store.get_job(job.id)
    assert ended is not None and ended.status == "outcome_unknown"
    assert ended.error is not None and ended.error["kind"] == "outcome_unknown"
    assert ended.attempts == 1


def test_a_job_interrupted_on_every_attempt_fails(store: Store, clock: FakeClock) -> None:
    job = store.enqueue_job("compute", {}, max_attempts=2)
    store.claim_job("a", lease_s=10)
    clock.advance(11)
    assert store.claim_job("b", lease_s=10) is not None
    clock.advance(11)
    assert store.claim_job("c") is None
    ended = store.get_job(job.id)
    assert ended is not None and ended.status == "failed"
    assert ended.error == {
        "kind": "attempts_exhausted", "message": "the job was interrupted 2 times", "hint": "",
    }  # fmt: skip


def test_fail_job_records_the_error_and_outcome_unknown_when_told(
    store: Store, db_url: str
) -> None:
    first, second = store.enqueue_job("a", {}), store.enqueue_job("b", {})
    store.claim_job("w")
    store.claim_job("w")
    failed = store.fail_job(first.id, "w", {"kind": "not_found", "message": "no such symbol"})
    unknown = store.fail_job(
        second.id, "w", {"kind": "timeout", "message": "no reply"}, outcome_unknown=True
    )
    assert (failed.status, unknown.status) == ("failed", "outcome_unknown")
    assert failed.error == {"kind": "not_found", "message": "no such symbol"}
    assert count_rows(db_url, schema.outbox, schema.outbox.c.kind == "failed") == 2
    third = store.enqueue_job("c", {})
    store.claim_job("w")
    with pytest.raises(UserError, match="kind"):
        store.fail_job(third.id, "w", {"message": "no kind"})


# Data plane


def test_snapshots_pages_and_references_round_trip(store: Store, clock: FakeClock) -> None:
    pages = ["QRP1|series|page=0\n0,1,2", "QRP1|series|page=1\n3,4,5 — 北京", ""]
    snap = store.put_snapshot(
        owner="session-1", source="synthetic:klines", pages=pages, page_rows=[1, 1, 0],
        locator={"symbol": "BTC", "interval": "1h"}, version="v7", meta={"columns": ["c"]},
    )  # fmt: skip
    assert (snap.page_count, snap.row_count, snap.version) == (3, 2, "v7")
    assert len(snap.digest) == 64
    assert store.get_snapshot(snap.id) == snap
    assert [store.get_page(snap.id, i).body for i in range(3)] == pages  # type: ignore[union-attr]
    assert store.get_page(snap.id, 3) is None
    before = clock.now
    ref = store.create_reference(owner="session-1", snapshot_id=snap.id, kind="klines")
    assert (ref.owner, ref.snapshot_id) == ("session-1", snap.id)
    assert before < ref.created_at <= clock.now
    assert store.get_reference(ref.id) == ref
    assert store.get_reference("ref-missing") is None
    with pytest.raises(NotFound):
        store.create_reference(owner="o", snapshot_id="snap-missing", kind="k")
    with pytest.raises(UserError, match="page_rows"):
        store.put_snapshot(owner="o", source="s", pages=["a"], page_rows=[1, 2])


def test_the_digest_tells_page_boundaries_apart(store: Store) -> None:
    one = store.put_snapshot(owner="o", source="s", pages=["ab", "c"])
    two = store.put_snapshot(owner="o", source="s", pages=["a", "bc"])
    assert one.digest != two.digest


def test_purge_removes_only_what_expired(store: Store, clock: FakeClock) -> None:
    from datetime import timedelta

    soon = clock.now + timedelta(seconds=60)
    short = store.put_snapshot(owner="o", source="s", pages=["x"], expires_at=soon)
    lasting = store.put_snapshot(owner="o", source="s", pages=["y"])
    short_ref = store.create_reference(owner="o", snapshot_id=lasting.id, kind="k", expires_at=soon)
    kept_ref = store.create_reference(owner="o", snapshot_id=lasting.id, kind="k")
    assert store.purge_expired() == 0
    clock.advance(61)
    assert store.purge_expired() == 2
    assert store.get_snapshot(short.id) is None and store.get_page(short.id, 0) is None
    assert store.get_reference(short_ref.id) is None
    assert store.get_snapshot(lasting.id) is not None
    assert store.get_reference(kept_ref.id) is not None


def test_a_signing_key_is_shared_by_every_store_and_stable(
    store: Store, store_factory: Callable[..., Store]
) -> None:
    key = store.signing_key("cursors")
    assert len(key) == 64
    assert store_factory().signing_key("cursors") == key == store.signing_key("cursors")
    assert store.signing_key("other") != key
