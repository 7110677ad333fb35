"""Executing a refinery run: scan the collection's chunks, distil cards, merge, index.

A run is claimed (``queued`` → ``running``) by the process that executes it, which
records its pid and beats a heartbeat every couple of seconds from a side thread while
it works. It then walks every source of the scanned scopes in order:

* ``extractive`` mode — each chunk on its own through :func:`extract_cards`;
* ``llm`` mode — groups of ``group_size`` consecutive chunks of one source, one chat
  call each (:func:`draft_cards`).

Each candidate card is merged into an existing card (of this run or an earlier one)
whose question's content stems have a Jaccard similarity of at least
``dedupe_threshold``: a draft gains the new source chunks, a reviewed card is left as
it is. Otherwise it becomes a new draft, until the collection holds ``max_cards``
non-rejected cards. Progress is written after each group; a cancel request is honoured
between groups. A provider failure fails the run (cards made so far are kept). A group
whose LLM reply holds no JSON array of cards is skipped and counted: when every group
was, the run made nothing and is ``failed`` with that reason; when some were, it
``succeeded`` with a note saying how many were skipped and why.

Crash recovery (:func:`recover_runs`, run when a :class:`~plait.refinery.Refinery` is
opened and before runs are read): a ``queued`` or ``running`` run whose worker process
is gone, whose worker in this process has stopped, or whose heartbeat is older than
``stale_after`` seconds is marked ``failed`` with the reason — never left running.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

from plait.errors import PlaitError, ProviderError, ValidationError
from plait.llm import LLM
from plait.refinery.cards import sync_cards
from plait.refinery.extract import Extracted, content_stems, extract_cards, jaccard
from plait.refinery.llm_cards import draft_cards
from plait.refinery.models import (
    CARD_SCOPE,
    CardMode,
    CardStatus,
    FaqCard,
    RefineryRun,
    RefinerySettings,
    RunProgress,
    RunStatus,
)
from plait.refinery.store import RefineryStore
from plait.types import Chunk
from plait.usage import metering, rows_of

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from plait.searcher import Searcher

__all__ = ["RunProgressFn", "execute_run", "is_live", "pid_alive", "recover_runs"]

#: Called with the run's progress after each group of chunks.
RunProgressFn = Callable[[RunProgress], None]

_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()


def mark_live(run_id: str, live: bool) -> None:
    """Record that this process is (or no longer is) responsible for ``run_id``."""
    with _LIVE_LOCK:
        if live:
            _LIVE.add(run_id)
        else:
            _LIVE.discard(run_id)


def is_live(run_id: str) -> bool:
    """True while this process is responsible for the run (queued for or executing it)."""
    with _LIVE_LOCK:
        return run_id in _LIVE


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def recover_runs(store: RefineryStore, *, stale_after: float) -> list[RefineryRun]:
    """Mark interrupted runs failed (see the module docstring); returns them."""
    recovered = []
    now = time.time()
    me = os.getpid()
    for run in store.active_runs():
        beat, pid = store.raw_heartbeat(run.id)
        reason = None
        if pid is not None and pid != me and not pid_alive(pid):
            reason = f"the worker process {pid} is gone: the run was interrupted (crash or restart)"
        elif pid == me and not is_live(run.id):
            reason = "the worker in this process stopped without finishing the run"
        elif beat is not None and now - beat > stale_after:
            reason = f"no heartbeat for {now - beat:.0f}s (limit {stale_after:.0f}s): the worker is presumed dead"
        if reason and store.finish_run(run.id, RunStatus.FAILED, error=reason):
            recovered.append(store.get_run(run.id))
    return recovered


class _Heartbeat:
    """Beats a run's heartbeat from a side thread until stopped."""

    def __init__(self, store: RefineryStore, run_id: str, every: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, args=(store, run_id, every), daemon=True, name=f"heartbeat-{run_id}"
        )

    def _loop(self, store: RefineryStore, run_id: str, every: float) -> None:
        while not self._stop.wait(every):
            try:
                store.heartbeat(run_id)
            except PlaitError:
                return

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _Cancelled(Exception):
    pass


