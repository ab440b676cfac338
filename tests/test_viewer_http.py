"""The trace viewer over real HTTP (uvicorn on 127.0.0.1): its pages behind the login,
the headers that keep run text inert, and its JSON with the API's tenancy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pi_runtime.server import TokenTable
from pi_runtime.server.viewer import ASSETS, asset
from serve_support import LOOKUP_THEN_ANSWER, write_agent
from viewer_support import ACME, APPROVAL, TOKEN, ZETA, client, refunds, tenants, viewer_server


@pytest.mark.parametrize("path", ["/", "/sessions/s1", "/runs/run-1"])
def test_a_page_without_a_login_redirects_to_the_form_and_names_the_page(
    tmp_path: Path, path: str
) -> None:
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=TokenTable.single(TOKEN)) as server,
        client(server) as http,
    ):
        answer = http.get(path)
        assert answer.status_code == 303
        assert answer.headers["location"] == f"/login?next={path}"
        form = http.get(answer.headers["location"])
        assert form.status_code == 200 and 'action="/login"' in form.text
        assert f'name="next" value="{path}"' in form.text
        http.cookies.set("pi_session", "forged.99999999999.abc")
        assert http.get(path).status_code == 303


def test_the_login_form_escapes_the_page_it_returns_to(tmp_path: Path) -> None:
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=TokenTable.single(TOKEN)) as server,
        client(server) as http,
    ):
        form = http.get("/login", params={"next": '/x"><script>alert(1)</script>'}).text
        assert "<script>alert" not in form and '"><' not in form
        assert 'value="/x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in form
        offsite = http.get("/login", params={"next": "//evil.example/"}).text
        assert 'name="next" value="/"' in offsite


def test_another_sites_page_cannot_log_a_browser_in(tmp_path: Path) -> None:
    # login CSRF: a form on another site, posting its own tenant's token, set the cookie
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=TokenTable.single(TOKEN)) as server,
        client(server) as http,
    ):
        for site in ("cross-site", "same-site"):
            forged = http.post("/login", data={"token": TOKEN}, headers={"Sec-Fetch-Site": site})
            assert forged.status_code == 403 and "set-cookie" not in forged.headers
            assert forged.json()["error"]["message"] == "log in from this server's own login page"
        for own in ({"Sec-Fetch-Site": "same-origin"}, {}):  # a browser's own form; curl
            assert http.post("/login", data={"token": TOKEN}, headers=own).status_code == 303


def test_after_login_every_page_is_the_shell_under_a_strict_policy(tmp_path: Path) -> None:
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=TokenTable.single(TOKEN)) as server,
        client(server) as http,
    ):
        login = http.post("/login", data={"token": TOKEN, "next": "/runs/run-1"})
        assert login.status_code == 303 and login.headers["location"] == "/runs/run-1"
        page = http.get("/runs/run-1")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "connect-src 'self'" in policy and "unsafe" not in policy
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["x-frame-options"] == "DENY"
        assert page.content == asset("page.html")


def test_the_viewer_loads_nothing_from_elsewhere_and_serves_only_its_files(
    tmp_path: Path,
) -> None:
    with viewer_server(tmp_path, [APPROVAL]) as server, client(server) as http:
        for name, media in ASSETS.items():
            answer = http.get(f"/static/{name}")
            assert answer.status_code == 200 and answer.headers["content-type"].startswith(media)
            assert "content-security-policy" in answer.headers
            text = answer.text.replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name only
            assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), name
        for name in ("page.html", "login.html"):
            refs = re.findall(r'(?:src|href)="([^"]*)"', asset(name).decode())
            assert refs and all(r.startswith("/") and not r.startswith("//") for r in refs), refs
        assert "innerHTML" not in asset("viewer.js").decode()  # run text goes in as text
        for path in ("/static/page.html", "/static/..%2Fviewer.py", "/static/nope.js"):
            assert http.get(path).status_code == 404
        # without tokens there is nothing to log in to: the form sends the browser on
        assert http.get("/login", params={"next": "/runs/r"}).headers["location"] == "/runs/r"


def test_tenants_named_alike_but_for_case_list_none_of_each_others(tmp_path: Path) -> None:
    # On SQLite `acme` listed `ACME`'s sessions (LIKE ignores ASCII case)
    agent = str(write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER))
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ACME: "acme", ZETA: "ACME"}), encoding="utf-8")
    with (
        viewer_server(tmp_path, [agent], tokens=TokenTable.from_file(path)) as server,
        client(server, ACME) as lower,
        client(server, ZETA) as upper,
    ):
        assert upper.post("/v1/sessions/secret-plan/runs", json={"message": "A-1?"}).is_success
        assert lower.post("/v1/sessions/mine/runs", json={"message": "A-1?"}).is_success
        assert [s["session_id"] for s in lower.get("/v1/sessions").json()["sessions"]] == ["mine"]
        listed = upper.get("/v1/sessions").json()["sessions"]
        assert [s["session_id"] for s in listed] == ["secret-plan"]


def test_a_tenant_lists_only_its_own_sessions_a_page_at_a_time(tmp_path: Path) -> None:
    agent = str(write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER))
    with (
        viewer_server(tmp_path, [agent], tokens=tenants(tmp_path)) as server,
        client(server, ACME) as acme,
        client(server, ZETA) as zeta,
    ):
        for sid in ("a1", "a2", "a3"):
            assert acme.post(f"/v1/sessions/{sid}/runs", json={"message": "A-1?"}).is_success
        assert zeta.post("/v1/sessions/z1/runs", json={"message": "A-1?"}).is_success

        first = acme.get("/v1/sessions", params={"limit": 2}).json()
        assert [s["session_id"] for s in first["sessions"]] == ["a3", "a2"]
        assert first["sessions"][0]["status"] == "completed"
        assert first["sessions"][0]["message_count"] == 4
        rest = acme.get("/v1/sessions", params={"limit": 2, "after": first["next"]}).json()
        assert [s["session_id"] for s in rest["sessions"]] == ["a1"] and rest["next"] is None
        assert [s["session_id"] for s in zeta.get("/v1/sessions").json()["sessions"]] == ["z1"]

        # another tenant's id is no cursor: the same answer as an id nobody used
        assert zeta.get("/v1/sessions", params={"after": "a1"}).status_code == 404
        assert zeta.get("/v1/sessions", params={"after": "never"}).status_code == 404
        assert acme.get("/v1/sessions", params={"limit": 0}).status_code == 422
        assert acme.get("/v1/sessions", params={"after": "a/b"}).status_code == 422
        with client(server) as nobody:
            assert nobody.get("/v1/sessions").status_code == 401


def test_a_runs_timeline_is_its_tenants_with_the_calls_that_wait(tmp_path: Path) -> None:
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=tenants(tmp_path)) as server,
        client(server, ACME) as acme,
        client(server, ZETA) as zeta,
    ):
        ran = acme.post("/v1/sessions/support-1/runs", json={"message": "refund A-1001"}).json()
        run_id = ran["run_id"]
        view = acme.get(f"/v1/runs/{run_id}/timeline").json()
        assert view["session_id"] == "support-1" and view["status"] == "awaiting"
        assert view["trace"] is True and view["live"] is False
        [pending] = view["pending_approvals"]
        assert pending == {k: ran["pending_approvals"][0][k] for k in pending}
        assert [r["kind"] for r in view["rows"]] == ["model", "tool", "approval", "done"]
        assert zeta.get(f"/v1/runs/{run_id}/timeline").status_code == 404

        decided = acme.post(
            f"/v1/sessions/support-1/approvals/{pending['call_id']}",
            json={"decision": "approve", "fingerprint": pending["fingerprint"]},
        ).json()
        assert decided["status"] == "completed" and len(refunds(tmp_path)) == 1
        before = acme.get(f"/v1/runs/{run_id}/timeline").json()
        assert before["pending_approvals"] == [] and before["continued_by"] == decided["run_id"]
        after = acme.get(f"/v1/runs/{decided['run_id']}/timeline").json()
        assert after["parent_run_id"] == run_id
        [refund] = [c for c in after["tool_calls"] if c["call_id"] == pending["call_id"]]
        assert refund["status"] == "approved" and refund["result"]  # read from the session
