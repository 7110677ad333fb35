"""Every error plait raises on purpose.

    PlaitError
    ├── ConfigError            a setting or option has a value plait cannot use
    ├── ValidationError        a request is malformed (empty query, k out of range, …)
    │   └── ConflictError      it conflicts with the current state (a refinery run is active)
    ├── NotFoundError          a collection, chunk or source does not exist
    ├── ModelMismatchError     a collection was indexed with another embedding model
    ├── StoreError             the store cannot be opened, read or written
    │   ├── StoreUnavailableError   a store server is unreachable
    │   ├── StoreConflictError      a write lost a lock conflict (deadlock, serialization): retry it
    │   └── StoreReadOnlyError      the store refuses writes (a PostgreSQL hot standby): write to the primary
    ├── ProviderError          an embedding or LLM provider failed
    │   ├── ProviderUnavailableError  connection refused, DNS, timeout
    │   └── ProviderResponseError     an answer that is not what the protocol promises
    ├── SourceError            a source (folder, file, log) cannot be read at all
    └── ServiceError           a plait server (``plait.client``) failed a request it gave no type for
        ├── AuthenticationError      401: no or unknown API key
        ├── PermissionDeniedError    403: the key's role is too low, or the Host is not served
        └── ServiceUnavailableError  the server is unreachable or busy (503); ``retry_after``
            ├── RateLimitError       429: too many requests
            └── ServiceTimeoutError  no answer within the client's timeout (or a 408)

Callers catch `PlaitError` for "plait said no"; anything else is a bug. Over HTTP
(:class:`plait.client.Client`) a server error comes back as the same class the server
raised (the ``X-Plait-Error`` response header names it), so code that catches
``NotFoundError`` around ``Plait.search`` catches it around ``Client.search`` too; the
``ServiceError`` branch is only raised by the client.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "ConfigError",
    "ConflictError",
    "ModelMismatchError",
    "NotFoundError",
    "PermissionDeniedError",
    "PlaitError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailableError",
    "RateLimitError",
    "ServiceError",
    "ServiceTimeoutError",
    "ServiceUnavailableError",
    "SourceError",
    "StoreConflictError",
    "StoreError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "ValidationError",
]


class PlaitError(Exception):
    """Base of every error plait raises on purpose."""


class ConfigError(PlaitError):
    """A setting or option has a value plait cannot use."""


class ValidationError(PlaitError):
    """A request is malformed: the message names the bad value and the allowed ones."""


class ConflictError(ValidationError):
    """The request conflicts with the current state (HTTP 409), e.g. a second refinery
    run while one is active. A ``ValidationError`` for callers that catch that."""


class NotFoundError(PlaitError):
    """A collection, chunk or source does not exist."""


class ModelMismatchError(PlaitError):
    """A collection was indexed with one embedding model and is used with another."""


class StoreError(PlaitError):
    """The store cannot be opened, read or written."""


class StoreUnavailableError(StoreError):
    """A store server is unreachable."""


class StoreConflictError(StoreError):
    """The store server is there, but aborted the transaction for a conflict with another
    one (a deadlock, a serialization failure, a lock not granted in time): nothing of it
    was written, and running it again is expected to succeed."""


class StoreReadOnlyError(StoreError):
    """The store refuses writes: a PostgreSQL hot standby (read replica), or a server
    whose sessions are ``default_transaction_read_only``. Nothing of the refused write was
    stored; send writes to the primary (retrying on the same server does not help until
    it is promoted). Opening a store on a standby that lacks the schema the code needs, or
    migrating one, raises it too. HTTP 409."""


class ProviderError(PlaitError):
    """An embedding or LLM provider failed."""


class ProviderUnavailableError(ProviderError):
    """The provider could not be reached in time (refused, DNS, timeout)."""


class ProviderResponseError(ProviderError):
    """The provider answered, but not with what its protocol promises."""


class SourceError(PlaitError):
    """A source cannot be read at all (missing folder, unreadable log)."""


class ServiceError(PlaitError):
    """A plait server answered a request with an error that names no other class here
    (a 500, an unexpected status or body), or could not be asked at all.

    ``status`` is the HTTP status (None when no answer came) and ``retry_after`` the
    seconds the server's ``Retry-After`` header asked for (None when it sent none).
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class AuthenticationError(ServiceError):
    """401: the request carried no API key, or one the server does not know (or revoked)."""


class PermissionDeniedError(ServiceError):
    """403: the key's role is too low for the call (e.g. reindex needs a maintainer),
    or a server without auth refused the request's Host."""


class ServiceUnavailableError(ServiceError):
    """The server could not be reached (refused, DNS) or said it is busy (503): worth
    retrying, after ``retry_after`` seconds when it said so."""


class RateLimitError(ServiceUnavailableError):
    """429: the server (or a proxy in front of it) asks for fewer requests."""


class ServiceTimeoutError(ServiceUnavailableError):
    """No complete answer within the client's timeout (connect, read, write or pool),
    or a 408 because the request body did not reach the server in time."""
