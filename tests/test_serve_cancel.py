"""`POST /v1/sessions/{id}/cancel`: a session stopped over HTTP, as `pi session cancel`
stops it, and only by its own tenant."""

from __future__ import annotations

from pathlib import Path

from viewer_support import ACME, APPROVAL, ZETA, client, refunds, tenants, viewer_server


def test_cancelling_answers_the_waiting_call_and_a_later_approval_is_refused(
    tmp_path: Path,
) -> None:
    with (
        viewer_server(tmp_path, [APPROVAL], tokens=tenants(tmp_path)) as server,
        client(server, ACME) as acme,
        client(server, ZETA) as zeta,
    ):
        ran = acme.post("/v1/sessions/s1/runs", json={"message": "refund A-1001"}).json()
        assert ran["stop_reason"] == "awaiting_approval"
        call_id = ran["pending_approvals"][0]["call_id"]

        assert zeta.post("/v1/sessions/s1/cancel").status_code == 404  # not zeta's
        assert acme.get("/v1/sessions/s1").json()["status"] == "awaiting_approval"

        done = acme.post("/v1/sessions/s1/cancel")
        assert done.status_code == 200, done.text
        body = done.json()
        assert (body["session_id"], body["status"]) == ("s1", "cancelled")
        assert body["approvals_cancelled"] == [call_id]

        late = acme.post(f"/v1/sessions/s1/approvals/{call_id}", json={"decision": "approve"})
        assert late.status_code == 409, late.text
        assert refunds(tmp_path) == []  # the refund never ran

        again = acme.post("/v1/sessions/s1/cancel").json()  # done: nothing more to stop
        assert again["status"] == "cancelled" and again["approvals_cancelled"] == []
        assert acme.post("/v1/sessions/nope/cancel").status_code == 404
