"""Whose sessions a caller sees: session ids namespaced by tenant.

A tenant's session `s1` is stored as `acme/s1`. Ids in URLs cannot hold a `/`, so a
caller without a tenant (one `--token`, or none) never reaches a tenant's session, and a
tenant never reaches another's or an un-namespaced one. A session that is not the
caller's is reported exactly as one that does not exist (404), so ids leak nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
"""A session id as a URL carries it (a run id has the same shape)."""
SEPARATOR = "/"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: `tenant` None when tokens name no tenants (or there are none)."""

    tenant: str | None = None

    def stored_id(self, session_id: str) -> str:
        """The id the store keeps for the caller's session `session_id`."""
        return session_id if self.tenant is None else f"{self.tenant}{SEPARATOR}{session_id}"

    def public_id(self, stored_id: str) -> str:
        """The id the caller knows for a session it owns (see `owns`)."""
        if self.tenant is None:
            return stored_id
        return stored_id.removeprefix(f"{self.tenant}{SEPARATOR}")

    def owns(self, stored_id: str) -> bool:
        """Whether the stored session `stored_id` is the caller's."""
        if self.tenant is None:
            return SEPARATOR not in stored_id
        prefix = f"{self.tenant}{SEPARATOR}"
        return stored_id.startswith(prefix) and SEPARATOR not in stored_id[len(prefix) :]
