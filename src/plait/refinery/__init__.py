"""The Knowledge Refinery: FAQ cards distilled from a collection in async runs.

A run scans a collection's chunks and drafts cards ``{question, answer, sources}``
(by an LLM when one is configured, else from the corpus's own Q&A structure); cards
are reviewed (approve / reject / edit) and, with ``qa_first``, search and ask serve a
matching card before falling back to hybrid search. Runs and cards live in their own
SQLite file (:mod:`plait.refinery.store`); card questions are indexed in both arms
under the ``faq-card`` scope (:mod:`plait.refinery.cards`).
"""

from __future__ import annotations

from plait.refinery.models import (
    CARD_SCOPE,
    CardMode,
    CardStatus,
    EditedCard,
    FaqCard,
    RefineryRun,
    RefinerySettings,
    RunProgress,
    RunStatus,
)
from plait.refinery.service import DEFAULT_STALE_AFTER, Refinery

__all__ = [
    "CARD_SCOPE",
    "DEFAULT_STALE_AFTER",
    "CardMode",
    "CardStatus",
    "EditedCard",
    "FaqCard",
    "Refinery",
    "RefineryRun",
    "RefinerySettings",
    "RunProgress",
    "RunStatus",
]
