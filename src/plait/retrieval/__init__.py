"""Retrieval: the query plan and the one pipeline search, explain, calibration and
evaluation all run (see :mod:`plait.retrieval.plan` and :mod:`plait.retrieval.pipeline`)."""

from plait.retrieval.pipeline import RerankTrace, Trace, fuse, hits_for, rerank_order, run, run_arms, without_hidden
from plait.retrieval.plan import (
    SEARCH_HIDDEN_KEY,
    QueryPlan,
    embed_query,
    hidden_chunks,
    lexical_terms,
    plan_for_text,
    plan_query,
    request_settings,
    saved_fusion,
)
from plait.retrieval.request import SearchRequest, validated

__all__ = [
    "SEARCH_HIDDEN_KEY",
    "QueryPlan",
    "RerankTrace",
    "SearchRequest",
    "Trace",
    "embed_query",
    "fuse",
    "hidden_chunks",
    "hits_for",
    "lexical_terms",
    "plan_for_text",
    "plan_query",
    "request_settings",
    "rerank_order",
    "run",
    "run_arms",
    "saved_fusion",
    "validated",
    "without_hidden",
]
