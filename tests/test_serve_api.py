"""`pi serve`'s HTTP API on a real uvicorn (on a thread of the test, 127.0.0.1, an
ephemeral port) called with a real HTTP client: JSON and AG-UI runs, approvals, many runs
at once, a client leaving mid-stream, tenancy, and every kind of bad input."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from durable_support import *  # noqa: F403  (db_url: SQLite and PostgreSQL)
from pi_runtime.durable import open_store
from pi_runtime.exceptions import UserError
from pi_runtime.server import ServeConfig, TokenTable, create_app, served_agents
from serve_support import (
    LOOKUP_THEN_ANSWER,
    REPO,
    ThreadServer,
    run_sse,
    sse_events,
    wait_for,
    well_formed,
    write_agent,
)

APPROVAL = str(REPO / "examples" / "approval" / "agent.toml")
TOKEN = "test-token-0123456789"
Start = Callable[..., ThreadServer]


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    """Start a server: `serve(agents=[...], db=URL, **ServeConfig options)`."""
    monkeypatch.setenv("PI_REFUND_LEDGER", str(tmp_path / "refunds.jsonl"))
    stack = ExitStack()

    def start(
        agents: list[str] | None = None, *, db: str | None = None, **options: Any
    ) -> ThreadServer:
        specs = agents or [str(write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER))]
        config = ServeConfig(
            agents=served_agents(specs),
            db_url=db or f"sqlite:///{tmp_path / 'pi.db'}",
            trace_dir=tmp_path / "traces",
            **options,
        )
        return stack.enter_context(ThreadServer(create_app(config)))

    with stack:
        yield start


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "refunds.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


# Runs


def test_a_json_run_returns_the_run_result_and_the_session_stores_it(
    serve: Start, db_url: str
) -> None:
    server = serve(db=db_url)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        ran = client.post("/v1/sessions/order-1/runs", json={"message": "total of A-1?"})
        assert ran.status_code == 200, ran.text
        result = ran.json()
        assert result["status"] == "completed" and result["stop_reason"] == "final_answer"
        assert result["output"] == "Order A-1 totals 80." and result["session_id"] == "order-1"
        assert [m["role"] for m in result["messages"]] == ["user", "assistant", "tool", "assistant"]

        session = client.get("/v1/sessions/order-1").json()
        assert session["session_id"] == "order-1" and session["status"] == "completed"
        assert [r["run_id"] for r in session["runs"]] == [result["run_id"]]
        assert len(session["messages"]) == 4

        trace = client.get(f"/v1/runs/{result['run_id']}/trace").json()
        kinds = [e["kind"] for e in trace["events"]]
        assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
        assert trace["session_id"] == "order-1" and trace["status"] == "completed"


def test_an_sse_run_streams_ag_ui_events_in_order_and_the_session_stores_it(serve: Start) -> None:
    server = serve()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        events = run_sse(client, "/v1/sessions/order-2/runs", {"message": "total of A-1?"})
        well_formed(events)
        types = [e["type"] for e in events]
        for earlier, later in [
            ("RUN_STARTED", "STEP_STARTED"),
            ("TOOL_CALL_START", "TOOL_CALL_ARGS"),
            ("TOOL_CALL_ARGS", "TOOL_CALL_END"),
            ("TOOL_CALL_END", "TOOL_CALL_RESULT"),
            ("STEP_FINISHED", "RUN_FINISHED"),
        ]:
            assert types.index(earlier) < types.index(later), (earlier, later, types)
        # the commentary before the call, then the answer after its result
        texts = [i for i, t in enumerate(types) if t == "TEXT_MESSAGE_START"]
        assert texts[0] < types.index("TOOL_CALL_START")
        assert texts[1] > types.index("TOOL_CALL_RESULT")
        finished = events[-1]
        assert finished["type"] == "RUN_FINISHED" and finished["outcome"] == {"type": "success"}
        assert finished["threadId"] == "order-2" and finished["result"]["status"] == "completed"

        session = client.get("/v1/sessions/order-2").json()
        assert session["status"] == "completed"
        assert session["runs"][0]["run_id"] == events[0]["runId"] == finished["runId"]


def test_approval_over_http_pauses_with_an_interrupt_and_runs_the_call_once(
    serve: Start, tmp_path: Path
) -> None:
    server = serve([APPROVAL])
    url = "/v1/sessions/support-1"
    with httpx.Client(base_url=server.url, timeout=60) as client:
        events = run_sse(client, f"{url}/runs", {"message": "A-1001 arrived broken, refund it"})
        well_formed(events)
        outcome = events[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        (interrupt,) = outcome["interrupts"]
        call = interrupt["toolCallId"]
        assert interrupt["metadata"]["tool"] == "refund" and ledger(tmp_path) == []
        assert interrupt["metadata"]["decide"] == f"{url}/approvals/{call}"
        assert client.get(url).json()["pending_approvals"][0]["call_id"] == call

        # a NUL, which PostgreSQL's text refuses (it answered 503 "try again" there)
        nul = client.post(
            f"{url}/approvals/{call}", json={"decision": "reject", "reason": "no\u0000"}
        )
        assert nul.status_code == 422 and "control character" in nul.json()["error"]["message"]

        stale = client.post(
            f"{url}/approvals/{call}", json={"decision": "approve", "fingerprint": "0" * 64}
        )
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "decision_refused"
        assert ledger(tmp_path) == []  # refused: nothing ran

        approved = client.post(
            f"{url}/approvals/{call}",
            json={"decision": "approve", "fingerprint": interrupt["metadata"]["fingerprint"]},
        )
        assert approved.status_code == 200, approved.text
        assert approved.json()["status"] == "completed"
        assert [e["order_id"] for e in ledger(tmp_path)] == ["A-1001"]

        again = client.post(f"{url}/approvals/{call}", json={"decision": "approve"})
        assert again.status_code == 409 and again.json()["error"]["code"] == "already_decided"
        unknown = client.post(f"{url}/approvals/call_9_9", json={"decision": "approve"})
        assert unknown.status_code == 404
        assert len(ledger(tmp_path)) == 1
        assert client.get(url).json()["status"] == "completed"


def test_a_rejection_over_sse_streams_the_rejected_result_and_the_continuation(
    serve: Start, tmp_path: Path
) -> None:
    server = serve([APPROVAL])
    url = "/v1/sessions/support-2"
    with httpx.Client(base_url=server.url, timeout=60) as client:
        paused = client.post(f"{url}/runs", json={"message": "refund A-1001"}).json()
        call = paused["pending_approvals"][0]["call_id"]
        for bad in (
            {"decision": "reject"},  # a rejection needs a reason
            {"decision": "approve", "reason": "fine"},
            {"decision": "maybe"},
            {"decision": "reject", "reason": "no", "arguments": {"amount": 1}},
        ):
            refused = client.post(f"{url}/approvals/{call}", json=bad)
            assert refused.status_code == 422, (bad, refused.text)
        events = run_sse(
            client, f"{url}/approvals/{call}", {"decision": "reject", "reason": "used teapot"}
        )
        well_formed(events)
        result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
        assert result["toolCallId"] == call and "used teapot" in result["content"]
        assert (
            events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"]["status"] == "completed"
        )
        assert ledger(tmp_path) == []


def test_sixteen_concurrent_runs_are_all_well_formed_and_stored(
    serve: Start, db_url: str, tmp_path: Path
) -> None:
    steps = [{**LOOKUP_THEN_ANSWER[0], "delay_ms": 50}, LOOKUP_THEN_ANSWER[1]]
    server = serve([str(write_agent(tmp_path / "busy", steps))], db=db_url)

    def one(i: int) -> tuple[str, Any]:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            url = f"/v1/sessions/many-{i}/runs"
            if i % 2:
                return "sse", run_sse(client, url, {"message": f"order {i}"})
            return "json", client.post(url, json={"message": f"order {i}"})

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(16)))
    run_ids = set()
    for kind, answer in answers:
        if kind == "sse":
            well_formed(answer)
            assert answer[-1]["type"] == "RUN_FINISHED"
            assert answer[-1]["result"]["status"] == "completed"
            run_ids.add(answer[0]["runId"])
        else:
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "completed"
            run_ids.add(answer.json()["run_id"])
    assert len(run_ids) == 16
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for i in range(16):
            session = client.get(f"/v1/sessions/many-{i}").json()
            assert session["status"] == "completed" and len(session["messages"]) == 4
            assert session["messages"][0]["content"] == f"order {i}"


def test_a_client_dropping_mid_stream_does_not_cancel_the_run(
    serve: Start, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    steps = [
        {"tool_calls": [{"name": "hold", "arguments": {"name": "gate"}}]},
        {"text": "Released and done."},
    ]
    folder = tmp_path / "held"
    server = serve([str(write_agent(folder, steps))])
    url = "/v1/sessions/held-1"
    with httpx.Client(base_url=server.url, timeout=60) as client:
        with client.stream(
            "POST", f"{url}/runs", json={"message": "go"}, headers={"Accept": "text/event-stream"}
        ) as response:
            for event in sse_events(response):
                if event["type"] == "RUN_STARTED":
                    run_id = event["runId"]
                if event["type"] == "TOOL_CALL_END":
                    break  # the client leaves while the call is held
        assert client.get(url).json()["status"] == "running"
        caplog.set_level(logging.ERROR, logger="pi_runtime")
        busy = client.post(f"{url}/runs", json={"message": "again"})
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
        # the caller's refusal, not the server's failure: no error logged for each one
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []

        # another client follows the live run from its start
        with client.stream(
            "GET", f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream"}
        ) as follower:
            assert follower.status_code == 200
            (folder / "gate").write_text("open")
            followed = list(sse_events(follower))
        well_formed(followed)
        assert followed[0]["runId"] == run_id and followed[-1]["result"]["status"] == "completed"

        session = wait_for(
            lambda: (s := client.get(url).json())["status"] == "completed" and s, "the run"
        )
        assert session["messages"][-1]["content"][0]["text"] == "Released and done."
        assert client.get(f"/v1/runs/{run_id}/events").status_code == 404  # no longer live


def test_a_json_client_that_stops_waiting_does_not_cancel_the_run(
    serve: Start, tmp_path: Path
) -> None:
    steps = [
        {"tool_calls": [{"name": "hold", "arguments": {"name": "gate"}}]},
        {"text": "Released and done."},
    ]
    folder = tmp_path / "held"
    server = serve([str(write_agent(folder, steps))])
    url = "/v1/sessions/held-2"
    with httpx.Client(base_url=server.url, timeout=60) as client:
        with pytest.raises(httpx.ReadTimeout):  # the call is held: no answer comes in time
            client.post(f"{url}/runs", json={"message": "go"}, timeout=httpx.Timeout(60, read=0.5))
        assert client.get(url).json()["status"] == "running"
        (folder / "gate").write_text("open")
        session = wait_for(
            lambda: (s := client.get(url).json())["status"] == "completed" and s, "the run"
        )
        assert session["runs"][0]["status"] == "completed"


# Bad input


def test_bad_input_gets_422_413_and_404_as_json_and_stores_nothing(serve: Start) -> None:
    server = serve(max_body_bytes=2048)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        url = "/v1/sessions/bad-1/runs"
        json_headers = {"content-type": "application/json"}
        malformed = client.post(url, content=b'{"message": ', headers=json_headers)
        assert malformed.status_code == 422
        assert malformed.json()["error"]["message"] == "the body is not valid JSON"
        for body in ({}, {"message": ""}, {"message": 7}, {"message": "x", "extra": 1}, []):
            missed = client.post(url, json=body)
            assert missed.status_code == 422, body
            assert missed.json()["error"]["code"] == "invalid_request"
            assert "details" in missed.json()["error"]
        bad_id = client.post("/v1/sessions/has%20space/runs", json={"message": "x"})
        assert bad_id.status_code == 422

        unknown = client.post(url, json={"message": "x", "agent": "nobody"})
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_agent"

        big = {"message": "x" * 4000}
        declared = client.post(url, json=big)
        assert declared.status_code == 413
        assert declared.json()["error"]["code"] == "body_too_large"

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"message": "'
            for _ in range(64):
                yield b"y" * 256
            yield b'"}'

        chunked = client.post(url, content=chunks(), headers=json_headers)
        assert chunked.status_code == 413

        assert client.get("/v1/sessions/bad-1").status_code == 404  # nothing was stored
        ok = client.post(url, json={"message": "x" * 1500})
        assert ok.status_code == 200 and ok.json()["status"] == "completed"

        nowhere = client.get("/v1/nothing-here")
        assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "not_found"
        wrong_method = client.delete("/v1/sessions/bad-1")
        assert wrong_method.status_code == 405 and "error" in wrong_method.json()
        assert client.get("/v1/runs/run-nope/trace").status_code == 404


def test_hostile_text_in_a_message_is_kept_verbatim_or_refused_whole(serve: Start) -> None:
    server = serve()
    json_headers = {"content-type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        surrogate = client.post(
            "/v1/sessions/h0/runs", content=b'{"message": "\\ud800 hi"}', headers=json_headers
        )
        assert surrogate.status_code == 422  # not text: refused, and nothing stored
        assert client.get("/v1/sessions/h0").status_code == 404
        hostile = "nul \x00 · \u202e\x1b[31m red · 雨"
        ran = client.post("/v1/sessions/h1/runs", json={"message": hostile})
        assert ran.status_code == 200 and ran.json()["status"] == "completed"
        assert client.get("/v1/sessions/h1").json()["messages"][0]["content"] == hostile


def test_a_forced_internal_failure_answers_a_bare_json_500(serve: Start) -> None:
    server = serve()
    state = server.server.config.app.state.pi  # the app as served

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret-internal-detail /srv/pi.db")

    state.store.get_session = broken
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for answer in (
            client.get("/v1/sessions/s1"),
            client.post("/v1/sessions/s1/runs", json={"message": "x"}),
        ):
            assert answer.status_code == 500
            assert answer.headers["content-type"] == "application/json"
            assert answer.json()["error"]["code"] == "internal_error"
            assert "Traceback" not in answer.text and "secret" not in answer.text
            assert "RuntimeError" not in answer.text


def test_a_store_failure_mid_stream_ends_the_stream_with_run_error(serve: Start) -> None:
    server = serve()
    state = server.server.config.app.state.pi

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret-internal-detail")

    state.store.finish_run = broken
    with httpx.Client(base_url=server.url, timeout=60) as client:
        events = run_sse(client, "/v1/sessions/s2/runs", {"message": "total of A-1?"})
    well_formed(events)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "internal_error"
    assert "secret" not in json.dumps(events)


# Auth and tenancy


def test_with_a_token_every_v1_request_needs_the_bearer_header(serve: Start) -> None:
    server = serve(tokens=TokenTable.single(TOKEN))
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-0123456789"},
            {"Authorization": TOKEN},
        ):
            denied = client.post("/v1/sessions/s1/runs", json={"message": "x"}, headers=headers)
            assert denied.status_code == 401, headers
            assert denied.headers["www-authenticate"] == "Bearer"
            assert denied.json()["error"]["code"] == "unauthorized"
            assert client.get("/v1/sessions/s1", headers=headers).status_code == 401
        good = {"Authorization": f"Bearer {TOKEN}"}
        ran = client.post("/v1/sessions/s1/runs", json={"message": "x"}, headers=good)
        assert ran.status_code == 200 and ran.json()["status"] == "completed"
        assert client.get("/v1/sessions/s1", headers=good).status_code == 200
        # outside /v1: the health check and the API's description
        assert client.get("/healthz").status_code == 200
        paths = client.get("/openapi.json").json()["paths"]
        assert {
            "/v1/sessions/{session_id}/runs",
            "/v1/sessions/{session_id}/approvals/{call_id}",
            "/v1/sessions/{session_id}",
            "/v1/runs/{run_id}/trace",
        } <= set(paths)


def test_a_tenant_sees_only_its_own_sessions_and_others_are_404(
    serve: Start, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps({"acme-token-0123456789": "acme", "zeta-token-0123456789": "zeta"})
    )
    server = serve([APPROVAL], tokens=TokenTable.from_file(tokens))
    acme = {"Authorization": "Bearer acme-token-0123456789"}
    zeta = {"Authorization": "Bearer zeta-token-0123456789"}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        paused = client.post(
            "/v1/sessions/s1/runs", json={"message": "refund A-1001"}, headers=acme
        )
        assert paused.json()["session_id"] == "s1"
        run_id, call = paused.json()["run_id"], paused.json()["pending_approvals"][0]["call_id"]

        absent = client.get("/v1/sessions/never-made", headers=zeta)
        others = client.get("/v1/sessions/s1", headers=zeta)
        assert others.status_code == absent.status_code == 404
        assert others.json()["error"]["code"] == absent.json()["error"]["code"]
        assert client.get(f"/v1/runs/{run_id}/trace", headers=zeta).status_code == 404
        decided = client.post(
            f"/v1/sessions/s1/approvals/{call}", json={"decision": "approve"}, headers=zeta
        )
        assert decided.status_code == 404
        assert ledger(tmp_path) == []

        mine = client.get("/v1/sessions/s1", headers=acme).json()
        assert mine["session_id"] == "s1" and mine["status"] == "awaiting_approval"
        assert client.get(f"/v1/runs/{run_id}/trace", headers=acme).status_code == 200

        # zeta's own s1 is another session
        client.post("/v1/sessions/s1/runs", json={"message": "refund A-1002"}, headers=zeta)
        theirs = client.get("/v1/sessions/s1", headers=zeta).json()
        assert theirs["messages"][0]["content"] == "refund A-1002"
    store = open_store(f"sqlite:///{tmp_path / 'pi.db'}")
    try:
        assert store.get_session("acme/s1") is not None and store.get_session("zeta/s1") is not None
        assert store.get_session("s1") is None
    finally:
        store.close()


def test_login_sets_an_http_only_strict_cookie_that_authorizes_v1(serve: Start) -> None:
    server = serve(tokens=TokenTable.single(TOKEN))
    with httpx.Client(base_url=server.url, timeout=60) as client:
        stuffed = client.post("/login", data={f"f{i}": "x" for i in range(20)})
        assert stuffed.status_code == 422
        refused = client.post("/login", data={"token": "wrong-token-0123456789"})
        assert refused.status_code == 401 and "set-cookie" not in refused.headers

        login = client.post("/login", data={"token": TOKEN, "next": "/runs"})
        assert login.status_code == 303 and login.headers["location"] == "/runs"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert TOKEN not in cookie
        assert client.get("/v1/agents").status_code == 200  # the client keeps the cookie

        client.cookies.set("pi_session", client.cookies["pi_session"][:-2] + "00")
        assert client.get("/v1/agents").status_code == 401  # a tampered cookie is no cookie

        elsewhere = client.post("/login", data={"token": TOKEN, "next": "//evil.example/"})
        assert elsewhere.headers["location"] == "/"
        client.cookies.clear()
        client.post("/login", data={"token": TOKEN})
        kept = client.cookies["pi_session"]
        assert client.get("/v1/agents").status_code == 200
        client.post("/logout")
        assert client.get("/v1/agents").status_code == 401
    with httpx.Client(base_url=server.url, timeout=60, cookies={"pi_session": kept}) as copy:
        assert copy.get("/v1/agents").status_code == 401  # logging out revoked the cookie


def test_only_an_unreachable_store_is_answered_try_again() -> None:
    # a refusal that no retry can change (PostgreSQL refusing a value) is no 503
    from pi_runtime.durable import Conflict, LeaseLost, NotFound, StoreError, StoreUnavailable
    from pi_runtime.server.stream import api_error

    statuses = {
        type(exc).__name__: api_error(exc).status
        for exc in (StoreUnavailable("down"), StoreError("refused"), Conflict("busy"),
                    NotFound("none"), LeaseLost("taken"))
    }  # fmt: skip
    assert statuses == {
        "StoreUnavailable": 503, "StoreError": 500, "Conflict": 409, "NotFound": 404,
        "LeaseLost": 503,
    }  # fmt: skip
    assert api_error(StoreError("refused")).code == "internal_error"


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("t.toml", "x = " + "[" * 2000 + "]" * 2000, "not valid TOML"),  # tomllib recursed
        ("t.json", "[" * 100_000 + "]" * 100_000, "not valid JSON"),
        ("t.toml", 'secret-token-0123456789 = "acme', "not valid TOML"),
    ],
)
def test_a_bad_tokens_file_is_one_line_that_quotes_no_token(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        TokenTable.from_file(path)
    assert str(caught.value) == f"tokens file {path}: {problem}"


def test_a_tokens_file_saved_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text('\ufeffacme-token-0123456789 = "acme"\n', encoding="utf-8")
    assert TokenTable.from_file(path).entries == (("acme-token-0123456789", "acme"),)
