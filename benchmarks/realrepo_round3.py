"""Third round of issue 21 item 2's variants (natural questions on real docs), measured
offline like :mod:`realrepo_variants` (same :class:`~realrepo_variants.Context`, same
fusion, one change each):

* ``bm25f-P-H``: field-weighted lexical scoring (BM25F with one ``b`` for every field,
  which is the same as repeating a field's text): the chunk's path-words line counted
  ``P`` times and its title and heading path ``H`` times, the body once. Measured on a
  second, lexical-only store of the same folder (the same chunk ids) indexed with that
  lexical text; ``bm25f-1-1`` must reproduce the default's lexical arm (checked).
* ``contextual-N``: the dense arm re-embedded with every chunk's text preceded by its
  document's title and first paragraph of prose (the document's first paragraph of at
  least :data:`SUMMARY_MIN` characters that is not a heading, a list, a table, a code
  block or a ``Key: value`` line such as an ADR's date; cut at ``N`` characters on a word
  boundary). No LLM: the "contextual retrieval" idea with the document's own opening in
  place of a generated summary.
* ``query-passage`` / ``query-noframe`` / ``query-noframe-passage``: the dense arm's query
  vector only (the lexical arm is unchanged): the question embedded with e5's ``passage: ``
  prefix instead of ``query: ``; the question's wh-frame removed (each sentence's leading
  question word, auxiliaries and subject pronoun, and the question mark: :func:`noframe`);
  both.
* ``outline+X``: the second round's ``outline`` (β 0.7) with the lexical or dense change
  of ``X``.

Constants (the ``P``/``H`` grid :data:`FIELD_GRID`, the summary caps :data:`SUMMARY_CAPS`)
are chosen on manage-get-gov's 20 natural questions (best MRR@10); teaching-vacancies is
held out.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import plait.stored_chunk
from plait.evaluation.prepare import prepared
from plait.evaluation.runner import collect_arms
from plait.fields import embedding_text, is_markdown_path, path_words
from plait.service import Plait
from plait.types import Chunk, FileOrigin, heading_path
from realrepo_variants import OUTLINE_BETA, Context, Ranked, Variant, _chunks, _dense_plus, _outline_vectors

#: (path-words repeats, title/heading repeats) tried on manage-get-gov
FIELD_GRID = ((2, 1), (3, 1), (1, 2), (1, 3), (2, 2), (3, 2), (3, 3))
SUMMARY_CAPS = (200, 400)
#: the grid point with the best MRR@10 on manage-get-gov (0.677; bm25f-1-3: 0.675)
BM25F_CHOSEN = (3, 3)
SUMMARY_MIN = 60


# --- field-weighted lexical text -------------------------------------------------------

def _head_and_body(chunk: Chunk) -> tuple[list[str], str]:
    """The head lines (title, heading path) and the body of :func:`embedding_text`."""
    text = embedding_text(chunk)
    heading = heading_path(chunk.origin)
    path = chunk.metadata.get("path") if isinstance(chunk.origin, FileOrigin) else None
    title = chunk.origin.title if isinstance(chunk.origin, FileOrigin) else None
    head = list(heading)
    if isinstance(path, str) and is_markdown_path(path) and title and title != path.rpartition("/")[2] and (not head or head[0] != title):
        head = [title, *head]
    prefix = "\n".join(head) + "\n\n" if head else ""
    if head and text.startswith(prefix):
        return head, text[len(prefix):]
    return [], text


def weighted_lexical_text(path_weight: int, head_weight: int) -> Callable[[Chunk], str]:
    def text(chunk: Chunk) -> str:
        head, body = _head_and_body(chunk)
        path = chunk.metadata.get("path") if isinstance(chunk.origin, FileOrigin) else None
        lines: list[str] = []
        if isinstance(path, str):
            lines += [" ".join([*path_words(path), chunk.scope])] * path_weight
        lines += head * head_weight
        return "\n".join(lines) + ("\n\n" if head else "\n") + body if lines else body
    return text


@contextmanager
def _lexical_text(fn: Callable[[Chunk], str]) -> Iterator[None]:
    module: Any = plait.stored_chunk  # the indexer's reference to plait.fields.lexical_text
    saved = module.lexical_text
    module.lexical_text = fn
    try:
        yield
    finally:
        module.lexical_text = saved


def field_lexical(ctx: Context, path_weight: int, head_weight: int) -> Mapping[str, Ranked]:
    """Each query's lexical arm on a lexical-only store of ``ctx.folder`` indexed with
    :func:`weighted_lexical_text` (computed once per collection and weights)."""
    def make() -> Mapping[str, Ranked]:
        folder = ctx.folder
        if folder is None:
            raise SystemExit("bm25f variants need the indexed folder (Context.folder)")
        with _lexical_text(weighted_lexical_text(path_weight, head_weight)):
            if ctx.split is not None:
                with prepared(folder, split=ctx.split, embedder="none") as ready:
                    return collect_arms(ready.store, ready.collection, ctx.texts, embedder=None, limit=ctx.depth).lexical
            with tempfile.TemporaryDirectory(prefix="plait-bm25f-") as tmp, Plait(str(Path(tmp) / "alt.db"), embedder="none") as engine:
                engine.index(folder)
                return collect_arms(engine.store, "default", ctx.texts, embedder=None, limit=ctx.depth).lexical
    return ctx.once(f"bm25f-{path_weight}-{head_weight}", make)  # type: ignore[no-any-return]


def bm25f(path_weight: int, head_weight: int, dense: Callable[[Context, str], Ranked] | None = None) -> Variant:
    def variant(ctx: Context, qid: str) -> tuple[str, list[str]]:
        lexical = field_lexical(ctx, path_weight, head_weight)[qid]
        return _chunks(ctx.fused(qid, lexical=lexical, dense=dense(ctx, qid) if dense else None)[1])
    return variant


# --- contextual chunk text for the dense arm --------------------------------------------

_NOT_PROSE = re.compile(r"^\s*(?:[#>|*+\-]|\d+\.\s|```|~~~|[\w -]{1,30}:\s*\S*\s*$|=+\s*$|-{3,})")


def summaries(chunks: Mapping[str, Chunk], cap: int) -> dict[str, str]:
    """Each document's first paragraph of prose (see the module docstring), cut at ``cap``."""
    first: dict[str, list[Chunk]] = {}
    for chunk in chunks.values():
        first.setdefault(chunk.source_id, []).append(chunk)
    out: dict[str, str] = {}
    for doc, parts in first.items():
        for chunk in sorted(parts, key=lambda c: c.ordinal):
            _, body = _head_and_body(chunk)
            para = next((p for p in (" ".join(x.split()) for x in re.split(r"\n\s*\n", body))
                         if len(p) >= SUMMARY_MIN and not _NOT_PROSE.match(p)), None)
            if para:
                out[doc] = para if len(para) <= cap else para[:cap].rsplit(" ", 1)[0]
                break
    return out


