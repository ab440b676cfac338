"""`pi serve` with the OTEL_* variables: its runs reach a real OTLP/HTTP receiver on
127.0.0.1, each under the HTTP request that started it (FastAPI traces its requests once a
tracer provider is installed) and linked to its session's trace; what is buffered is
flushed when the server stops."""

from __future__ import annotations

from pathlib import Path

import httpx

from otlp_support import OtlpReceiver
from pi_runtime.observe import otel
from serve_support import LOOKUP_THEN_ANSWER, ServeProcess, write_agent
from test_otel_export import exporting_to, runs_in


def test_pi_serve_exports_each_run_under_its_request_linked_to_the_session(tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER)
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    with OtlpReceiver() as receiver:
        env = {k: v for k, v in exporting_to(receiver, tmp_path).items() if v is not None}
        env.pop("PYTHONPATH")  # ServeProcess puts the sources first itself
        server = ServeProcess("--agent", f"shop={agent}", "--db", db, cwd=tmp_path, env=env)
        with server, httpx.Client(base_url=server.url, timeout=60) as client:
            ran = client.post("/v1/sessions/o1/runs", json={"message": "Total of A-1?"})
            assert ran.status_code == 200, ran.text
            result = ran.json()
            assert result["stop_reason"] == "final_answer"
        # the server stopped: whatever its exporter still held was flushed on the way out
        spans = receiver.wait_for_spans(lambda got: len(runs_in(got)) == 1 and len(got) >= 5)
    [run] = runs_in(spans)
    [request] = [s for s in spans if s.name == "POST /v1/sessions/{session_id}/runs"]
    endpoint = [s for s in spans if s.span_id == run.parent_span_id]
    assert endpoint and endpoint[0].trace_id == request.trace_id == run.trace_id
    assert run.links == ((otel.session_trace_id("o1"), otel.session_span_id("o1")),)
    assert run.attributes["gen_ai.conversation.id"] == "o1"
    assert run.attributes["pi.run.id"] == result["run_id"]
    assert sorted(s.name for s in spans if s.parent_span_id == run.span_id) == [
        "chat script.json",
        "chat script.json",
        "execute_tool lookup",
    ]