@dataclass
class _Distiller:
    """The work of one run."""

    engine: Searcher
    store: RefineryStore
    run: RefineryRun
    settings: RefinerySettings
    llm: LLM | None
    progress_fn: RunProgressFn | None
    progress: RunProgress = field(default_factory=RunProgress)
    known: list[tuple[frozenset[str], FaqCard]] = field(default_factory=list)
    budget: int = 0
    note: str | None = None

    def _chunks(self, source_id: str) -> list[Chunk]:
        store = self.engine.store
        ids = store.chunk_ids(self.run.collection, source_id)
        found = store.get_chunks(self.run.collection, ids)
        return sorted(found.values(), key=lambda c: c.ordinal)

    def _report(self) -> None:
        self.store.update_progress(self.run.id, self.progress)
        if self.progress_fn is not None:
            self.progress_fn(self.progress)

    def _candidates(self, group: list[Chunk]) -> list[Extracted]:
        if self.run.mode == CardMode.EXTRACTIVE or self.llm is None:
            return [card for chunk in group for card in extract_cards(chunk)]
        self.progress = self.progress.model_copy(update={"llm_calls": self.progress.llm_calls + 1})
        with metering("refinery", detached=True) as (events, _):
            try:
                drafted = draft_cards(self.llm, group)
            finally:  # the call is paid for whether or not its cards parse
                self.engine.store.add_usage(self.run.collection, rows_of(events))
        if drafted is None:
            self.progress = self.progress.model_copy(
                update={"groups_skipped": self.progress.groups_skipped + 1}
            )
            return []
        return drafted

    def _add(self, candidate: Extracted, changed: dict[str, FaqCard]) -> bool:
        """Merge or add one candidate; False when the card budget is spent."""
        stems = content_stems(candidate.question)
        if not stems:
            return True
        best: tuple[float, int] | None = None
        for position, (known, _) in enumerate(self.known):
            similarity = jaccard(stems, known)
            if similarity >= self.settings.dedupe_threshold and (best is None or similarity > best[0]):
                best = (similarity, position)
        collection = self.run.collection
        if best is not None:
            known, card = self.known[best[1]]
            self.progress = self.progress.model_copy(
                update={"cards_merged": self.progress.cards_merged + 1}
            )
            extra = [cid for cid in candidate.chunk_ids if cid not in card.sources]
            if card.status == CardStatus.DRAFT and extra:
                card = self.store.update_card(collection, card.id, {"sources": [*card.sources, *extra]})
                self.known[best[1]] = (known, card)
                changed[card.id] = card
            return True
        if self.budget <= 0:
            return False
        card = self.store.add_card(
            collection,
            question=candidate.question,
            answer=candidate.answer,
            sources=list(dict.fromkeys(candidate.chunk_ids)),
            mode=self.run.mode,
            run_id=self.run.id,
        )
        self.known.append((stems, card))
        changed[card.id] = card
        self.budget -= 1
        self.progress = self.progress.model_copy(update={"cards_made": self.progress.cards_made + 1})
        return True

    def execute(self) -> None:
        collection = self.run.collection
        engine_store = self.engine.store
        sources = [
            s
            for s in engine_store.list_sources(collection)
            if s.scope != CARD_SCOPE and (self.settings.scopes is None or s.scope in self.settings.scopes)
        ]
        self.progress = RunProgress(chunks_total=sum(s.chunks for s in sources))
        existing = self.store.list_cards(collection)
        self.known = [(content_stems(c.question), c) for c in existing]
        self.budget = self.settings.max_cards - sum(c.status != CardStatus.REJECTED for c in existing)
        self._report()
        size = 1 if self.run.mode == CardMode.EXTRACTIVE else self.settings.group_size
        for source in sources:
            chunks = self._chunks(source.source_id)
            for start in range(0, len(chunks), size):
                if self.store.cancel_requested(self.run.id):
                    raise _Cancelled
                group = chunks[start : start + size]
                changed: dict[str, FaqCard] = {}
                room = True
                for candidate in self._candidates(group):
                    room = self._add(candidate, changed) and room
                sync_cards(self.engine, collection, list(changed.values()))
                self.progress = self.progress.model_copy(
                    update={"chunks_scanned": self.progress.chunks_scanned + len(group)}
                )
                self._report()
                if not room or self.budget <= 0:
                    self.note = f"stopped at maxCards ({self.settings.max_cards} non-rejected cards)"
                    return

    def unreadable(self) -> tuple[str | None, str | None]:
        """``(error, note)`` for a run that read all it was to read: an error when every
        group's LLM reply was unreadable (nothing was made, the run failed), else the
        note, which names the groups skipped and why."""
        skipped, calls = self.progress.groups_skipped, self.progress.llm_calls
        replies = "reply" if skipped == 1 else "replies"
        why = f"the LLM's {replies} held no JSON array of cards"
        if calls and skipped == calls:
            groups = "the 1 group of chunks" if calls == 1 else f"all {calls} groups of chunks"
            return f"{groups} failed: {why}, so no card was made", self.note
        notes = [self.note] if self.note else []
        if skipped:
            notes.append(f"{skipped} of {calls} groups of chunks skipped: {why}")
        return None, "; ".join(notes) or None


