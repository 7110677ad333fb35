"""``plait search``: hybrid search printed as ranked hits with badge, rank in each arm and
origin (or ``--json``: the HTTP API's model)."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import typer
from rich.markup import escape

from plait.cli.options import (
    CollectionOpt,
    DebugOpt,
    EmbedderOpt,
    JsonOpt,
    MaxPerSourceOpt,
    ModeOpt,
    StoreOpt,
    console,
    fail,
)
from plait.cli.options import collection_name as _collection
from plait.cli.options import open_engine as _engine
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.cli.progress import coverage_text
from plait.request_body import request_body
from plait.terminal import highlighted, safe
from plait.types import FusionSettings, SearchResult

__all__ = [
    "DenseWeightOpt",
    "FusionFlags",
    "LanguagePriorOpt",
    "fusion_flags",
    "language_note",
    "lexical_weight_option",
    "metadata_filter",
    "register",
]

#: search and explain: ``--language-prior/--no-language-prior`` (None: the collection's setting).
LanguagePriorOpt = Annotated[
    bool | None,
    typer.Option(
        "--language-prior/--no-language-prior",
        help="adaptive: let the embedder's declared languages decide how much a disagreement counts "
        "(default: the collection's setting, on).",
    ),
]

#: search and explain: ``--dense-weight`` (a knob of the method's own fusion object).
DenseWeightOpt = Annotated[
    float | None,
    typer.Option(
        "--dense-weight",
        help="0..1: the dense arm's weight for --fusion minmax | dbsf | adaptive (adaptive: the base "
        "its per-query weight moves around, instead of the collection's estimate); without --fusion, "
        "for the collection's own method.",
    ),
]


#: search and explain: ``--rrf-k`` and ``--threshold`` (the request's ``rrfK``, ``threshold``).
RrfKOpt = Annotated[int | None, typer.Option("--rrf-k", help="rrf: the k of 1/(k + rank) (default 60).")]
ThresholdOpt = Annotated[
    float | None,
    typer.Option("--threshold", help="weighted: 0..1, the least combined score a hit keeps (default 0.2)."),
]
#: search and explain: ``--meta KEY=VALUE`` (repeatable) and ``--group-by source``.
MetaOpt = Annotated[list[str] | None, typer.Option(help="Metadata filter KEY=VALUE (repeatable).")]
GroupByOpt = Annotated[
    str | None, typer.Option("--group-by", help="source: one entry per source with its best chunks.")
]


def metadata_filter(meta: list[str] | None) -> dict[str, str] | None:
    """``--meta KEY=VALUE`` flags as the request's ``metadata`` (None: none given)."""
    metadata: dict[str, str] = {}
    for item in meta or []:
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"--meta {item!r} is not KEY=VALUE")
        metadata[key] = value
    return metadata or None


def _origin_text(hit: Any) -> str:
    origin = hit.origin
    if origin.kind == "file":
        path = origin.source_path
        return safe(path + (" › " + " › ".join(origin.heading_path) if origin.heading_path else ""))
    return safe(f"session {origin.session_id} · event {origin.event_id}")


_BADGE = {
    "both": "[green]both    [/green]",
    "lexical": "[cyan]lexical [/cyan]",
    "semantic": "[magenta]semantic[/magenta]",
}


