"""The Knowledge Refinery's models: FAQ cards, runs and per-collection settings.

All serialise to camelCase JSON like every other plait model (:func:`plait.types.to_json`).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from plait.types import Model

__all__ = [
    "CARD_SCOPE",
    "CardMode",
    "CardStatus",
    "EditedCard",
    "FaqCard",
    "RefineryRun",
    "RefinerySettings",
    "RunProgress",
    "RunStatus",
]

#: The scope card questions are indexed under (searched only when named, or by qa_first).
CARD_SCOPE = "faq-card"


class CardStatus(StrEnum):
    """Review state of a card."""

    DRAFT = "draft"
    APPROVED = "approved"
    REJECTED = "rejected"


class CardMode(StrEnum):
    """How a card was made: by the LLM, from the corpus's own Q&A structure, or by hand."""

    LLM = "llm"
    EXTRACTIVE = "extractive"
    MANUAL = "manual"


class FaqCard(Model):
    """A distilled question and answer, citing the chunks it came from."""

    id: str
    collection: str
    question: str
    answer: str
    sources: list[str] = Field(default_factory=list)
    status: CardStatus = CardStatus.DRAFT
    mode: CardMode
    run_id: str | None = None
    created_at: str
    updated_at: str


class EditedCard(FaqCard):
    """A card as an edit left it, and ``note``: what the edit did beyond the text.

    An approved card whose question or answer changed is a draft again (``qa_first``
    serves it once it is approved again: the approval was of the old text), and a new
    answer that the card's source chunks do not back is said to be so
    (:mod:`plait.refinery.grounding`). None when there is nothing to say.
    """

    note: str | None = None


class RunStatus(StrEnum):
    """Lifecycle of a run: queued → running → succeeded | failed | cancelled."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class RunProgress(Model):
    """How far a run got: chunks scanned of the total, cards made and merged.

    ``cards_merged`` counts candidate cards folded into a near-duplicate (of this run
    or an earlier card); ``llm_calls`` the chat calls made; ``groups_skipped`` the
    chunk groups whose LLM reply could not be read as cards.
    """

    chunks_scanned: int = 0
    chunks_total: int = 0
    cards_made: int = 0
    cards_merged: int = 0
    llm_calls: int = 0
    groups_skipped: int = 0


class RefineryRun(Model):
    """One refinery run, as persisted: status, progress, timestamps and error."""

    id: str
    collection: str
    status: RunStatus
    mode: CardMode
    progress: RunProgress = Field(default_factory=RunProgress)
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    heartbeat_at: str | None = None
    pid: int | None = None
    error: str | None = None
    note: str | None = None
    cancel_requested: bool = False


class RefinerySettings(Model):
    """Per-collection refinery settings (stored in the collection's settings).

    ``scopes`` limits the scan (None: every scope but the cards' own); ``max_cards``
    caps the collection's non-rejected cards; ``group_size`` is how many chunks the
    LLM reads per call; ``dedupe_threshold`` the Jaccard similarity of question stems
    at which two questions are merged. For ``qa_first``: a card matches when its
    question's stem overlap with the query reaches ``qa_min_overlap`` or the cosine of
    the two reaches ``qa_min_cosine``; drafts count only with ``qa_include_drafts``.

    ``qa_min_cosine`` 0.92 is set above what the local e5 model gives two *different*
    questions of the example FAQ (up to 0.90, median 0.85), so a card is served on
    cosine alone only for near-restatements (paraphrases measured 0.84–0.95); a miss
    falls back to hybrid search, which is safer than serving the wrong card.
    """

    enabled: bool = True
    scopes: list[str] | None = None
    max_cards: int = Field(default=200, ge=1, le=10_000)
    group_size: int = Field(default=4, ge=1, le=32)
    dedupe_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    qa_min_overlap: float = Field(default=0.6, gt=0.0, le=1.0)
    qa_min_cosine: float = Field(default=0.92, gt=0.0, le=1.0)
    qa_include_drafts: bool = False
