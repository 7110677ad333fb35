"""Explain's ask-gate stage: the collection's gate and each traced chunk's verdict on it,
as :meth:`plait.Plait.ask` would judge them (see :mod:`plait.ask_gate`)."""

from __future__ import annotations

from collections.abc import Sequence

from plait.embeddings.base import Embedder
from plait.explain_models import AskGateStage, ChunkJourney
from plait.stores.base import Store
from plait.types import Chunk, heading_path

__all__ = ["ask_gate_stage"]


def ask_gate_stage(
    store: Store,
    collection: str,
    query: str,
    chunks: Sequence[Chunk],
    journeys: Sequence[ChunkJourney],
    *,
    embedder: Embedder | None,
    lexical: bool = True,
    focus: str | None = None,
) -> AskGateStage:
    """The ask gate of the collection (calibrated first if it changed, as ask does), each
    chunk's verdict (cosine from the dense arm) and the one to report
    (:attr:`AskGateStage.verdict`: the first that passes, else ``focus``'s, the explained
    chunk; else the first)."""
    from plait.ask_gate import judge, question_identifiers, resolve_gate, unknown_terms
    from plait.ask_gate_state import ensure_gate_read
    from plait.collection_settings import read_collection, read_settings
    from plait.ingest import index_text
    from plait.refinery.extract import content_stems
    from plait.staleness import searchable_count

    read = read_collection(store, collection)  # once, for the gate and its share
    if embedder is not None and read is not None:
        state = ensure_gate_read(store, collection, embedder, known=read)
        if state.info is not None and state.settings is not None:
            read = (state.info, state.settings)
    saved = read[1] if read is not None else read_settings(store, collection)  # NotFoundError
    gate = resolve_gate(saved, chunks=searchable_count(read[0].chunks, saved) if read is not None else None)
    wanted = content_stems(query)
    if lexical:
        gate = gate.model_copy(update={"unknown_terms": unknown_terms(store, collection, query, wanted)})
    named = question_identifiers(query)
    checks = [
        judge(
            c.id,
            cosine=j.cosine,
            lexical_hit=j.lexical_rank is not None or not lexical,  # as ask: vector mode
            text=index_text(c.content, heading_path(c.origin)),
            question_stems=wanted,
            gate=gate,
            identifiers=named,
        )
        for c, j in zip(chunks, journeys, strict=True)
    ]
    passed = [check for check in checks if check.passed]
    focused = [check for check in checks if check.chunk_id == focus]
    shown = passed or focused or checks
    verdict = shown[0] if shown else None
    return AskGateStage(gate=gate, checks=checks, verdict=verdict)