def _print_result(result: SearchResult, debug: bool) -> None:
    console.print(f"[bold]“{safe(result.query)}”[/bold] — {safe(result.collection)}", highlight=False)
    if result.card is not None:
        card = result.card
        console.print(
            f"[green]FAQ card[/green] {card.card_id} ({card.status}, score {card.score:.2f}): "
            f"[bold]{safe(card.question)}[/bold]",
            highlight=False,
        )
        console.print(f"   {safe(card.answer)}", highlight=False, soft_wrap=True)
        for source in card.sources:
            where = "no longer indexed" if source.origin is None else _origin_text(source)
            console.print(f"   [blue]{source.chunk_id}[/blue] {where}", highlight=False)
        return
    if result.answered_by == "search":
        console.print("[dim]no FAQ card matched: hybrid search[/dim]")
    if not result.hits:
        console.print("no hits")
    for hit in result.hits:
        dense = "—" if hit.ranks.dense is None else hit.ranks.dense
        lexical = "—" if hit.ranks.lexical is None else hit.ranks.lexical
        reranked = "" if hit.ranks.rerank is None else f" · rerank {hit.ranks.rerank}"
        more = f" [dim](+{hit.more_from_source} more from this source)[/dim]" if hit.more_from_source else ""
        console.print(
            f"[bold]{hit.ranks.fused:>2}[/bold] {_BADGE[hit.match.value]:<9} {hit.score:.4f} "
            f"dense {dense} · lexical {lexical}{reranked}  [blue]{_origin_text(hit)}[/blue]{more}",
            highlight=False,
        )
        if hit.snippet:
            console.print("   " + highlighted(hit.snippet, hit.highlights), highlight=False)
        else:
            console.print("   [dim]" + safe(" ".join(hit.content.split())[:200]) + "[/dim]", highlight=False)
    f = result.fusion
    line = "" if result.mode.value == "hybrid" else f"mode {result.mode.value} · "
    line += f"fusion {f.method.value}"
    if f.method.value == "rrf":
        line += f" (k={f.rrf_k}, lexical_weight={f.lexical_weight})"
    elif f.method.value == "weighted":
        line += f" (vector {f.vector_weight} / lexical {f.lexical_score_weight}, threshold {f.threshold})"
    else:
        line += f" (dense weight used {f.dense_weight_used}: {escape(f.fusion_reason or '')}{language_note(f)})"
    if f.lexical_weight_mode.value == "auto":
        line += f" \\[auto: {escape(f.lexical_weight_reason or '')}]"
    line += f" · over-fetch {f.overfetch} · "
    if not result.vector_available:
        arm = "no arm" if result.mode.value == "vector" else "lexical only"
        line += f"[yellow]{arm}[/yellow]: {result.vector_unavailable_reason}"
    elif result.mode.value == "vector":
        line += "dense arm only (no BM25)"
    elif result.vector_coverage < 1.0:
        line += f"[yellow]{coverage_text(result.vector_coverage)}[/yellow] (backfill in progress)"
    else:
        line += "dense arm on"
    console.print(line, highlight=False)
    if f.identifier_reason:
        console.print(f"identifier precedence reordered the hits: {escape(f.identifier_reason)}", highlight=False)
    if result.rerank is not None:
        state = "reordered" if result.reranked else "[yellow]fused order kept[/yellow]"
        note = f": {result.rerank_reason}" if result.rerank_reason else ""
        console.print(
            f"rerank {result.rerank} over the fused top {result.k_overfetch} · {state}{note}",
            highlight=False,
        )
    for note in result.notes:
        console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
    if debug:
        console.print("timings (ms): " + ", ".join(f"{k} {v}" for k, v in result.timings_ms.items()))


