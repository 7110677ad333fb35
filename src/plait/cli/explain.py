"""``plait explain``: why a document did (not) come back — every stage of the search for it,
and a one-line diagnosis."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from plait.ask_gate import calibration_note
from plait.cli.options import (
    CollectionOpt,
    DebugOpt,
    EmbedderOpt,
    JsonOpt,
    MaxPerSourceOpt,
    ModeOpt,
    StoreOpt,
    console,
)
from plait.cli.options import collection_name as _collection
from plait.cli.options import open_engine as _engine
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.cli.search import (
    DenseWeightOpt,
    GroupByOpt,
    LanguagePriorOpt,
    MetaOpt,
    RrfKOpt,
    ThresholdOpt,
    fusion_flags,
    language_note,
    metadata_filter,
)
from plait.terminal import safe

__all__ = ["register"]


def explain(
    query: Annotated[str, typer.Argument(help="The query.")],
    doc: Annotated[str | None, typer.Option("--doc", help="The document id (metadata docId or source id).")] = None,
    path: Annotated[str | None, typer.Option("--path", help="The source path (relative to its root).")] = None,
    chunk: Annotated[str | None, typer.Option("--chunk", help="The chunk id.")] = None,
    k: Annotated[int, typer.Option("-k", help="How many hits the search returns.")] = 8,
    mode: ModeOpt = "hybrid",
    max_per_source: MaxPerSourceOpt = None,
    group_by: GroupByOpt = None,
    fusion: Annotated[str | None, typer.Option(help="rrf | weighted | minmax | dbsf | adaptive")] = None,
    lexical_weight: Annotated[str | None, typer.Option(help="rrf: 0..1, or 'auto'.")] = None,
    dense_weight: DenseWeightOpt = None,
    rrf_k: RrfKOpt = None,
    threshold: ThresholdOpt = None,
    overfetch: Annotated[int | None, typer.Option(help="Candidates per arm before fusion.")] = None,
    language_prior: LanguagePriorOpt = None,
    offset: Annotated[int, typer.Option(help="The page start the search used.")] = 0,
    scope: Annotated[list[str] | None, typer.Option(help="Only these scopes (repeatable).")] = None,
    meta: MetaOpt = None,
    rerank: Annotated[str | None, typer.Option(help="llm | cross-encoder")] = None,
    k_overfetch: Annotated[int | None, typer.Option("--k-overfetch", help="Fused candidates reranked.")] = None,
    llm: Annotated[str | None, typer.Option("--llm", help="ollama | openai | none, for --rerank llm.")] = None,
    cross_encoder: Annotated[
        str | None, typer.Option("--cross-encoder", help="Model directory or package, for --rerank cross-encoder.")
    ] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Why did a document (not) come back? Every stage for it, and a one-line diagnosis."""
    name = _collection(collection)
    flags = fusion_flags(fusion, dense_weight, lexical_weight, language_prior)
    metadata = metadata_filter(meta)
    with _engine(store, embedder, llm=llm, cross_encoder=cross_encoder, create=False) as engine:
        result = _run(
            debug,
            lambda: engine.explain(
                query,
                doc=doc,
                path=path,
                chunk=chunk,
                collection=name,
                k=k,
                fusion=flags.fusion,
                lexical_weight=flags.lexical_weight,
                rrf_k=rrf_k,
                threshold=threshold,
                overfetch=overfetch,
                language_prior=flags.language_prior,
                offset=offset,
                scopes=scope,
                metadata=metadata,
                rerank=rerank,
                k_overfetch=k_overfetch,
                mode=mode,
                max_per_source=max_per_source,
                group_by=group_by,
            ),
        )
    if as_json:
        _print_json(result)
        return
    _print_explain(result)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _chunk(chunk_id: str | None, named: bool) -> str:
    return f" · chunk {safe(chunk_id)}" if named and chunk_id else ""


def _print_terms(lex: Any) -> None:
    """The lexical term table: each distinct content term once, stopwords on one line,
    and the chunk the terms were evaluated against."""
    if lex.chunk_id:
        console.print(f"    terms evaluated against chunk {safe(lex.chunk_id)}", highlight=False)
    seen: set[str] = set()
    stopwords: list[str] = []
    for term in lex.terms:
        key = term.exact or term.raw.casefold()
        if key in seen:
            continue
        seen.add(key)
        if term.stopword:
            stopwords.append(term.raw)
            continue
        mark = "[green]✓[/green]" if term.reason is None else "[red]✗[/red]"
        console.print(f"    {mark} {safe(term.raw)}" + (f" — {safe(term.reason)}" if term.reason else ""), highlight=False)
    if stopwords:
        console.print(f"    [dim]stopwords, not counted: {safe(', '.join(stopwords))}[/dim]", highlight=False)


