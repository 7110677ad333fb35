"""The Knowledge Refinery facade: runs, settings, cards and ``qa_first`` for one engine.

>>> refinery = engine.refinery                              # doctest: +SKIP
>>> run = refinery.start("default")                         # background thread
>>> refinery.wait(run.id).status                            # doctest: +SKIP
'succeeded'
>>> refinery.approve("default", refinery.cards("default")[0].id)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError as PydanticValidationError

from plait.collection_settings import read_settings, write_settings
from plait.errors import ConfigError, NotFoundError, PlaitError, ValidationError
from plait.refinery.cards import match_card, qa_first_search, sync_cards
from plait.refinery.grounding import card_support, indexed_text
from plait.refinery.models import (
    CardMode,
    CardStatus,
    EditedCard,
    FaqCard,
    RefineryRun,
    RefinerySettings,
    RunStatus,
)
from plait.refinery.runner import RunProgressFn, execute_run, mark_live, recover_runs
from plait.refinery.store import RefineryStore
from plait.search import SearchRequest
from plait.types import CardHit, SearchResult, to_json

if TYPE_CHECKING:
    from plait.searcher import Searcher

__all__ = ["DEFAULT_STALE_AFTER", "SETTINGS_KEY", "Refinery"]

#: Collection setting holding the refinery settings.
SETTINGS_KEY = "refinery"
#: Seconds without a heartbeat after which a running run is presumed dead.
DEFAULT_STALE_AFTER = 60.0
_MODES = ("auto", "llm", "extractive")
_MAX_QUESTION = 300
_MAX_ANSWER = 4000


class Refinery:
    """FAQ-card runs and review over one engine (a :class:`~plait.searcher.Searcher`, e.g. Plait).

    Runs and cards live in the engine's store (:meth:`~plait.stores.base.Store.records`);
    ``path`` names a stand-alone refinery file instead. Opening marks interrupted runs failed.
    """

    def __init__(
        self,
        engine: Searcher,
        *,
        path: str | Path | None = None,
        stale_after: float = DEFAULT_STALE_AFTER,
        heartbeat_every: float = 2.0,
    ) -> None:
        if not stale_after > heartbeat_every > 0:
            raise ConfigError(
                f"need stale_after > heartbeat_every > 0, got {stale_after!r} and {heartbeat_every!r}"
            )
        self.engine = engine
        self.path = Path(path) if path is not None else None
        self.store = RefineryStore(self.path if self.path is not None else engine.store.records())
        self.stale_after = stale_after
        self.heartbeat_every = heartbeat_every
        self._threads: dict[str, threading.Thread] = {}
        self.recover()

    # settings --------------------------------------------------------------------
    def _require(self, collection: str) -> None:
        if self.engine.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")

    def settings(self, collection: str) -> RefinerySettings:
        """The collection's refinery settings (defaults where none were saved)."""
        self._require(collection)
        saved = read_settings(self.engine.store, collection).refinery
        return RefinerySettings.model_validate(saved)

    def configure(self, collection: str, **changes: Any) -> RefinerySettings:
        """Change refinery settings (snake_case names of :class:`RefinerySettings`)."""
        current = self.settings(collection)
        unknown = set(changes) - set(RefinerySettings.model_fields)
        if unknown:
            allowed = ", ".join(sorted(RefinerySettings.model_fields))
            raise ValidationError(f"unknown refinery setting(s) {sorted(unknown)}; allowed: {allowed}")
        try:
            updated = RefinerySettings.model_validate({**current.model_dump(), **changes})
        except PydanticValidationError as exc:
            parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
            raise ValidationError("invalid refinery settings: " + "; ".join(parts)) from None
        write_settings(self.engine.store, collection, refinery=to_json(updated))
        return updated

    # runs ------------------------------------------------------------------------
    def recover(self) -> list[RefineryRun]:
        """Mark runs whose worker is gone (or silent) failed; returns them."""
        return recover_runs(self.store, stale_after=self.stale_after)

    def _mode(self, mode: str | None) -> CardMode:
        chosen = (mode or "auto").strip().lower()
        if chosen not in _MODES:
            raise ValidationError(f"unknown refinery mode {mode!r}; allowed: {', '.join(_MODES)}")
        if chosen == "auto":
            return CardMode.LLM if self.engine.llm is not None else CardMode.EXTRACTIVE
        if chosen == "llm" and self.engine.llm is None:
            raise ConfigError(
                "refinery mode 'llm' needs an LLM and none is configured: set PLAIT_LLM (ollama | openai) "
                "where plait runs (for plait serve, the server's environment), or pass llm= (Python) / "
                "--llm (CLI)"
            )
        return CardMode(chosen)

    def create_run(self, collection: str, *, mode: str | None = None) -> RefineryRun:
        """A queued run, not yet executing (see :meth:`execute`, :meth:`start`).

        It has no worker pid until a worker claims it; one never claimed is marked
        failed once it is ``stale_after`` seconds old.
        """
        settings = self.settings(collection)
        if not settings.enabled:
            raise ConfigError(
                f"the refinery is disabled for collection {collection!r}: "
                "enable it with 'plait refinery settings --enable'"
            )
        self.recover()
        return self.store.create_run(collection, self._mode(mode), exclusive=True)  # 409 if one is active

    def execute(self, run_id: str, *, progress: RunProgressFn | None = None) -> RefineryRun:
        """Execute a queued run in this thread; returns it finished."""
        run = self.store.get_run(run_id)
        return execute_run(
            self.engine,
            self.store,
            run_id,
            self.settings(run.collection),
            llm=self.engine.llm if run.mode == CardMode.LLM else None,
            heartbeat_every=self.heartbeat_every,
            progress=progress,
        )

    def run(
        self, collection: str, *, mode: str | None = None, progress: RunProgressFn | None = None
    ) -> RefineryRun:
        """Create and execute a run here, waiting for it (the CLI's default)."""
        run = self.create_run(collection, mode=mode)
        return self.execute(run.id, progress=progress)

    def start(self, collection: str, *, mode: str | None = None) -> RefineryRun:
        """Start a run on a background thread of this process; returns it queued."""
        run = self.create_run(collection, mode=mode)

        def work() -> None:
            try:
                self.execute(run.id)
            except Exception as exc:  # noqa: BLE001 - never let the thread die with the run unfinished
                with contextlib.suppress(PlaitError):  # the file may be closed under us
                    self.store.finish_run(run.id, RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
            finally:
                mark_live(run.id, False)

        thread = threading.Thread(target=work, daemon=True, name=f"refinery-{run.id}")
        self._threads[run.id] = thread
        thread.start()
        return run

    def get_run(self, run_id: str, collection: str | None = None) -> RefineryRun:
        """A run's status and progress (interrupted runs are marked failed first).

        ``collection`` given, the run must be one of that collection's: a run of another
        collection is not found there, as a run that does not exist (every interface
        that names a collection asks this way, so none acts on another's run)."""
        self.recover()
        elsewhere = f"refinery run {run_id!r} does not exist in collection {collection!r}"
        try:
            run = self.store.get_run(run_id)
        except NotFoundError:
            if collection is None:
                raise
            raise NotFoundError(elsewhere) from None
        if collection is not None and run.collection != collection:
            raise NotFoundError(elsewhere)
        return run

    def list_runs(self, collection: str | None = None, *, limit: int = 50) -> list[RefineryRun]:
        self.recover()
        return self.store.list_runs(collection, limit=limit)

    def cancel(self, run_id: str, collection: str | None = None) -> RefineryRun:
        """Ask a run to stop; a queued run is cancelled at once. Finished runs are unchanged.
        ``collection`` given, the run must be one of that collection's (see :meth:`get_run`)."""
        run = self.get_run(run_id, collection)
        if run.status.finished:
            return run
        self.store.request_cancel(run_id)
        self.store.finish_run(
            run_id, RunStatus.CANCELLED, note="cancelled before it started", only_if=(RunStatus.QUEUED,)
        )
        return self.store.get_run(run_id)

    def wait(self, run_id: str, *, timeout: float = 60.0, poll: float = 0.05) -> RefineryRun:
        """Block until the run finishes (or ``timeout`` seconds pass); returns it."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.get_run(run_id)
            thread = self._threads.get(run_id)
            if run.status.finished and thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))  # let it return cleanly
            if run.status.finished or time.monotonic() >= deadline:
                return run
            if thread is not None:
                thread.join(timeout=poll)
            else:
                time.sleep(poll)

    # cards -----------------------------------------------------------------------
    def cards(self, collection: str, *, status: CardStatus | str | None = None) -> list[FaqCard]:
        """The collection's cards, oldest first (of one status when given)."""
        self._require(collection)
        wanted = None
        if status is not None:
            try:
                wanted = CardStatus(status)
            except ValueError:
                allowed = ", ".join(s.value for s in CardStatus)
                raise ValidationError(f"unknown card status {status!r}; allowed: {allowed}") from None
        return self.store.list_cards(collection, status=wanted)

    def get_card(self, collection: str, card_id: str) -> FaqCard:
        return self.store.get_card(collection, card_id)

    def _review(
        self, collection: str, card_id: str, changes: Mapping[str, Any], *, demote_approved: bool = False
    ) -> FaqCard:
        self._require(collection)
        card = self.store.update_card(collection, card_id, changes, demote_approved=demote_approved)
        sync_cards(self.engine, collection, [card])
        return card

    def approve(self, collection: str, card_id: str) -> FaqCard:
        """Approve a card: ``qa_first`` serves it from now on."""
        return self._review(collection, card_id, {"status": CardStatus.APPROVED})

    def reject(self, collection: str, card_id: str) -> FaqCard:
        """Reject a card: it leaves the index, and later runs do not draft it again."""
        return self._review(collection, card_id, {"status": CardStatus.REJECTED})

    def edit(
        self, collection: str, card_id: str, *, question: str | None = None, answer: str | None = None
    ) -> EditedCard:
        """Change a card's question and/or answer (its sources stay); ``note`` says what else.

        An approved card whose question or answer changes goes back to review: it is a
        draft again, so ``qa_first`` (approved cards only, unless drafts count) stops
        serving it until it is approved anew — the approval was of the old text. A
        changed answer is checked against the card's source chunks
        (:mod:`plait.refinery.grounding`) and ``note`` says when they do not back it;
        ``ask`` makes the same check each time the card answers, so it never calls
        grounded a text that was not checked.
        """
        changes: dict[str, Any] = {}
        if question is not None:
            question = " ".join(question.split())
            if not question or len(question) > _MAX_QUESTION:
                raise ValidationError(f"a question needs 1..{_MAX_QUESTION} characters, got {len(question)}")
            changes["question"] = question
        if answer is not None:
            answer = answer.strip()
            if not answer or len(answer) > _MAX_ANSWER:
                raise ValidationError(f"an answer needs 1..{_MAX_ANSWER} characters, got {len(answer)}")
            changes["answer"] = answer
        if not changes:
            raise ValidationError("nothing to edit: give a question and/or an answer")
        self._require(collection)
        card = self.store.get_card(collection, card_id)
        changed = [name for name in ("question", "answer") if name in changes and changes[name] != getattr(card, name)]
        notes = []
        if changed and card.status == CardStatus.APPROVED:
            notes.append(
                f"the card was approved; its {' and '.join(changed)} changed, so it is a draft again "
                "until it is approved anew (the approval was of the old text)"
            )
        # the demotion happens in the write itself: an approval made since the read above
        # was of the old text too
        edited = self._review(collection, card_id, changes, demote_approved=bool(changed))
        if "answer" in changed:
            notes.extend(self._unbacked(collection, edited))
        return EditedCard.model_validate({**edited.model_dump(), "note": "; ".join(notes) or None})

    def _unbacked(self, collection: str, card: FaqCard) -> list[str]:
        """Why the card's source chunks do not back its answer (nothing when they do)."""
        found = self.engine.store.get_chunks(collection, list(card.sources))
        present = [found[cid] for cid in card.sources if cid in found]
        note = card_support(card.answer, [indexed_text(c.content, c.origin) for c in present]).note
        return [note] if note else []

    # qa_first --------------------------------------------------------------------
    def drafts_count(self, collection: str, include_drafts: bool | None = None) -> bool:
        """Whether draft cards may answer: ``include_drafts``, else the collection's
        ``qa_include_drafts`` (off by default)."""
        return self.settings(collection).qa_include_drafts if include_drafts is None else include_drafts

    def match(
        self, collection: str, query: str, *, include_drafts: bool | None = None, mode: str = "hybrid"
    ) -> CardHit | None:
        """The card that answers ``query`` under the collection's thresholds, or None;
        ``mode`` is the card search's arms (``hybrid``, ``lexical``, ``vector``)."""
        card, _ = match_card(
            self.engine, self.store, collection, query, self.settings(collection),
            include_drafts=include_drafts, mode=mode,
        )
        return card

    def search(
        self, collection: str, request: SearchRequest | Mapping[str, Any], *, drafts_visible: bool = True
    ) -> SearchResult:
        """``qa_first`` search: a matching card, else the search's hits; ``drafts_visible``
        False (a reader) never matches nor returns a draft card."""
        return qa_first_search(
            self.engine, self.store, self.settings(collection), collection, request, drafts_visible=drafts_visible
        )

    def close(self, *, timeout: float = 10.0) -> None:
        """Stop this process's runs (cancel, wait up to ``timeout`` s), then close the file.

        A run still busy after that is left to crash recovery: marked failed later.
        """
        alive = [(run_id, t) for run_id, t in self._threads.items() if t.is_alive()]
        for run_id, _ in alive:
            self.store.request_cancel(run_id)
        deadline = time.monotonic() + timeout
        for _, thread in alive:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.store.close()
