"""Every error plait raises on purpose.

    PlaitError
    ├── ConfigError            a setting or option has a value plait cannot use
    ├── ValidationError        a request is malformed (empty query, k out of range, …)
    │   └── ConflictError      it conflicts with the current state (a refinery run is active)
    ├── NotFoundError          a collection, chunk or source does not exist
    ├── ModelMismatchError     a collection was indexed with another embedding model
    ├── StoreError             the store cannot be opened, read or written
    │   └── StoreUnavailableError   a store server is unreachable
    ├── ProviderError          an embedding or LLM provider failed
    │   ├── ProviderUnavailableError  connection refused, DNS, timeout
    │   └── ProviderResponseError     an answer that is not what the protocol promises
    └── SourceError            a source (folder, file, log) cannot be read at all

Callers catch `PlaitError` for "plait said no"; anything else is a bug.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ConflictError",
    "ModelMismatchError",
    "NotFoundError",
    "PlaitError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailableError",
    "SourceError",
    "StoreError",
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


class ProviderError(PlaitError):
    """An embedding or LLM provider failed."""


class ProviderUnavailableError(ProviderError):
    """The provider could not be reached in time (refused, DNS, timeout)."""


class ProviderResponseError(ProviderError):
    """The provider answered, but not with what its protocol promises."""


class SourceError(PlaitError):
    """A source cannot be read at all (missing folder, unreadable log)."""
