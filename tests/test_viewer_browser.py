"""The trace viewer in a real headless Chromium (Debian's `chromium`, driven by
Playwright; no browser is downloaded) against a real `pi serve` on 127.0.0.1: a finished
run's timeline checked against its trace, an approval given with a click, a live run
growing row by row, hostile run text shown as text, and the login.

`PI_WRITE_SCREENSHOT=1` also writes the run page's screenshot to docs/viewer.png.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from pi_runtime.server import TokenTable
from serve_support import REPO, ThreadServer, wait_for, write_agent
from viewer_support import APPROVAL, CHROMIUM, TOKEN, client, refunds, viewer_server

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM}: apt-get install chromium (CI installs it)",
)
WAIT_MS = 30_000
TIMELINE = "#timeline tbody tr"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert not errors, errors  # no script failed on any page


def open_logged_in(page: Page, server: ThreadServer, path: str, token: str = TOKEN) -> None:
    page.goto(server.url + path)
    expect(page).to_have_url(f"{server.url}/login?next={path}")
    page.fill("#token", token)
    page.click("#login button[type=submit]")
    expect(page).to_have_url(server.url + path)


def cells(page: Page) -> list[list[str]]:
    rows = page.locator(TIMELINE)
    return [rows.nth(i).locator("td").all_text_contents() for i in range(rows.count())]


def number(text: str) -> float:
    return float(text.replace(",", "")) if text else 0.0


def expected_rows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the page must show, from the trace itself: one row per model response, tool
    result and the end, with running sums of tokens and the time since the start."""
    rows, total_in, total_out = [], 0, 0
    for e in events:
        if e["kind"] == "model_response":
            usage = e["message"]["usage"]
            total_in += usage["input_tokens"]
            total_out += usage["output_tokens"]
            rows.append({"what": "model", "in": usage["input_tokens"], "out": usage["output_tokens"],
                         "ms": e["latency_ms"], "stop": e["message"]["finish_reason"]})  # fmt: skip
        elif e["kind"] == "tool_result":
            status = e["error_kind"] if e["is_error"] else "ok"
            rows.append({"what": f"tool {e['name']}", "status": status, "ms": e["duration_ms"]})
        elif e["kind"] == "run_finished":
            rows.append({"what": f"done {e['status']}", "stop": e["stop_reason"]})
        else:
            continue
        rows[-1].update(sum_in=total_in, sum_out=total_out, at=e["t_ms"])
    return rows


def test_a_finished_runs_timeline_and_totals_match_its_trace(page: Page, tmp_path: Path) -> None:
    steps = [
        {"text": "Looking it up.", "tool_calls": [{"name": "lookup", "arguments": {"order_id": "A-1"}}],
         "usage": {"input_tokens": 100, "output_tokens": 20}},
        {"tool_calls": [{"name": "lookup", "arguments": {"order": "A-2"}}],
         "usage": {"input_tokens": 150, "output_tokens": 15}},
        {"text": "Order A-1 totals 80.", "usage": {"input_tokens": 210, "output_tokens": 10}},
    ]  # fmt: skip
    agent = str(write_agent(tmp_path / "shop", steps))
    with (
        viewer_server(tmp_path, [agent], tokens=TokenTable.single(TOKEN)) as server,
        client(server, TOKEN) as http,
    ):
        result = http.post("/v1/sessions/s1/runs", json={"message": "A-1?"}).json()
        trace = http.get(f"/v1/runs/{result['run_id']}/trace").json()["events"]
        open_logged_in(page, server, f"/runs/{result['run_id']}")

        expect(page.locator("#status")).to_have_text("completed")
        want = expected_rows(trace)
        got = cells(page)
        assert len(got) == len(want) == 6
        for row, w in zip(got, want, strict=True):
            _, _, _, what, status, tin, tout, sin, sout, ms, at, stop, _ = row
            assert what == w["what"] and status == w.get("status", status)
            assert (number(tin), number(tout)) == (w.get("in", 0), w.get("out", 0))
            assert (number(sin), number(sout)) == (w["sum_in"], w["sum_out"])
            assert abs(number(ms) - (w.get("ms") or 0)) <= 0.051
            assert abs(number(at) - w["at"]) <= 0.051
            assert stop == w.get("stop", "")
        assert got[3][4] == "invalid_arguments" and got[-1][11] == "final_answer"

        usage, metrics = result["usage"], result["metrics"]

        def card(name: str) -> str:
            return page.locator(f'[data-metric="{name}"] .value').inner_text()

        assert number(card("input_tokens")) == usage["input_tokens"] == 460
        assert number(card("output_tokens")) == usage["output_tokens"] == 45
        assert card("model_calls") == "3" and card("tool_calls") == "2"
        assert card("tool_errors") == "1"
        first_text = metrics["text_tokens_before_first_tool_call"]
        assert number(card("text_tokens_before_first_tool_call")) == first_text
        assert card("tool_argument_truncation_count") == "0"
        assert card("mixed_text_tool_message_rate") == "50 %"  # 1 of the 2 calling messages

        failed = page.locator("#calls details").first  # errors first
        expect(failed).to_have_attribute("id", "call-call_1_0")
        failed.locator("summary").click()
        expect(failed.locator("pre").first).to_contain_text('"order": "A-2"')
        expect(failed.locator("pre").nth(1)).to_contain_text("invalid_arguments")
        model = page.locator("#model-calls details").first
        model.locator("summary").click()
        expect(model).to_contain_text("Tools offered")
        expect(model).to_contain_text("lookup, hold")
        expect(model.locator("table")).to_contain_text("system")


