"""Diversity: at most ``max_per_source`` chunks of one source (file or session) in the
fused order, applied after fusion and before the ``[offset, offset + k)`` cut.

:func:`diversify` walks the fused order once and keeps a chunk while its source has
fewer than ``max_per_source`` chunks kept above it; the others are left out and counted
per source (a hit's ``moreFromSource``). The kept order is a prefix-stable function of
the fused order (a chunk's fate depends only on the chunks fused above it), and the
fused order itself is prefix-stable across depths (:func:`plait.fusion.tiered`), so
pages of the diversified order never repeat or skip a hit. :func:`group_by_source`
folds a page of hits into one entry per source with its best chunks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from plait.fusion import Fused
from plait.types import Hit, SourceGroup

__all__ = ["DEFAULT_GROUP_SIZE", "Diversified", "diversify", "doc_ranking", "group_by_source"]

#: Chunks per source kept when ``groupBy: "source"`` is asked without ``maxPerSource``.
DEFAULT_GROUP_SIZE = 3


@dataclass(frozen=True)
class Diversified:
    """The fused order with ``max_per_source`` applied."""

    order: list[tuple[int, Fused]]
    """(fused position, candidate) kept, in fused order."""
    cut: dict[str, int] = field(default_factory=dict)
    """chunk id → fused position of each candidate left out by ``max_per_source``."""
    more: dict[str, int] = field(default_factory=dict)
    """source id → how many of its fused candidates were left out."""
    sources: dict[str, str] = field(default_factory=dict)
    """chunk id → source id, for every candidate whose chunk still exists."""


def diversify(fused: Sequence[Fused], sources: Mapping[str, str], max_per_source: int) -> Diversified:
    """Keep at most ``max_per_source`` chunks per source, in fused order.

    ``sources`` maps chunk ids to their source id; a candidate missing from it (its chunk
    was deleted since the arms ran) is dropped, as the hydration would drop it.

    >>> from plait.fusion import Fused
    >>> items = [Fused(c, 1.0, None, None, None, None) for c in "abcd"]
    >>> d = diversify(items, {"a": "x", "b": "x", "c": "y", "d": "x"}, 1)
    >>> [item.chunk_id for _, item in d.order], d.cut, d.more
    (['a', 'c'], {'b': 2, 'd': 4}, {'x': 2})
    """
    if max_per_source < 1:
        raise ValueError("max_per_source is at least 1")
    kept: dict[str, int] = {}
    order: list[tuple[int, Fused]] = []
    cut: dict[str, int] = {}
    more: dict[str, int] = {}
    for position, item in enumerate(fused, start=1):
        source = sources.get(item.chunk_id)
        if source is None:
            continue
        if kept.get(source, 0) < max_per_source:
            kept[source] = kept.get(source, 0) + 1
            order.append((position, item))
        else:
            cut[item.chunk_id] = position
            more[source] = more.get(source, 0) + 1
    return Diversified(order=order, cut=cut, more=more, sources=dict(sources))


def doc_ranking(chunk_ids: Sequence[str], doc_of: Mapping[str, str], depth: int) -> list[str]:
    """Documents (sources) in the order of their best chunk, cut at ``depth``; chunks
    ``doc_of`` does not map are skipped."""
    docs: dict[str, None] = {}
    for cid in chunk_ids:
        doc = doc_of.get(cid)
        if doc is not None and doc not in docs:
            docs[doc] = None
            if len(docs) >= depth:
                break
    return list(docs)


def group_by_source(hits: Sequence[Hit], sources: Mapping[str, str]) -> list[SourceGroup]:
    """One entry per source, in the order of its best hit, with its hits' chunk ids."""
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        groups.setdefault(sources.get(hit.chunk_id, hit.chunk_id), []).append(hit)
    return [
        SourceGroup(
            source_id=source,
            origin=members[0].origin,
            scope=members[0].scope,
            score=members[0].score,
            chunk_ids=[hit.chunk_id for hit in members],
            more_from_source=members[0].more_from_source or 0,
        )
        for source, members in groups.items()
    ]