def _print_explain(result: Any) -> None:
    target = result.target
    console.print(f"[bold]“{safe(result.query)}”[/bold] — {target['kind']} {safe(target['value'])}", highlight=False)
    ing = result.ingestion
    console.print(f"[bold]ingestion[/bold]  {safe(ing.message)}", highlight=False)
    lex = result.lexical
    if not lex.ran:
        console.print(f"[bold]lexical[/bold]    off: {lex.reason}", highlight=False)
    else:
        console.print(
            f"[bold]lexical[/bold]    rank {lex.rank if lex.rank is not None else 'absent'} of {lex.candidates} "
            f"matching (over-fetch {lex.overfetch}) · BM25 {_num(lex.score)}",
            highlight=False,
        )
        _print_terms(lex)
    dense = result.dense
    fus = result.fusion
    # a path or document has several chunks: each stage reports its own best one, so the
    # lines name theirs whenever they are not all the same chunk
    named = len({c for c in (lex.chunk_id, dense.chunk_id, fus.chunk_id) if c}) > 1
    if dense.ran:
        console.print(
            f"[bold]dense[/bold]      rank {dense.rank if dense.rank is not None else 'absent'} of "
            f"{dense.candidates} · cosine {_num(dense.score)}{_chunk(dense.chunk_id, named)}",
            highlight=False,
        )
    else:
        console.print(f"[bold]dense[/bold]      off: {dense.reason}", highlight=False)
    if fus.returned:
        state = "returned"
    elif not ing.indexed and not ing.chunks:
        state = "not returned (no such source)" if target["kind"] == "path" else "not returned (not indexed)"
    else:
        state = f"not returned ({fus.dropped_by or 'not reached'})"
    console.print(
        f"[bold]fusion[/bold]     rank {fus.rank if fus.rank is not None else 'absent'} · score "
        f"{_num(fus.score)} ({_num(fus.score_normalised)} of the best) · k {fus.k} offset {fus.offset} · {state}"
        f"{_chunk(fus.chunk_id, named)}",
        highlight=False,
    )
    if fus.settings.dense_weight_used is not None:
        console.print(
            f"           {fus.settings.method.value}: dense weight {fus.settings.dense_weight_used:g} — "
            f"{escape(fus.settings.fusion_reason or '')}{language_note(fus.settings)}",
            highlight=False,
        )
    if fus.settings.identifier_reason:
        console.print(f"           identifier precedence: {escape(fus.settings.identifier_reason)}", highlight=False)
    if result.rerank is not None:
        rr = result.rerank
        console.print(
            f"[bold]rerank[/bold]     {rr.method}: {rr.rank_before} → {rr.rank_after}"
            + ("" if rr.reranked else f" (fused order kept: {rr.reason})"),
            highlight=False,
        )
    if result.ask_gate is not None:
        gate = result.ask_gate.gate
        shown = result.ask_gate.verdict
        # the verdict's chunk is named unless every stage line is about that same chunk
        other = shown is not None and shown.chunk_id not in {lex.chunk_id, dense.chunk_id, fus.chunk_id}
        about = _chunk(shown.chunk_id, named or other) if shown is not None else ""
        console.print(
            f"[bold]ask gate[/bold]   cosine ≥ {gate.min_cosine:.4f} ({gate.cosine_source}) or term coverage ≥ "
            f"{gate.min_term_coverage:.2f} ({gate.coverage_source}){calibration_note(gate)}"
            + (f"{about}: {escape(shown.reason)}" if shown is not None else ""),
            highlight=False,
        )
    console.print(
        f"[bold]diagnosis[/bold]  \\[{result.diagnosis.code.value}] {escape(result.diagnosis.message)}",
        highlight=False,
    )
    if len(result.chunks) > 1:
        _print_chunks(result)


def _rank(rank: int | None, score: float | None) -> str:
    return "—" if rank is None else f"#{rank} · {score:.4f}" if score is not None else f"#{rank}"


def _print_chunks(result: Any) -> None:
    """One row per chunk of the document (as the web page's chunk table): its place in its
    source and headings, its rank and score in each arm and in fusion, and whether it was
    returned or which stage cut it — the stage lines above report each arm's best chunk."""
    gate = {v.chunk_id: v.passed for v in result.ask_gate.checks} if result.ask_gate is not None else {}
    reranked = result.rerank is not None
    table = Table(title=f"each chunk of the document ({len(result.chunks)})", title_justify="left")
    for column in ("chunk", "headings", "lexical", "dense", "fused", *(["rerank"] if reranked else []), "page", "gate"):
        table.add_column(column)
    for chunk in sorted(result.chunks, key=lambda c: (c.source_id, c.ordinal)):
        place = f"{chunk.ordinal + 1} of {chunk.source_chunks}" if chunk.source_chunks else str(chunk.ordinal + 1)
        if len({c.source_id for c in result.chunks}) > 1:
            place = f"{chunk.source_id} {place}"
        page = "returned" if chunk.returned else f"cut: {chunk.dropped_by}" if chunk.dropped_by else "not returned"
        passed = gate.get(chunk.chunk_id)
        table.add_row(
            safe(place),
            safe(" › ".join(chunk.heading_path)) or "—",
            _rank(chunk.lexical_rank, chunk.lexical_score),
            _rank(chunk.dense_rank, chunk.cosine) + ("" if chunk.has_vector else " (no vector)"),
            _rank(chunk.fused_rank, chunk.fused_score),
            *([_rank(chunk.rerank_rank, None)] if reranked else []),
            safe(page),
            "—" if passed is None else "passes" if passed else "fails",
        )
    console.print(table)



def register(app: typer.Typer) -> None:
    """Add ``explain`` to the main CLI."""
    app.command()(explain)