def test_a_click_approves_the_waiting_call_and_the_run_goes_on(page: Page, tmp_path: Path) -> None:
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=TokenTable.single(TOKEN)) as server,
        client(server, TOKEN) as http,
    ):
        ran = http.post("/v1/sessions/support-1/runs", json={"message": "refund A-1001"}).json()
        assert ran["stop_reason"] == "awaiting_approval"
        open_logged_in(page, server, f"/runs/{ran['run_id']}")
        box = page.locator('.approval[data-call="call_0_1"]')
        expect(box).to_contain_text("refund")
        expect(box.locator("pre")).to_contain_text('"amount": 48')

        box.locator("button.approve").click()

        expect(page).not_to_have_url(f"{server.url}/runs/{ran['run_id']}")
        expect(page.locator("#status")).to_have_text("completed")
        continued = page.url.rsplit("/", 1)[1]
        assert http.get("/v1/sessions/support-1").json()["status"] == "completed"
        assert [r["order_id"] for r in refunds(tmp_path)] == ["A-1001"]  # run once
        assert [c[3] for c in cells(page)] == ["approval refund", "model", "done completed"]
        assert cells(page)[0][4] == "approved"
        expect(page.locator(".links")).to_contain_text(ran["run_id"])  # "Continues …"

        page.goto(f"{server.url}/runs/{ran['run_id']}")
        expect(page.locator("#continued-by")).to_contain_text(continued)
        expect(page.locator(".approval")).to_have_count(0)


def test_a_rejection_asks_for_a_reason_and_the_model_reads_it(page: Page, tmp_path: Path) -> None:
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=TokenTable.single(TOKEN)) as server,
        client(server, TOKEN) as http,
    ):
        ran = http.post("/v1/sessions/support-2/runs", json={"message": "refund A-1001"}).json()
        open_logged_in(page, server, f"/runs/{ran['run_id']}")
        box = page.locator(".approval")
        box.locator("button.reject-open").click()
        box.locator("button.send-reject").click()  # no reason yet: refused here
        expect(box.locator(".error")).to_contain_text("needs a reason")
        assert http.get("/v1/sessions/support-2").json()["status"] == "awaiting_approval"

        box.locator("textarea").fill("Refund only half: it was used.")
        box.locator("button.send-reject").click()

        expect(page.locator("#status")).to_have_text("completed")
        assert refunds(tmp_path) == []
        rejected = page.locator("#calls details").first
        expect(rejected.locator("summary")).to_contain_text("rejected")
        rejected.locator("summary").click()
        expect(rejected).to_contain_text("Refund only half: it was used.")


