"""What the store raises when it refuses an operation.

Hierarchy::

    PiError
    └── StoreError           the store refused or could not do an operation
        ├── NotFound         the session, run, job or event does not exist
        ├── Conflict         the state changed under the caller (stale version, busy
        │                    session, a second result for one tool call, …)
        ├── LeaseLost        the caller's lease expired or was taken: stop working on it
        └── StoreUnavailable the database could not be reached mid-operation

Misuse before anything runs (a bad URL, a missing driver) is `UserError`.
"""

from __future__ import annotations

from ..exceptions import PiError


class StoreError(PiError):
    """The store refused or could not do an operation; nothing of it was written."""


class NotFound(StoreError, LookupError):
    """The session, run, job or event named does not exist."""


class Conflict(StoreError):
    """The state changed under the caller: re-read and decide again."""


class LeaseLost(StoreError):
    """The lease expired or another owner holds it; the holder must stop and write nothing."""


class StoreUnavailable(StoreError):
    """The database could not be reached or kept failing; the operation may be retried."""
