"""The browser session cookie: signed, expiring, and revoked by logging out."""

from __future__ import annotations

import pytest

from pi_runtime.server import auth
from pi_runtime.server.auth import COOKIE_TTL_S, Authenticator
from pi_runtime.server.config import TokenTable
from pi_runtime.server.tenancy import Principal

TOKEN = "a-long-enough-token-0123456789"
NOW = 1_800_000_000.0


def authenticator() -> Authenticator:
    return Authenticator(TokenTable.single(TOKEN))


def test_a_cookie_names_its_tenant_until_it_expires() -> None:
    keys = authenticator()
    cookie = keys.cookie_for(Principal("acme"), now=NOW)

    assert keys.from_cookie(cookie, now=NOW) == Principal("acme")
    assert keys.from_cookie(cookie, now=NOW + COOKIE_TTL_S + 1) is None
    assert authenticator().from_cookie(cookie, now=NOW) is None  # another server's key


def test_two_logins_get_two_cookies_and_a_logout_revokes_only_its_own() -> None:
    keys = authenticator()
    first, second = (keys.cookie_for(Principal("acme"), now=NOW) for _ in range(2))
    assert first != second

    assert keys.revoke(first, now=NOW)

    assert keys.from_cookie(first, now=NOW) is None
    assert keys.from_cookie(second, now=NOW) == Principal("acme")


@pytest.mark.parametrize("cookie", ["", "x", "a.b.c.d", "bm9uZQ.1.2"])
def test_revoking_what_is_no_cookie_changes_nothing(cookie: str) -> None:
    keys = authenticator()
    valid = keys.cookie_for(Principal(None), now=NOW)

    assert not keys.revoke(cookie, now=NOW)
    assert not keys.revoke(valid[:-2] + "00", now=NOW)  # tampered

    assert keys.revoked == {}
    assert keys.from_cookie(valid, now=NOW) == Principal(None)


def test_revoked_ids_are_forgotten_once_their_cookies_expire() -> None:
    keys = authenticator()
    old = keys.cookie_for(Principal(None), now=NOW)
    keys.revoke(old, now=NOW)
    later = NOW + COOKIE_TTL_S + 1
    new = keys.cookie_for(Principal(None), now=later)

    keys.revoke(new, now=later)

    assert len(keys.revoked) == 1  # the first id is gone; its cookie expired anyway
    assert keys.from_cookie(old, now=later) is None


def test_past_the_revocation_limit_the_key_changes_and_every_cookie_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(auth, "MAX_REVOKED", 2)
    keys = authenticator()
    cookies = [keys.cookie_for(Principal(None), now=NOW) for _ in range(4)]

    for cookie in cookies[:3]:
        assert keys.revoke(cookie, now=NOW)

    assert keys.revoked == {}
    assert all(keys.from_cookie(c, now=NOW) is None for c in cookies)  # none comes back
    assert keys.from_cookie(keys.cookie_for(Principal(None), now=NOW), now=NOW) is not None