def search(
    query: Annotated[str, typer.Argument(help="The query.")],
    k: Annotated[int, typer.Option("-k", help="How many hits.")] = 8,
    mode: ModeOpt = "hybrid",
    max_per_source: MaxPerSourceOpt = None,
    group_by: GroupByOpt = None,
    fusion: Annotated[str | None, typer.Option(help="rrf | weighted | minmax | dbsf | adaptive")] = None,
    lexical_weight: Annotated[
        str | None,
        typer.Option(help="rrf: 0..1 (0.5 weighs both arms equally), or 'auto' (identifier-aware)."),
    ] = None,
    dense_weight: DenseWeightOpt = None,
    rrf_k: RrfKOpt = None,
    threshold: ThresholdOpt = None,
    overfetch: Annotated[int | None, typer.Option(help="Candidates per arm before fusion.")] = None,
    language_prior: LanguagePriorOpt = None,
    offset: Annotated[int, typer.Option(help="Skip this many fused positions (paging).")] = 0,
    qa_first: Annotated[
        bool, typer.Option("--qa-first", help="Answer with a matching approved FAQ card when there is one.")
    ] = False,
    scope: Annotated[list[str] | None, typer.Option(help="Only these scopes (repeatable).")] = None,
    meta: MetaOpt = None,
    rerank: Annotated[
        str | None, typer.Option(help="llm | cross-encoder: rerank the fused top --k-overfetch.")
    ] = None,
    k_overfetch: Annotated[
        int | None, typer.Option("--k-overfetch", help="Fused candidates given to the reranker (default 20).")
    ] = None,
    llm: Annotated[
        str | None, typer.Option("--llm", help="ollama | openai | none, for --rerank llm (env PLAIT_LLM).")
    ] = None,
    cross_encoder: Annotated[
        str | None,
        typer.Option(
            "--cross-encoder",
            help="Model directory or package, for --rerank cross-encoder (env PLAIT_CROSS_ENCODER).",
        ),
    ] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Hybrid search: a table with badge, rank in each arm and origin."""
    name = _collection(collection)
    flags = fusion_flags(fusion, dense_weight, lexical_weight, language_prior)
    metadata = metadata_filter(meta)
    with _engine(store, embedder, llm=llm, cross_encoder=cross_encoder, create=False) as engine:
        result = _run(
            debug,
            lambda: engine.search(
                query,
                collection=name,
                k=k,
                fusion=flags.fusion,
                lexical_weight=flags.lexical_weight,
                rrf_k=rrf_k,
                threshold=threshold,
                overfetch=overfetch,
                language_prior=flags.language_prior,
                scopes=scope,
                metadata=metadata,
                rerank=rerank,
                k_overfetch=k_overfetch,
                offset=offset,
                qa_first=qa_first,
                mode=mode,
                max_per_source=max_per_source,
                group_by=group_by,
            ),
        )
    if as_json:
        _print_json(result)
    else:
        _print_result(result, debug)


def language_note(f: FusionSettings) -> str:
    """``; query language en, declared by the embedder`` for adaptive fusion, else ``""``."""
    if f.method.value != "adaptive" or f.query_language is None:
        return ""
    if f.embedder_covers_query is None:
        covered = "embedder languages unknown"
    else:
        covered = "declared by the embedder" if f.embedder_covers_query else "not declared by the embedder"
    return f"; query language {f.query_language}, {covered}"


class FusionFlags(NamedTuple):
    """The fusion flags as the request's fields (see :func:`fusion_flags`)."""

    fusion: str | dict[str, Any] | None
    lexical_weight: float | str | None
    language_prior: bool | None


def fusion_flags(
    fusion: str | None, dense_weight: float | None, lexical_weight: str | None, language_prior: bool | None
) -> FusionFlags:
    """``--fusion``, ``--dense-weight``, ``--lexical-weight`` and ``--language-prior`` as the
    request's fields, as the HTTP API takes them. A ``denseWeight`` exists only in a fusion
    object (``{"method": "minmax", "denseWeight": 0.8}``), so with ``--dense-weight`` the
    flags go into one, the method's other knobs with it (beside an object the service
    refuses them); without ``--fusion`` the object has no method, which the service reads
    as the collection's saved one (:class:`~plait.retrieval.fusion_choice.SavedMethodFusion`).
    The service alone judges them: a knob the method does not take (``--fusion rrf
    --dense-weight 0.5``, or ``--dense-weight`` on a collection whose saved method is rrf)
    or a weight outside 0..1 is its one-line error.

    >>> fusion_flags("adaptive", 0.6, None, False)
    FusionFlags(fusion={'method': 'adaptive', 'denseWeight': 0.6, 'languagePrior': False}, lexical_weight=None, language_prior=None)
    >>> fusion_flags(None, 0.8, None, None)
    FusionFlags(fusion={'denseWeight': 0.8}, lexical_weight=None, language_prior=None)
    >>> fusion_flags("rrf", None, "0.3", None)
    FusionFlags(fusion='rrf', lexical_weight=0.3, language_prior=None)
    """
    lexical = lexical_weight_option(lexical_weight)
    if dense_weight is None:
        return FusionFlags(fusion, lexical, language_prior)
    knobs = {"method": fusion, "dense_weight": dense_weight, "lexical_weight": lexical, "language_prior": language_prior}
    return FusionFlags(request_body(knobs, skip=()), None, None)


def lexical_weight_option(value: str | None) -> float | str | None:
    """``--lexical-weight``: 'auto' stays a string, anything else must be a number."""
    if value is None or value.strip().lower() == "auto":
        return None if value is None else "auto"
    try:
        return float(value)
    except ValueError:
        fail(f"--lexical-weight {value!r} is not a number in 0..1 or 'auto'")



def register(app: typer.Typer) -> None:
    """Add ``search`` to the main CLI."""
    app.command()(search)
