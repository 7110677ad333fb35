"""The views behind the web page's retrieval-debug cockpit (and anyone else's).

Three read-only views over a collection, each a model in camelCase JSON:

:func:`arm_lists`
    One search's three lists side by side: each arm's own ranking (the lexical and the
    dense candidates, best first) and the fused order, the top ``limit`` of each. Every
    entry carries its rank in all three, so a chunk can be followed from an arm to its
    fused place (a lexical rescue: high in the lexical list, absent from the dense one,
    kept in the fused top k). The lists come from the same trace as the search
    (:mod:`plait.retrieval.pipeline`), so they cannot disagree with it.
:func:`source_list`
    The collection's sources (file paths, session ids, document ids), with how each is
    named to explain (``path`` for files of a folder or git root, ``doc`` otherwise),
    for completion in a "why not found?" form.
:func:`chunk_view`
    One chunk with its content rendered to HTML: Markdown (CommonMark with tables, as
    :mod:`plait.markdown` reads it) for Markdown sources and texts without a path, a
    ``<pre>`` block for any other file; always passed through nh3 (the ammonia
    sanitiser) with a fixed allowlist, so what a document says is shown and never run
    (no scripts, event handlers, styles, images or ``javascript:`` links).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

from plait.errors import ConfigError, NotFoundError, ValidationError
from plait.fields import reads_as_markdown
from plait.retrieval.pipeline import Trace
from plait.sources.roots import root_key
from plait.stores.base import Store
from plait.types import Chunk, FusionSettings, Model, Origin

__all__ = [
    "ARM_LIMIT",
    "MAX_ARM_LIMIT",
    "MAX_SOURCE_LIMIT",
    "ArmEntry",
    "ArmLists",
    "ChunkView",
    "SourceEntry",
    "arm_lists",
    "chunk_view",
    "missing_chunk",
    "render_html",
    "source_list",
]

ARM_LIMIT = 10
"""Entries per list by default."""
MAX_ARM_LIMIT = 200
MAX_SOURCE_LIMIT = 1000

_TAGS = frozenset({
    "a", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup",
    "table", "tbody", "td", "th", "thead", "tr", "ul",
})
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"colspan", "rowspan"}, "td": {"colspan", "rowspan"}}
_SCHEMES = frozenset({"http", "https", "mailto"})


class ArmEntry(Model):
    """One chunk in one list, with its place in the other two (None: not there)."""

    chunk_id: str
    rank: int
    score: float
    lexical_rank: int | None
    dense_rank: int | None
    fused_rank: int | None
    rerank_rank: int | None = None
    returned: bool
    """Among the search's hits (the page after the cut and any rerank)."""
    scope: str | None = None
    origin: Origin | None = None
    """None when the chunk was deleted since the arms ran."""


class ArmLists(Model):
    """The lexical, dense and fused lists of one search, the top ``limit`` of each."""

    query: str
    collection: str
    k: int
    offset: int
    limit: int
    depth: int
    """How deep each arm was fetched (the over-fetch, or deeper for a far page)."""
    lexical_candidates: int
    dense_candidates: int
    vector_available: bool
    vector_unavailable_reason: str | None = None
    fusion: FusionSettings
    lexical: list[ArmEntry] = Field(default_factory=list)
    dense: list[ArmEntry] = Field(default_factory=list)
    fused: list[ArmEntry] = Field(default_factory=list)


class SourceEntry(Model):
    """A source of the collection and how to name it to explain."""

    source_id: str
    kind: Literal["file", "session", "document"]
    target: Literal["path", "doc"]
    scope: str
    chunks: int
    chunks_without_vector: int
    indexed_at: str


class ChunkView(Model):
    """One chunk: the raw content and its sanitised HTML rendering."""

    chunk_id: str
    source_id: str
    scope: str
    ordinal: int
    origin: Origin
    content: str
    html: str
    rendered_as: Literal["markdown", "text"]
    metadata: dict[str, Any] = Field(default_factory=dict)


