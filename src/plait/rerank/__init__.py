"""Rerankers: reorder the fused top ``k_overfetch`` candidates before the final cut.

====================  ===============================  ===============================
``rerank=``           class                            needs
====================  ===============================  ===============================
``"llm"``             :class:`LLMReranker` (listwise)  a chat LLM (``PLAIT_LLM``)
``"cross-encoder"``   :class:`CrossEncoderReranker`    a local model directory or
                                                       package (``PLAIT_CROSS_ENCODER``)
                                                       and ``plait[rerank]``
====================  ===============================  ===============================

Rerank is opt-in per call. The LLM reranker never fails a search: a failed, timed-out
or unreadable call returns the fused order with ``reranked: false`` and the reason.
"""

from __future__ import annotations

from pathlib import Path

from plait.config import Settings
from plait.errors import ConfigError
from plait.llm import LLM, make_llm
from plait.rerank.base import Candidate, Reranker, RerankOutcome, complete_order, fused_order
from plait.rerank.cross_encoder import CROSS_ENCODER_INSTALL_HINT, CrossEncoderReranker
from plait.rerank.llm import LLMReranker, parse_ordering

__all__ = [
    "CROSS_ENCODER_INSTALL_HINT",
    "RERANK_METHODS",
    "Candidate",
    "CrossEncoderReranker",
    "LLMReranker",
    "RerankOutcome",
    "Reranker",
    "complete_order",
    "fused_order",
    "make_reranker",
    "parse_ordering",
]

#: Every value ``rerank=`` accepts.
RERANK_METHODS: tuple[str, ...] = ("llm", "cross-encoder")


def make_reranker(
    method: str,
    *,
    llm: LLM | str | None = None,
    cross_encoder: Reranker | str | Path | None = None,
) -> Reranker:
    """Build the reranker for ``method`` (one of :data:`RERANK_METHODS`).

    ``llm`` is an :class:`~plait.llm.LLM` or a provider name (None reads ``PLAIT_LLM``);
    ``cross_encoder`` is a reranker, a model directory or a package name (None reads
    ``PLAIT_CROSS_ENCODER``). Raises :class:`~plait.errors.ConfigError` when the method
    is unknown or what it needs is not configured.
    """
    if method == "llm":
        chat = llm if llm is not None and not isinstance(llm, str) else make_llm(llm)
        if chat is None:
            raise ConfigError(
                "rerank='llm' needs an LLM and none is configured: set PLAIT_LLM (ollama | openai) "
                "where plait runs (for plait serve and plait mcp, the server's environment), "
                "or pass llm= (Python) / --llm (CLI)"
            )
        return LLMReranker(chat)
    if method == "cross-encoder":
        if cross_encoder is not None and not isinstance(cross_encoder, (str, Path)):
            return cross_encoder
        spec = cross_encoder or Settings.resolve().cross_encoder
        if not spec:
            raise ConfigError(
                "rerank='cross-encoder' needs a model and none is configured: set PLAIT_CROSS_ENCODER "
                "(a model directory or package) where plait runs (for plait serve and plait mcp, the "
                "server's environment), or pass cross_encoder= (Python) / --cross-encoder (CLI)"
            )
        return CrossEncoderReranker(spec)
    raise ConfigError(f"unknown rerank method {method!r}; allowed: {', '.join(RERANK_METHODS)}")
