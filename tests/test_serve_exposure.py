"""What `pi serve` shows a tenant of itself, on a real uvicorn (127.0.0.1, an ephemeral
port): no path of the server's files and none of the agent's recipe in any answer, the
login cookie `Secure` behind a trusted TLS proxy on another host, and no state changed
by a request another site's page sent with the browser's cookie."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from pi_runtime.server import ServeConfig, TokenTable, create_app, served_agents
from pi_runtime.server.config import public_model
from pi_runtime.server.errors import ApiError
from serve_support import LOOKUP_THEN_ANSWER, ServeProcess, ThreadServer, run_sse, write_agent

TOKEN = "exposure-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
Start = Callable[..., ThreadServer]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Start]:
    """Start a server of the agents `shop` and `other` (both scripted, from tmp_path):
    `serve(**ServeConfig options)`."""
    stack = ExitStack()

    def start(**options: Any) -> ThreadServer:
        specs = [
            f"shop={write_agent(tmp_path / 'shop', LOOKUP_THEN_ANSWER)}",
            f"other={write_agent(tmp_path / 'other', LOOKUP_THEN_ANSWER, name='other')}",
        ]
        config = ServeConfig(
            agents=served_agents(specs),
            db_url=f"sqlite:///{tmp_path / 'pi.db'}",
            trace_dir=tmp_path / "traces",
            **options,
        )
        return stack.enter_context(ThreadServer(create_app(config)))

    with stack:
        yield start


def assert_no_server_path(text: str, tmp_path: Path) -> None:
    assert str(tmp_path) not in text
    assert "import_path" not in text and ".toml" not in text and "script.json" not in text


# Paths and recipes


def test_a_run_answer_gives_its_trace_url_and_its_model_without_a_path(
    serve: Start, tmp_path: Path
) -> None:
    server = serve()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        ran = client.post("/v1/sessions/s1/runs", json={"message": "total of A-1?"})
        assert ran.status_code == 200, ran.text
        result = ran.json()
        assert result["trace"] == f"/v1/runs/{result['run_id']}/trace"
        assert [m["model"] for m in result["messages"] if m["role"] == "assistant"] == [
            "scripted",
            "scripted",
        ]
        assert_no_server_path(ran.text, tmp_path)

        trace = client.get(result["trace"])  # the URL is the run's trace on this server
        assert trace.status_code == 200 and trace.json()["events"]
        assert_no_server_path(trace.text, tmp_path)

        timeline = client.get(f"/v1/runs/{result['run_id']}/timeline")
        assert timeline.status_code == 200 and timeline.json()["run"]["model"] == "scripted"
        assert_no_server_path(timeline.text, tmp_path)


def test_a_streamed_result_gives_its_trace_url_and_its_model_without_a_path(
    serve: Start, tmp_path: Path
) -> None:
    server = serve()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        events = run_sse(client, "/v1/sessions/s1/runs", {"message": "total of A-1?"})
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["result"]["trace"] == f"/v1/runs/{finished['runId']}/trace"
    assert [u["model"] for u in finished["usage"]] == ["scripted"]
    assert_no_server_path(repr(events), tmp_path)


def test_a_session_shows_its_agent_by_name_not_its_recipe(serve: Start, tmp_path: Path) -> None:
    server = serve()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        client.post("/v1/sessions/s1/runs", json={"message": "total?", "agent": "other"})
        shown = client.get("/v1/sessions/s1")
    assert shown.status_code == 200, shown.text
    assert shown.json()["agent"] == {"name": "other", "model": "scripted"}
    assert_no_server_path(shown.text, tmp_path)
    assert "You answer questions about orders." not in shown.text  # the instructions
    assert "servetools_" not in shown.text  # the tools' module


def test_the_agents_list_names_their_tools_not_the_modules_defining_them(
    serve: Start, tmp_path: Path
) -> None:
    server = serve()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answer = client.get("/v1/agents")

    assert answer.status_code == 200
    listed = answer.json()
    assert listed["default"] == "shop"
    assert [a["name"] for a in listed["agents"]] == ["shop", "other"]
    for agent in listed["agents"]:
        assert agent["tools"] == [
            {"name": "lookup", "description": "An order's total.",
             "requires_approval": False, "background": False},
            {"name": "hold", "description": "Wait until the test opens the gate file `name` "
             "beside this module.", "requires_approval": False, "background": False},
        ]  # fmt: skip
    assert "servetools_" not in answer.text and ":TOOLS" not in answer.text
    assert_no_server_path(answer.text, tmp_path)


def test_the_agents_list_applies_the_allow_list_and_the_files_approval() -> None:
    from pi_runtime.loop.definition import AgentDefinition
    from pi_runtime.server.api import _tools_of

    weather = {"model": "scripted:script.json", "tools": ["examples.weather.tools:TOOLS"]}
    narrowed = {**weather, "allow": ["get_weather"], "approval": ["get_weather"]}

    every = _tools_of(AgentDefinition.from_dict(weather))
    allowed = _tools_of(AgentDefinition.from_dict(narrowed))

    assert [(t["name"], t["requires_approval"]) for t in every] == [
        ("get_weather", False), ("create_reminder", False),
    ]  # fmt: skip
    assert [(t["name"], t["requires_approval"]) for t in allowed] == [("get_weather", True)]


def test_an_agent_mismatch_names_the_agents_and_logs_the_files(
    serve: Start, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        client.post("/v1/sessions/s1/runs", json={"message": "total?"})
        with caplog.at_level(logging.WARNING, logger="pi_runtime.server"):
            refused = client.post("/v1/sessions/s1/runs", json={"message": "hi", "agent": "other"})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "agent_mismatch"
    assert "'shop'" in error["message"] and "'other'" in error["message"]
    assert_no_server_path(refused.text, tmp_path)
    assert str(tmp_path / "shop") in caplog.text  # the operator still learns which files


def test_an_agent_that_cannot_be_built_is_named_and_its_reason_logged(
    serve: Start, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve()
    (tmp_path / "shop" / "script.json").unlink()  # the operator moved a file
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        caplog.at_level(logging.ERROR, logger="pi_runtime.server"),
    ):
        failed = client.post("/v1/sessions/s9/runs", json={"message": "hi"})
    assert failed.status_code == 503, failed.text
    error = failed.json()["error"]
    assert error["code"] == "agent_unavailable" and "'shop'" in error["message"]
    assert_no_server_path(failed.text, tmp_path)
    assert str(tmp_path / "shop" / "script.json") in caplog.text


@pytest.mark.parametrize(
    ("name", "public"),
    [
        ("scripted:/srv/agents/script.json", "scripted"),
        ("replay:/srv/traces/run-1.jsonl", "replay"),
        ("local", "local"),
        ("local:gemma-3-270m", "local:gemma-3-270m"),
        ("local:/models/qwen.gguf", "local"),
        ("openai:gpt-4o", "openai:gpt-4o"),
        ("openai-compatible:qwen2.5:7b@http://10.0.0.5:8080/v1", "openai-compatible:qwen2.5:7b"),
        ("text:scripted:/srv/script.json", "text:scripted"),
        (None, None),
    ],
)
def test_a_model_is_named_to_clients_without_a_file_or_server(
    name: str | None, public: str | None
) -> None:
    assert public_model(name) == public


# The login cookie behind a TLS proxy


def test_the_login_cookie_is_secure_behind_a_trusted_proxy_on_another_host(
    tmp_path: Path,
) -> None:
    agent = write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER)
    proxy, stranger = "127.0.0.2", "127.0.0.3"  # other hosts, as far as the server sees
    args = ("--agent", str(agent), "--db", f"sqlite:///{tmp_path / 'pi.db'}")
    env = {"PI_SERVE_TOKEN": TOKEN}
    with ServeProcess(*args, "--forwarded-allow-ips", proxy, cwd=tmp_path, env=env) as server:

        def login_from(address: str) -> str:
            transport = httpx.HTTPTransport(local_address=address)
            with httpx.Client(transport=transport, timeout=30) as client:
                answer = client.post(
                    f"{server.url}/login",
                    data={"token": TOKEN, "next": "/"},
                    headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"},
                )
            assert answer.status_code == 303, answer.text
            return answer.headers["set-cookie"].lower()

        assert "; secure" in login_from(proxy)
        assert "; secure" not in login_from(stranger)  # its header is not believed


# Requests from another site's page


def test_a_cookie_post_from_another_sites_page_is_refused_and_changes_nothing(
    serve: Start,
) -> None:
    server = serve(tokens=TokenTable.single(TOKEN))
    with httpx.Client(base_url=server.url, timeout=60) as client:
        client.post("/login", data={"token": TOKEN, "next": "/"})
        assert client.cookies.get("pi_session")
        body = {"message": "total?"}
        for headers in (
            {"Sec-Fetch-Site": "same-site"},  # a page on another port of this host
            {"Sec-Fetch-Site": "cross-site"},
            {"Origin": "http://127.0.0.1:1"},  # a browser that sends no Sec-Fetch-Site
            {"Origin": "null"},
        ):
            refused = client.post("/v1/sessions/s1/runs", json=body, headers=headers)
            assert refused.status_code == 403, (headers, refused.text)
            assert refused.json()["error"]["code"] == "cross_site"
            decided = client.post(
                "/v1/sessions/s1/approvals/call_1", json={"decision": "approve"}, headers=headers
            )
            assert decided.status_code == 403, (headers, decided.text)
        assert client.get("/v1/sessions/s1").status_code == 404  # nothing ran

        own = {"Sec-Fetch-Site": "same-origin", "Origin": server.url}
        assert client.post("/v1/sessions/s1/runs", json=body, headers=own).status_code == 200
        origin_only = {"Origin": server.url}
        assert (
            client.post("/v1/sessions/s2/runs", json=body, headers=origin_only).status_code == 200
        )
        # reads and bearer calls are not a browser's ambient credential at work
        assert client.get("/v1/sessions/s1", headers={"Sec-Fetch-Site": "same-site"}).is_success
    with httpx.Client(base_url=server.url, timeout=60) as program:
        headers = {**BEARER, "Sec-Fetch-Site": "same-site"}
        assert program.post("/v1/sessions/s3/runs", json=body, headers=headers).is_success


def test_a_login_from_another_sites_page_is_refused_as_cross_site(serve: Start) -> None:
    server = serve(tokens=TokenTable.single(TOKEN))
    with httpx.Client(base_url=server.url, timeout=60) as client:
        refused = client.post(
            "/login", data={"token": TOKEN}, headers={"Origin": "http://elsewhere.example"}
        )
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "cross_site"
    assert "pi_session" not in refused.headers.get("set-cookie", "")


def test_a_403_has_the_forbidden_code_by_default() -> None:
    assert ApiError(403, "not yours").code == "forbidden"


def test_the_logged_reason_an_agent_cannot_be_built_is_redacted(
    serve: Start, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_runtime import UserError
    from pi_runtime.loop.definition import AgentDefinition

    secret = "sk-proj-" + "Q" * 40

    def broken(self: AgentDefinition, **options: Any) -> Any:
        raise UserError(f"the provider refused the key {secret}")

    server = serve()
    monkeypatch.setattr(AgentDefinition, "build_agent", broken)
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        caplog.at_level(logging.ERROR, logger="pi_runtime.server"),
    ):
        failed = client.post("/v1/sessions/s8/runs", json={"message": "hi"})
    assert failed.status_code == 503, failed.text
    assert "the provider refused the key" in caplog.text
    assert secret not in caplog.text and secret not in failed.text
