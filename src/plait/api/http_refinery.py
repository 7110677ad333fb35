"""HTTP routes for ask, FAQ cards and refinery runs (added to the app by ``create_app``).

============================================  ==========  ============================
route                                         role        body → response
============================================  ==========  ============================
``POST /v1/collections/{c}/ask``              reader      AskRequest → AskResult
``GET  /v1/collections/{c}/faq``              reader      ``?status=`` → [FaqCard]
``POST /v1/collections/{c}/faq/{id}/approve`` maintainer  → FaqCard
``POST /v1/collections/{c}/faq/{id}/reject``  maintainer  → FaqCard
``PATCH /v1/collections/{c}/faq/{id}``        maintainer  CardEdit → EditedCard
``POST /v1/collections/{c}/refinery/runs``    maintainer  RunRequest → RefineryRun (202)
``GET  /v1/collections/{c}/refinery/runs``    maintainer  → [RefineryRun]
``GET  /v1/collections/{c}/refinery/runs/{id}``  maintainer  → RefineryRun
``POST /v1/collections/{c}/refinery/runs/{id}/cancel``  maintainer  → RefineryRun
============================================  ==========  ============================

A run started here executes on a background thread of the server process; if the
server stops, the run is marked failed the next time runs are read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from plait.api.keys import ApiKey, Role, sees_drafts
from plait.ask import AskRequest, AskResult
from plait.errors import NotFoundError
from plait.refinery.models import EditedCard, FaqCard, RefineryRun
from plait.types import Model

if TYPE_CHECKING:
    from fastapi import FastAPI

    from plait.service import Plait

__all__ = ["CardEdit", "RunRequest", "add_refinery_routes"]

Allow = Callable[[ApiKey | None, str, Role, str], None]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "no or unknown API key"},
    404: {"description": "no such collection, card or run (or not covered by the key)"},
}


class CardEdit(Model):
    """A card's new question and/or answer."""

    question: str | None = None
    answer: str | None = None


class RunRequest(Model):
    """How to run: ``auto`` uses the LLM when one is configured, else extractive."""

    mode: Literal["auto", "llm", "extractive"] = "auto"