def _title(chunk: Chunk) -> str:
    """The document title; a file without one: its file name; a record without one: ``""``."""
    title = chunk.origin.title if isinstance(chunk.origin, FileOrigin) else None
    if not title and isinstance(chunk.metadata.get("path"), str):
        title = chunk.source_id.rpartition("/")[2]
    return title or ""


def contextual_texts(chunks: Mapping[str, Chunk], ids: list[str], cap: int) -> list[str]:
    """Per chunk: its document's title and summary, then its embedding text (the title is
    left out when the embedding text already starts with it, the summary when the chunk
    already contains it)."""
    summary = summaries(chunks, cap)
    texts = []
    for cid in ids:
        chunk = chunks[cid]
        text = embedding_text(chunk)
        title = _title(chunk)
        head = [] if not title or text.startswith(title) else [title]
        para = summary.get(chunk.source_id)
        if para and para[:SUMMARY_MIN] not in " ".join(text.split()):
            head.append(para)
        texts.append("\n".join(head) + "\n\n" + text if head else text)
    return texts


def contextual_dense(cap: int) -> Callable[[Context, str], Ranked]:
    def dense(ctx: Context, qid: str) -> Ranked:
        def make() -> np.ndarray:
            chunks = ctx.store.get_chunks(ctx.collection, ctx.ids)
            texts = contextual_texts(chunks, ctx.ids, cap)
            return np.asarray(ctx.embedder.embed_documents(texts), dtype=np.float32)
        matrix = ctx.once(f"contextual-{cap}", make)
        return ctx.ranked(matrix @ ctx.queries[qid])
    return dense


