"""plait — hybrid retrieval for RAG.

BM25 and dense vectors over the same chunks, fused with Reciprocal Rank Fusion before
the top-k cut; every hit carries its citation, match badge and rank in each arm.
"""

from __future__ import annotations

from plait.ask import AskResult, Citation
from plait.chunking import ChunkSettings
from plait.client import AsyncClient, Client
from plait.coverage import CoverageReport
from plait.errors import (
    AuthenticationError,
    ConfigError,
    ModelMismatchError,
    NotFoundError,
    PermissionDeniedError,
    PlaitError,
    ProviderError,
    ProviderResponseError,
    ProviderUnavailableError,
    RateLimitError,
    ServiceError,
    ServiceTimeoutError,
    ServiceUnavailableError,
    SourceError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
)
from plait.explain_models import Diagnosis, ExplainResult
from plait.service import Plait
from plait.stores import SQLiteStore, Store, open_store
from plait.types import (
    Chunk,
    CollectionInfo,
    EmbeddingReport,
    FileOrigin,
    FusionMethod,
    FusionSettings,
    Hit,
    IndexReport,
    Match,
    Ranks,
    SearchMode,
    SearchResult,
    SessionOrigin,
    SkippedSource,
)

__version__ = "0.1.0"

__all__ = [
    "AskResult",
    "AsyncClient",
    "AuthenticationError",
    "Chunk",
    "ChunkSettings",
    "Citation",
    "Client",
    "CollectionInfo",
    "ConfigError",
    "CoverageReport",
    "Diagnosis",
    "EmbeddingReport",
    "ExplainResult",
    "FileOrigin",
    "FusionMethod",
    "FusionSettings",
    "Hit",
    "IndexReport",
    "Match",
    "ModelMismatchError",
    "NotFoundError",
    "PermissionDeniedError",
    "Plait",
    "PlaitError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailableError",
    "Ranks",
    "RateLimitError",
    "SQLiteStore",
    "SearchMode",
    "SearchResult",
    "ServiceError",
    "ServiceTimeoutError",
    "ServiceUnavailableError",
    "SessionOrigin",
    "SkippedSource",
    "SourceError",
    "Store",
    "StoreError",
    "StoreUnavailableError",
    "ValidationError",
    "__version__",
    "open_store",
]