def arm_lists(store: Store, collection: str, trace: Trace, *, limit: int = ARM_LIMIT) -> ArmLists:
    """The three lists of ``trace`` (see the module docstring)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ARM_LIMIT:
        raise ValidationError(f"limit must be an integer from 1 to {MAX_ARM_LIMIT}, got {limit!r}")
    lexical = trace.positions("lexical")
    dense = trace.positions("dense")
    fused = {item.chunk_id: (n, item.score) for n, item in enumerate(trace.fused, start=1)}
    reranked = trace.rerank.ranks if trace.rerank is not None else {}
    returned = trace.returned
    shown = {cid for cid, _ in trace.lexical[:limit]}
    shown |= {cid for cid, _ in trace.dense[:limit]}
    shown |= {item.chunk_id for item in trace.fused[:limit]}
    chunks = store.get_chunks(collection, sorted(shown))

    def entry(chunk_id: str, rank: int, score: float) -> ArmEntry:
        chunk: Chunk | None = chunks.get(chunk_id)
        return ArmEntry(
            chunk_id=chunk_id,
            rank=rank,
            score=score,
            lexical_rank=lexical[chunk_id][0] if chunk_id in lexical else None,
            dense_rank=dense[chunk_id][0] if chunk_id in dense else None,
            fused_rank=fused[chunk_id][0] if chunk_id in fused else None,
            rerank_rank=reranked.get(chunk_id),
            returned=chunk_id in returned,
            scope=chunk.scope if chunk is not None else None,
            origin=chunk.origin if chunk is not None else None,
        )

    plan = trace.plan
    return ArmLists(
        query=plan.query,
        collection=collection,
        k=plan.k,
        offset=plan.offset,
        limit=limit,
        depth=trace.depth,
        lexical_candidates=len(trace.lexical),
        dense_candidates=len(trace.dense),
        vector_available=trace.dense_ran,
        vector_unavailable_reason=None if trace.dense_ran else plan.vector_reason,
        fusion=trace.settings,
        lexical=[entry(cid, n, s) for n, (cid, s) in enumerate(trace.lexical[:limit], start=1)],
        dense=[entry(cid, n, s) for n, (cid, s) in enumerate(trace.dense[:limit], start=1)],
        fused=[entry(i.chunk_id, n, i.score) for n, i in enumerate(trace.fused[:limit], start=1)],
    )


def source_list(
    store: Store,
    collection: str,
    roots: Sequence[Mapping[str, Any]],
    *,
    prefix: str = "",
    limit: int = 100,
) -> list[SourceEntry]:
    """The sources whose id starts with ``prefix`` (case-insensitive), by id, at most ``limit``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SOURCE_LIMIT:
        raise ValidationError(f"limit must be an integer from 1 to {MAX_SOURCE_LIMIT}, got {limit!r}")
    kinds = {root_key(r): str(r.get("kind")) for r in roots}
    wanted = prefix.casefold()
    out: list[SourceEntry] = []
    for source in sorted(store.list_sources(collection), key=lambda s: s.source_id):
        if not source.source_id.casefold().startswith(wanted):
            continue
        root_kind = kinds.get(source.root, "")
        kind: Literal["file", "session", "document"]
        if root_kind in ("folder", "git"):
            kind = "file"
        elif root_kind.startswith("session"):
            kind = "session"
        else:
            kind = "document"
        out.append(
            SourceEntry(
                source_id=source.source_id,
                kind=kind,
                target="path" if kind == "file" else "doc",
                scope=source.scope,
                chunks=source.chunks,
                chunks_without_vector=source.chunks_without_vector,
                indexed_at=source.indexed_at,
            )
        )
        if len(out) >= limit:
            break
    return out


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.front_matter import front_matter_plugin

    return MarkdownIt("commonmark", {"html": True}).use(front_matter_plugin).enable("table")


def render_html(text: str, *, markdown: bool) -> str:
    """``text`` as sanitised HTML: rendered Markdown, or an escaped ``<pre>`` block."""
    try:
        import nh3
    except ImportError:
        raise ConfigError("rendering needs nh3: pip install 'plait[server]'") from None
    raw = _markdown().render(text) if markdown else f"<pre>{html.escape(text)}</pre>"
    return str(
        nh3.clean(
            raw,
            tags=set(_TAGS),
            clean_content_tags={"script", "style"},
            attributes={tag: set(names) for tag, names in _ATTRIBUTES.items()},
            url_schemes=set(_SCHEMES),
        )
    )


def missing_chunk(collection: str, chunk_id: str) -> NotFoundError:
    """The error for a chunk that does not exist (or that the caller may not see)."""
    return NotFoundError(f"chunk {chunk_id!r} does not exist in collection {collection!r}")


def chunk_view(store: Store, collection: str, chunk_id: str) -> ChunkView:
    """One chunk with its sanitised rendering; NotFoundError when it does not exist."""
    chunk = store.get_chunks(collection, [chunk_id]).get(chunk_id)
    if chunk is None:
        raise missing_chunk(collection, chunk_id)
    markdown = reads_as_markdown(chunk.metadata, chunk.origin)
    return ChunkView(
        chunk_id=chunk.id,
        source_id=chunk.source_id,
        scope=chunk.scope,
        ordinal=chunk.ordinal,
        origin=chunk.origin,
        content=chunk.content,
        html=render_html(chunk.content, markdown=markdown),
        rendered_as="markdown" if markdown else "text",
        metadata=chunk.metadata,
    )