# --- query side ---------------------------------------------------------------------------

_FRAME = re.compile(
    r"^(?:(?:how|what|why|which|where|when|who|whom|whose)(?:'s)?\s+)?"
    r"(?:(?:do|does|did|don't|doesn't|didn't|can|can't|could|should|shouldn't|would|will|is|isn't|are|aren't|was|wasn't|were|weren't|has|have|had|must|may|might)\s+)?"
    r"(?:(?:i|we|you|they|it|one|our team|the team)\s+)?",
    re.IGNORECASE,
)


def noframe(text: str) -> str:
    """The question without its wh-frame: each sentence's leading question word,
    auxiliary and subject pronoun, and question marks (the rest unchanged)."""
    sentences = re.split(r"(?<=[.?!])\s+", text.strip())
    kept = [_FRAME.sub("", s, count=1).rstrip("?").strip() for s in sentences]
    out = " ".join(s for s in kept if s)
    return out or text


def query_vector(ctx: Context, qid: str, kind: str) -> np.ndarray:
    def make() -> dict[str, np.ndarray]:
        text = {q: (noframe(t) if "noframe" in kind else t) for q, t in ctx.texts.items()}
        if "passage" in kind:
            rows = np.asarray(ctx.embedder.embed_documents([text[q] for q in ctx.texts]), dtype=np.float32)
            return {q: rows[i] for i, q in enumerate(ctx.texts)}
        return {q: np.asarray(ctx.embedder.embed_query(text[q]), dtype=np.float32) for q in ctx.texts}
    vectors: dict[str, np.ndarray] = ctx.once(f"query-{kind}", make)
    return vectors[qid]


def query_dense(kind: str) -> Callable[[Context, str], Ranked]:
    return lambda ctx, qid: ctx.dense_for(query_vector(ctx, qid, kind))


def dense_variant(dense: Callable[[Context, str], Ranked]) -> Variant:
    return lambda ctx, qid: _chunks(ctx.fused(qid, dense=dense(ctx, qid))[1])


def outline_dense(ctx: Context, qid: str) -> Ranked:
    vectors = ctx.once("outline-passage", lambda: _outline_vectors(ctx, "passage"))
    return _dense_plus(ctx, qid, vectors @ ctx.queries[qid], OUTLINE_BETA)


def _variants() -> dict[str, Variant]:
    out: dict[str, Variant] = {"bm25f-1-1": bm25f(1, 1)}
    out.update({f"bm25f-{p}-{h}": bm25f(p, h) for p, h in FIELD_GRID})
    out.update({f"contextual-{n}": dense_variant(contextual_dense(n)) for n in SUMMARY_CAPS})
    out.update({f"query-{k}": dense_variant(query_dense(k)) for k in ("passage", "noframe", "noframe-passage")})
    out.update({f"outline+bm25f-{p}-{h}": bm25f(p, h, outline_dense) for p, h in ((1, 3), BM25F_CHOSEN)})
    return out


VARIANTS3: dict[str, Variant] = _variants()


__all__ = ["VARIANTS3", "bm25f", "contextual_dense", "noframe", "outline_dense", "query_dense", "weighted_lexical_text"]
