"""`pi serve` on a real uvicorn (127.0.0.1, an ephemeral port) given what its parsers do
not expect: a body too deep or with a number too long to read is a 422 like any other
invalid body, and a trace line of a newer Pi's field types still renders its timeline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pi_runtime.server import ServeConfig, create_app, served_agents
from serve_support import LOOKUP_THEN_ANSWER, ThreadServer, write_agent


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadServer]:
    config = ServeConfig(
        agents=served_agents([str(write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER))]),
        db_url=f"sqlite:///{tmp_path / 'pi.db'}",
        trace_dir=tmp_path / "traces",
    )
    with ThreadServer(create_app(config)) as running:
        yield running


UNREADABLE = {
    "nested 50,000 deep": (
        b'{"message": "x", "a": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b"}",
        "the body is nested too deeply to read",
    ),
    "a 5,000-digit integer": (
        b'{"message": "x", "a": ' + b"9" * 5_000 + b"}",
        "the body holds a number too long to read",
    ),
    "not UTF-8": (b'{"message": "\xff"}', "the body is not valid JSON"),
}


@pytest.mark.parametrize("label", list(UNREADABLE))
def test_a_body_the_server_api_cannot_read_is_a_422_invalid_request(
    server: ThreadServer, label: str
) -> None:
    body, message = UNREADABLE[label]
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answer = client.post(
            "/v1/sessions/hostile-1/runs",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert (error["code"], error["message"]) == ("invalid_request", message)
        assert [d["type"] for d in error["details"]] == ["json_invalid"]
        assert str(body[:40]) not in answer.text  # the input is never echoed
        assert client.get("/v1/sessions/hostile-1").status_code == 404  # nothing stored


def test_a_trace_line_of_unexpected_types_still_renders_the_server_timeline(
    server: ThreadServer, tmp_path: Path
) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        run = client.post("/v1/sessions/newer-1/runs", json={"message": "go"}).json()
        written = tmp_path / "traces" / f"{run['run_id']}.jsonl"
        with written.open("a", encoding="utf-8") as trace:
            trace.write('{"kind":"model_request","step":1,"tools":5}\n')
            trace.write('{"kind":"model_request","step":NaN,"tools":[]}\n')
            trace.write('{"kind":"plan_created","steps":7}\n')

        answer = client.get(f"/v1/runs/{run['run_id']}/timeline")
        assert answer.status_code == 200, answer.text
        view = answer.json()
        assert [c["tools"] for c in view["model_calls"][-2:]] == [[], []]
        assert view["plans"] == [{"revision": 0, "fallback": False, "steps": []}]
        assert view["finished"]["status"] == "completed"
