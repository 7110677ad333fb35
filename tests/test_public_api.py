"""The public surface: one sorted __all__, every name importable from ``plait``."""

from __future__ import annotations

import plait


def test_all_is_sorted_and_complete() -> None:
    names = [n for n in plait.__all__ if n != "__version__"]
    assert names == sorted(names)
    for name in plait.__all__:
        assert hasattr(plait, name), name


def test_pinned_public_names() -> None:
    assert set(plait.__all__) == {
        "AskResult", "AsyncClient", "AuthenticationError", "Chunk", "ChunkSettings", "Citation",
        "Client", "CollectionInfo", "ConfigError",
        "CoverageReport", "Diagnosis", "EmbeddingReport", "ExplainResult", "FileOrigin",
        "FusionMethod", "FusionSettings", "Hit", "IndexReport", "Match", "ModelMismatchError",
        "NotFoundError", "PermissionDeniedError", "Plait", "PlaitError", "ProviderError",
        "ProviderResponseError", "ProviderUnavailableError", "Ranks", "RateLimitError", "SQLiteStore",
        "SearchMode", "SearchResult", "ServiceError", "ServiceTimeoutError", "ServiceUnavailableError", "SessionOrigin",
        "SkippedSource", "SourceError", "Store", "StoreError", "StoreUnavailableError",
        "ValidationError", "__version__", "open_store",
    }


def test_errors_share_one_base() -> None:
    for name in ("ConfigError", "ModelMismatchError", "NotFoundError", "ProviderError", "SourceError", "StoreError", "ValidationError", "ServiceError"):
        assert issubclass(getattr(plait, name), plait.PlaitError)