def execute_run(
    engine: Searcher,
    store: RefineryStore,
    run_id: str,
    settings: RefinerySettings,
    *,
    llm: LLM | None,
    heartbeat_every: float = 2.0,
    progress: RunProgressFn | None = None,
) -> RefineryRun:
    """Claim a queued run and execute it here; returns the finished run.

    Never leaves the run ``running``: success, cancellation and every failure end in
    a final status (an interrupt such as Ctrl-C marks it failed and is re-raised).
    """
    mark_live(run_id, True)
    try:
        if not store.claim_run(run_id, os.getpid()):
            run = store.get_run(run_id)
            raise ValidationError(f"refinery run {run_id} is {run.status.value}, not queued")
        run = store.get_run(run_id)
        if run.mode == CardMode.LLM and llm is None:
            store.finish_run(run_id, RunStatus.FAILED, error="the run is in llm mode but no LLM is configured")
            return store.get_run(run_id)
        work = _Distiller(engine, store, run, settings, llm, progress)
        with _Heartbeat(store, run_id, heartbeat_every):
            try:
                work.execute()
            except _Cancelled:
                store.finish_run(run_id, RunStatus.CANCELLED, note="cancelled on request")
            except ProviderError as exc:
                logger.info("refinery run %s failed: LLM failed: %s", run_id, exc)
                store.finish_run(run_id, RunStatus.FAILED, error=f"LLM failed: {exc}")
            except PlaitError as exc:
                logger.info("refinery run %s failed: %s", run_id, exc)
                store.finish_run(run_id, RunStatus.FAILED, error=str(exc))
            except Exception as exc:  # a bug: logged, and the run must still end, with the reason
                logger.exception("refinery run %s failed with a bug", run_id)
                store.finish_run(run_id, RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
            except BaseException:  # Ctrl-C, SystemExit: record, then let it through
                store.finish_run(run_id, RunStatus.FAILED, error="interrupted")
                raise
            else:
                error, note = work.unreadable()
                if error is not None:
                    logger.info("refinery run %s failed: %s", run_id, error)
                    store.finish_run(run_id, RunStatus.FAILED, error=error, note=note)
                else:
                    logger.info("refinery run %s succeeded: %s", run_id, note)
                    store.finish_run(run_id, RunStatus.SUCCEEDED, note=note)
        return store.get_run(run_id)
    finally:
        mark_live(run_id, False)