def test_a_live_run_appends_rows_without_a_reload(page: Page, tmp_path: Path) -> None:
    steps = [
        {"tool_calls": [{"name": "lookup", "arguments": {"order_id": "A-1"}}],
         "usage": {"input_tokens": 100, "output_tokens": 20}},
        {"tool_calls": [{"name": "hold", "arguments": {"name": "gate"}}],
         "usage": {"input_tokens": 150, "output_tokens": 10}},
        {"text": "Released.", "usage": {"input_tokens": 190, "output_tokens": 5}},
    ]  # fmt: skip
    agent = write_agent(tmp_path / "shop", steps)
    with (
        viewer_server(tmp_path, [str(agent)], tokens=TokenTable.single(TOKEN)) as server,
        client(server, TOKEN) as http,
    ):
        done: list[dict[str, Any]] = []
        worker = threading.Thread(
            target=lambda: done.append(http.post("/v1/sessions/live-1/runs", json={"message": "go"}).json())
        )  # fmt: skip
        worker.start()
        try:
            session = wait_for(
                lambda: (
                    (s := http.get("/v1/sessions/live-1")).is_success and s.json()["runs"] and s
                ),
                "the run to start",
            )
            run_id = session.json()["runs"][0]["run_id"]
            asked: list[str] = []
            page.on("request", lambda request: asked.append(request.url))
            open_logged_in(page, server, f"/runs/{run_id}")
            loads: list[str] = []
            page.on("framenavigated", lambda frame: loads.append(frame.url))

            expect(page.locator(TIMELINE)).to_have_count(2)  # written up to the held call
            expect(page.locator("#status")).to_have_text("running")
            expect(page.locator(".badge.live")).to_be_visible()
        finally:
            (agent.parent / "gate").touch()
            worker.join(60)
        expect(page.locator("#status")).to_have_text("completed")
        expect(page.locator(TIMELINE)).to_have_count(6)
        assert [c[3] for c in cells(page)] == [
            "model", "tool lookup", "model", "tool hold", "model", "done completed",
        ]  # fmt: skip
        assert loads == []  # the rows came over the run's event stream, not a reload
        assert f"{server.url}/v1/runs/{run_id}/events" in asked
        assert done and done[0]["status"] == "completed"


def test_markup_from_a_run_is_shown_as_text(page: Page, tmp_path: Path) -> None:
    hostile = (
        "<img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script>"
    )
    turned = "ls \u202e; rm -rf ~ #"  # reads as `ls # ~ fr- mr ;` when not escaped
    steps = [
        {"tool_calls": [{"name": "lookup", "arguments": {"order_id": hostile, "note": turned}}]},
        {"text": f"Answer: {hostile}"},
    ]
    agent = str(write_agent(tmp_path / "shop", steps))
    with (
        viewer_server(tmp_path, [agent], tokens=TokenTable.single(TOKEN)) as server,
        client(server, TOKEN) as http,
    ):
        result = http.post("/v1/sessions/s1/runs", json={"message": hostile}).json()
        open_logged_in(page, server, f"/runs/{result['run_id']}")
        expect(page.locator("#output")).to_have_text(f"Answer: {hostile}")
        page.locator("#calls summary").first.click()
        arguments = page.locator("#calls pre").first
        expect(arguments).to_contain_text(json.dumps(hostile)[1:-1])
        expect(arguments).to_contain_text(json.dumps(turned))  # the mark as its escape
        assert "\u202e" not in arguments.inner_text()
        page.goto(f"{server.url}/sessions/s1")
        page.locator(".messages summary").click()
        expect(page.locator(".messages")).to_contain_text(hostile)
        assert page.locator("#app img, #app script").count() == 0
        assert page.title() == "Pi · trace viewer"


def test_a_wrong_token_is_told_and_the_right_one_returns_to_the_page(
    page: Page, tmp_path: Path
) -> None:
    with viewer_server(tmp_path, [APPROVAL], tokens=TokenTable.single(TOKEN)) as server:
        page.goto(f"{server.url}/sessions/nobody")
        page.fill("#token", "not-the-token-at-all")
        page.click("#login button[type=submit]")
        expect(page.locator("#login-error")).to_have_text("That token is not valid.")
        page.fill("#token", TOKEN)
        page.click("#login button[type=submit]")
        expect(page).to_have_url(f"{server.url}/sessions/nobody")
        expect(page.locator("#app .error")).to_contain_text("404")
        page.goto(server.url + "/")
        expect(page.locator("h1")).to_have_text("Sessions")
        page.click(".logout button")
        page.goto(server.url + "/")
        expect(page).to_have_url(f"{server.url}/login?next=/")


def test_the_run_page_screenshot(page: Page, tmp_path: Path) -> None:
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=TokenTable.single(TOKEN)) as server,
        client(server, TOKEN) as http,
    ):
        ran = http.post("/v1/sessions/support-1/runs", json={"message": "refund A-1001"}).json()
        open_logged_in(page, server, f"/runs/{ran['run_id']}")
        expect(page.locator(".approval")).to_be_visible()
        page.locator("#calls details").nth(1).locator("summary").click()
        page.locator("#model-calls summary").first.click()
        shot = page.screenshot(full_page=True)
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
    if os.environ.get("PI_WRITE_SCREENSHOT") == "1":
        (REPO / "docs" / "viewer.png").write_bytes(shot)
