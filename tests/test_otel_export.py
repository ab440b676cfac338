"""OpenTelemetry export from real `pi` processes to a real OTLP/HTTP receiver on
127.0.0.1: what `pi run` sends, a worker's continuation joining the session's trace, and
no OpenTelemetry import at all without the variables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_support import pi_process
from otlp_support import OtlpReceiver, ReceivedSpan
from pi_runtime.observe import otel

REPO = Path(__file__).resolve().parents[1]
SRC = str(REPO / "src")

TOOLS = '''\
from pi_runtime import tool


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"rain in {city}"


@tool(retries=0)
def broken(city: str) -> str:
    """Always fails."""
    raise RuntimeError("down")


TOOLS = [get_weather, broken]
'''


def weather_folder(tmp: Path) -> Path:
    (tmp / "weather_tools.py").write_text(TOOLS, encoding="utf-8")
    steps = [
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}},
                        {"name": "broken", "arguments": {"city": "Oslo"}}]},
        {"text": "Rain in Oslo."},
    ]  # fmt: skip
    (tmp / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return tmp


def exporting_to(receiver: OtlpReceiver, tmp: Path) -> dict[str, str | None]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": None,
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": None,
        "OTEL_EXPORTER_OTLP_PROTOCOL": None,
        "OTEL_SDK_DISABLED": None,
        "OTEL_SERVICE_NAME": None,
        "OTEL_RESOURCE_ATTRIBUTES": None,
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": None,
        "PI_TRACE_DIR": str(tmp / "traces"),
        "PYTHONPATH": f"{SRC}:{tmp}",
    }


def runs_in(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if s.name.startswith("invoke_agent")]


def test_pi_run_exports_its_spans_and_metrics_over_otlp_http(tmp_path: Path) -> None:
    folder = weather_folder(tmp_path)
    with OtlpReceiver() as receiver:
        ran = pi_process(
            "run", "Weather in Oslo?", "--model", "scripted:script.json",
            "--tools", "weather_tools:TOOLS", "--session", "otel-run", "--json",
            cwd=folder, env=exporting_to(receiver, tmp_path),
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        result = json.loads(ran.stdout)  # stdout is the RunResult alone
        spans = receiver.wait_for_spans(lambda got: len(runs_in(got)) == 1 and len(got) >= 5)

    [run] = runs_in(spans)
    assert run.kind == "INTERNAL" and run.status == "UNSET"
    assert run.resource["service.name"] == "pi"
    assert run.trace_id == otel.session_trace_id("otel-run")
    assert run.parent_span_id == otel.session_span_id("otel-run")
    assert run.attributes["gen_ai.conversation.id"] == "otel-run"
    assert run.attributes["gen_ai.provider.name"] == "pi.scripted"
    assert run.attributes["gen_ai.request.model"] == "script.json"
    assert run.attributes["pi.run.id"] == result["run_id"]
    assert run.attributes["gen_ai.usage.input_tokens"] == result["usage"]["input_tokens"]
    assert run.attributes["gen_ai.usage.output_tokens"] == result["usage"]["output_tokens"]
    children = [s for s in spans if s is not run]
    assert sorted(s.name for s in children) == [
        "chat script.json", "chat script.json", "execute_tool broken", "execute_tool get_weather",
    ]  # fmt: skip
    assert all(s.parent_span_id == run.span_id and s.trace_id == run.trace_id for s in children)
    [failed] = [s for s in children if s.name == "execute_tool broken"]
    assert failed.status == "ERROR" and failed.attributes["error.type"]
    assert all("gen_ai.input.messages" not in s.attributes for s in spans)
    names = {m.name: m for m in receiver.metrics}
    assert names["gen_ai.client.token.usage"].unit == "{token}"
    assert names["gen_ai.client.operation.duration"].unit == "s"
    tokens = names["gen_ai.client.token.usage"].points
    assert {p[0]["gen_ai.token.type"] for p in tokens} == {"input", "output"}


def test_a_workers_continuation_joins_the_sessions_trace(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    agent = str(REPO / "examples" / "jobs" / "agent.toml")
    with OtlpReceiver() as receiver:
        env = {**exporting_to(receiver, tmp_path), "PYTHONPATH": f"{SRC}:{REPO}"}
        started = pi_process(
            "run", "ACME 均线交叉", "--agent", agent, "--session", "otel-jobs", "--db", db,
            "--json", cwd=tmp_path, env=env,
        )  # fmt: skip
        assert started.returncode == 3, started.stderr  # awaiting the background job
        first = json.loads(started.stdout)["run_id"]
        worked = pi_process("worker", "--once", "--db", db, "--poll", "0.05", cwd=tmp_path, env=env)
        assert worked.returncode == 0, worked.stderr
        spans = receiver.wait_for_spans(lambda got: len(runs_in(got)) == 2)

    runs = {s.attributes["pi.run.id"]: s for s in runs_in(spans)}
    assert first in runs and len(runs) == 2
    [continuation] = [s for run_id, s in runs.items() if run_id != first]
    for run in runs.values():  # two processes, one trace: the session's
        assert run.name == "invoke_agent jobs"
        assert run.trace_id == otel.session_trace_id("otel-jobs")
        assert run.parent_span_id == otel.session_span_id("otel-jobs")
        assert run.attributes["gen_ai.conversation.id"] == "otel-jobs"
    assert runs[first].attributes["pi.stop_reason"] == "awaiting_tool"
    assert continuation.attributes["pi.stop_reason"] == "final_answer"
    [job_call] = [s for s in spans if s.name == "execute_tool compute"]
    assert job_call.attributes["pi.tool.outcome"] == "job"
    assert job_call.parent_span_id == runs[first].span_id
    answered = [
        s for s in spans if s.name.startswith("chat ") and s.parent_span_id == continuation.span_id
    ]
    assert len(answered) == 1 and answered[0].trace_id == continuation.trace_id


NO_IMPORT = """
import sys, json, contextlib, io
from pi_runtime import Agent
from pi_runtime.testing import ScriptedModel, text
result = Agent(ScriptedModel([text("hi")]), trace_dir=False).run_sync("hello")
assert result.status == "completed", result
sys.argv = ["pi", "run", "hello", "--model", "scripted:script.json", "--json"]
from pi_runtime.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")))
"""


def test_without_the_variables_opentelemetry_is_never_imported(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(json.dumps({"steps": [{"text": "hi"}]}))
    done = subprocess.run(
        [sys.executable, "-c", NO_IMPORT],
        cwd=tmp_path,
        env={"PYTHONPATH": SRC, "PI_TRACE_DIR": str(tmp_path / "traces")},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


MISSING_SDK = """
import sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
from pi_runtime import Agent
from pi_runtime.testing import ScriptedModel, text
result = Agent(ScriptedModel([text("hi")]), trace_dir=False).run_sync("hello")
print(result.status)
"""


def test_the_variable_without_the_otel_extra_warns_and_runs_on() -> None:
    done = subprocess.run(
        [sys.executable, "-c", MISSING_SDK],
        env={"PYTHONPATH": SRC, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed"
    assert "pip install 'pi-runtime[otel]'" in done.stderr
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in done.stderr


SERVER_START = """
import sys
from pi_runtime import Agent
from pi_runtime.observe import otel
from pi_runtime.testing import ScriptedModel, text
telemetry = otel.configure_from_env()  # what `pi serve` calls at start-up
assert telemetry is not None and otel.configure_from_env() is telemetry
Agent(ScriptedModel([text("hi")]), trace_dir=False).run_sync("hello", session_id="served")
otel.shutdown()  # flushes now, without waiting for the process to exit
print("flushed", flush=True)
sys.stdin.read()  # stays up until the test has looked
"""


def test_configure_from_env_at_start_up_and_shutdown_flushes(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        env = {k: v for k, v in exporting_to(receiver, tmp_path).items() if v is not None}
        process = subprocess.Popen(
            [sys.executable, "-c", SERVER_START],
            env={**env, "OTEL_SERVICE_NAME": "pi-serve-test"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "flushed"
            with receiver.lock:
                spans = list(receiver.spans)  # there already: the process has not exited
        finally:
            process.communicate(input="", timeout=60)
    [run] = runs_in(spans)
    assert run.attributes["gen_ai.conversation.id"] == "served"
    assert run.resource["service.name"] == "pi-serve-test"


APP_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pi_runtime import Agent
from pi_runtime.testing import ScriptedModel, text
mine = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(mine))
trace.set_tracer_provider(provider)  # the application set OpenTelemetry up first
Agent(ScriptedModel([text("hi")]), trace_dir=False).run_sync("hello")
print(sorted(s.name for s in mine.get_finished_spans()))
"""


def test_an_applications_own_tracer_provider_receives_the_spans(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        env = {k: v for k, v in exporting_to(receiver, tmp_path).items() if v is not None}
        env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = receiver.endpoint + "/v1/metrics"
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT")
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = receiver.endpoint + "/v1/traces"
        done = subprocess.run(
            [sys.executable, "-c", APP_PROVIDER],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "['chat scripted', 'invoke_agent']"
    assert receiver.spans == []  # Pi added no exporter of its own to the application's
    assert "/v1/metrics" in receiver.requests  # metrics: no provider of the app's, so Pi's