def add_refinery_routes(app: FastAPI, engine: Plait, allow: Allow, caller: Any) -> None:
    """Add the routes of the module docstring; ``allow`` checks a key's role."""
    from fastapi import Query

    @app.post(
        "/v1/collections/{collection}/ask",
        response_model=AskResult,
        tags=["ask"],
        responses={**_ERRORS, 422: {"description": "invalid request"}},
    )
    def ask(collection: str, body: AskRequest, key: ApiKey | None = caller) -> AskResult:
        """A grounded answer with ``[n]`` citations checked against the sources given."""
        allow(key, collection, Role.READER, "ask")
        if body.include_drafts:  # answering from FAQ cards nobody approved yet: reviewers only
            allow(key, collection, Role.MAINTAINER, "ask with includeDrafts")
        return engine.ask_request(collection, body)

    @app.get("/v1/collections/{collection}/faq", response_model=list[FaqCard], tags=["faq"], responses={**_ERRORS, 403: {"description": "status draft or rejected, and the key is a reader"}})
    def list_cards(
        collection: str,
        status: Literal["draft", "approved", "rejected"] | None = Query(default=None),
        key: ApiKey | None = caller,
    ) -> list[FaqCard]:
        """The collection's FAQ cards, oldest first (of one status when given).

        A reader key sees approved cards only: no status lists those, and ``draft`` or
        ``rejected`` need a maintainer (who reviews them)."""
        allow(key, collection, Role.READER, "listing FAQ cards")
        if not sees_drafts(key):
            if status not in (None, "approved"):
                allow(key, collection, Role.MAINTAINER, f"listing {status} FAQ cards")
            status = "approved"
        return engine.refinery.cards(collection, status=status)

    @app.post(
        "/v1/collections/{collection}/faq/{card_id}/approve",
        response_model=FaqCard,
        tags=["faq"],
        responses={**_ERRORS, 403: {"description": "the key is not a maintainer"}},
    )
    def approve(collection: str, card_id: str, key: ApiKey | None = caller) -> FaqCard:
        """Approve a card: ``qaFirst`` serves it from now on."""
        allow(key, collection, Role.MAINTAINER, "card review")
        return engine.refinery.approve(collection, card_id)

    @app.post(
        "/v1/collections/{collection}/faq/{card_id}/reject",
        response_model=FaqCard,
        tags=["faq"],
        responses={**_ERRORS, 403: {"description": "the key is not a maintainer"}},
    )
    def reject(collection: str, card_id: str, key: ApiKey | None = caller) -> FaqCard:
        """Reject a card: it leaves the index and later runs do not draft it again."""
        allow(key, collection, Role.MAINTAINER, "card review")
        return engine.refinery.reject(collection, card_id)

    @app.patch(
        "/v1/collections/{collection}/faq/{card_id}",
        response_model=EditedCard,
        tags=["faq"],
        responses={**_ERRORS, 403: {"description": "the key is not a maintainer"}},
    )
    def edit(collection: str, card_id: str, body: CardEdit, key: ApiKey | None = caller) -> EditedCard:
        """Change a card's question and/or answer. An approved card whose text changes is a
        draft again (``qaFirst`` serves it once approved anew); ``note`` says so, and when
        the card's source chunks do not back the new answer."""
        allow(key, collection, Role.MAINTAINER, "card review")
        return engine.refinery.edit(collection, card_id, question=body.question, answer=body.answer)

    @app.post(
        "/v1/collections/{collection}/refinery/runs",
        response_model=RefineryRun,
        status_code=202,
        tags=["refinery"],
        responses={**_ERRORS, 403: {"description": "the key is not a maintainer"}},
    )
    def start_run(
        collection: str, body: RunRequest | None = None, key: ApiKey | None = caller
    ) -> RefineryRun:
        """Start a refinery run in the background; follow it at ``…/refinery/runs/{id}``."""
        allow(key, collection, Role.MAINTAINER, "refinery runs")
        return engine.refinery.start(collection, mode=(body or RunRequest()).mode)

    @app.get(
        "/v1/collections/{collection}/refinery/runs",
        response_model=list[RefineryRun],
        tags=["refinery"],
        responses={**_ERRORS, 403: {"description": "the key is not a maintainer"}},
    )
    def list_runs(collection: str, key: ApiKey | None = caller) -> list[RefineryRun]:
        """The collection's runs, newest first."""
        allow(key, collection, Role.MAINTAINER, "refinery runs")
        if engine.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        return engine.refinery.list_runs(collection)

    @app.get(
        "/v1/collections/{collection}/refinery/runs/{run_id}",
        response_model=RefineryRun,
        tags=["refinery"],
        responses={**_ERRORS, 403: {"description": "the key is not a maintainer"}},
    )
    def get_run(collection: str, run_id: str, key: ApiKey | None = caller) -> RefineryRun:
        """A run's status, progress (chunks scanned of total, cards made), timestamps, error."""
        allow(key, collection, Role.MAINTAINER, "refinery runs")
        return engine.refinery.get_run(run_id, collection)  # another collection's run: 404

    @app.post(
        "/v1/collections/{collection}/refinery/runs/{run_id}/cancel",
        response_model=RefineryRun,
        tags=["refinery"],
        responses={**_ERRORS, 403: {"description": "the key is not a maintainer"}},
    )
    def cancel_run(collection: str, run_id: str, key: ApiKey | None = caller) -> RefineryRun:
        """Ask a run to stop; a finished run is returned unchanged."""
        allow(key, collection, Role.MAINTAINER, "refinery runs")
        return engine.refinery.cancel(run_id, collection)
