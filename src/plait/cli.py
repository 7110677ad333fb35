"""The ``plait`` command line: a thin adapter over :class:`plait.service.Plait`.

Every command takes ``--store``, ``--collection`` and ``--embedder``; every command that
prints results takes ``--json`` and then prints exactly the camelCase model the HTTP
API returns. Exit code 0 on success, 1 on a user error with a one-line message (no
traceback unless ``--debug``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from plait.cli_options import CollectionOpt, DebugOpt, EmbedderOpt, JsonOpt, StoreOpt, console, err
from plait.cli_options import collection_name as _collection
from plait.cli_options import open_engine as _engine
from plait.cli_options import print_json as _print_json
from plait.cli_options import run_or_exit as _run
from plait.cli_progress import coverage_text, run_indexing
from plait.errors import NotFoundError
from plait.sources.roots import parse_scope_rules
from plait.terminal import highlighted, safe
from plait.types import FusionSettings, IndexReport, SearchResult, to_json

if TYPE_CHECKING:
    from plait.service import Plait

__all__ = ["app", "main"]

#: search and explain: ``--language-prior/--no-language-prior`` (None: the collection's setting).
LanguagePriorOpt = Annotated[
    bool | None,
    typer.Option(
        "--language-prior/--no-language-prior",
        help="adaptive: let the embedder's declared languages decide how much a disagreement counts "
        "(default: the collection's setting, on).",
    ),
]

app = typer.Typer(
    name="plait",
    help="Hybrid retrieval for RAG: BM25 + dense vectors, fused before the cut, with citations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


T = TypeVar("T")

AllowEmptyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-empty",
        help="Delete the indexed sources of a root that now yields none or cannot be fully read.",
    ),
]


_LISTED = 20  # sources named per list in a text report; --json has them all


def _print_report(report: IndexReport) -> None:
    emb = report.embedding
    console.print(
        f"[bold]{report.collection}[/bold]: {report.sources_indexed}/{report.sources_seen} sources indexed · "
        f"chunks +{report.chunks_added} ~{report.chunks_updated} ={report.chunks_unchanged} "
        f"-{report.chunks_deleted}",
        highlight=False,
    )
    dedup = f", {emb.deduplicated} deduplicated (same text as another chunk)" if emb.deduplicated else ""
    vec = f"vectors: {emb.embedded} embedded, {emb.reused} reused{dedup}, {emb.skipped} missing"
    if emb.reason:
        vec += f" — {emb.reason}"
    console.print(vec, highlight=False)
    if report.sources_deleted:
        console.print(f"{report.sources_deleted} vanished sources deleted", highlight=False)
    if report.skipped_by_type:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report.skipped_by_type.items()))
        console.print(f"events not indexed by type: {kinds}", highlight=False)
    for label, names in (
        ("added", report.added_sources),
        ("changed", report.changed_sources),
        ("deleted", report.deleted_sources),
    ):
        if names:
            shown = ", ".join(safe(name) for name in names[:_LISTED])
            more = f" … and {len(names) - _LISTED} more (all in --json)" if len(names) > _LISTED else ""
            console.print(f"{label} ({len(names)}): {shown}{more}", highlight=False)
    for folder, count in sorted(report.adr_folders.items()):
        noun = "ADR" if count == 1 else "ADRs"
        console.print(f"{count} {noun} under {safe(folder)} → adr", highlight=False)
    for item in report.skipped:
        console.print(f"  [yellow]skipped[/yellow] {safe(item.path)}: {safe(item.reason)}", highlight=False)
    state = "[green]complete[/green]" if report.complete else "[yellow]incomplete[/yellow]"
    console.print(f"{state} in {report.elapsed_ms / 1000:.1f}s")


DetachOpt = Annotated[
    bool,
    typer.Option(
        "--detach",
        help="Return once every chunk is written (searchable lexically); the vectors are embedded "
        "later by 'plait reindex' or 'plait serve'.",
    ),
]


def _indexing(
    engine: Plait,
    name: str,
    store: str | None,
    as_json: bool,
    debug: bool,
    action: Callable[[Any, Any], IndexReport],
) -> IndexReport:
    """Run an indexing action in the foreground (bars, Ctrl-C; see :mod:`plait.cli_progress`)."""
    resume = f"plait reindex --collection {name}" + (f" --store {store}" if store else "")

    def coverage() -> float | None:
        return engine.vector_coverage(name) if engine.store.get_collection(name) else None

    return run_indexing(debug, action, console=err, as_json=as_json, coverage=coverage, resume=resume)


@app.command()
def index(
    path: Annotated[
        Path, typer.Argument(help="A folder or git repository of Markdown/text files, or a .jsonl file.")
    ],
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    scope: Annotated[str | None, typer.Option(help="Scope for a .jsonl file (default docs).")] = None,
    ref: Annotated[
        str | None, typer.Option(help="Index this git commit, branch or tag (nothing is checked out).")
    ] = None,
    glob: Annotated[
        list[str] | None,
        typer.Option("--glob", help="File-name glob to index (repeatable; default *.md *.markdown *.txt *.rst)."),
    ] = None,
    scope_rule: Annotated[
        list[str] | None,
        typer.Option(
            "--scope-rule",
            help="PREFIX=SCOPE, first match wins (repeatable; default: ADR folders and ADR-shaped files → adr, the rest → docs).",
        ),
    ] = None,
    max_bytes: Annotated[
        int | None, typer.Option("--max-bytes", help="Skip larger files (default 2097152).")
    ] = None,
    allow_empty: AllowEmptyOpt = False,
    detach: DetachOpt = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Index a folder or git repository (ADRs by convention → scope adr, the rest → docs) or a JSONL/BEIR corpus.

    A folder holding .git is read as a git working tree: only tracked files. Every chunk is
    written (searchable lexically) before the vectors are embedded, batch by batch, with a
    progress bar; Ctrl-C keeps a searchable index that 'plait reindex' resumes.
    """
    name = _collection(collection)
    with _engine(store, embedder) as engine:

        def action(tick: Any, embed_tick: Any) -> IndexReport:
            rules = parse_scope_rules(scope_rule) if scope_rule else None
            return engine.index(
                path,
                collection=name,
                scope=scope,
                ref=ref,
                globs=glob or None,
                scope_rules=rules,
                max_bytes=max_bytes,
                progress=tick,
                allow_empty=allow_empty,
                backfill=not detach,
                embed_progress=embed_tick,
            )

        report = _indexing(engine, name, store, as_json, debug, action)
    if as_json:
        _print_json(report)
    else:
        _print_report(report)


@app.command("index-sessions")
def index_sessions(
    path: Annotated[Path, typer.Argument(help="A .jsonl session event log, or a folder of them.")],
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    scope: Annotated[str, typer.Option(help="Scope of the sessions' chunks.")] = "sessions",
    detach: DetachOpt = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Index chat/agent session logs: only chat.message and agent.response events."""
    name = _collection(collection)
    with _engine(store, embedder) as engine:
        report = _indexing(
            engine,
            name,
            store,
            as_json,
            debug,
            lambda tick, embed_tick: engine.index_sessions(
                path, collection=name, scope=scope, progress=tick, backfill=not detach,
                embed_progress=embed_tick,
            ),
        )
    if as_json:
        _print_json(report)
    else:
        _print_report(report)


@app.command()
def reindex(
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    scope: Annotated[str | None, typer.Option(help="Only this scope.")] = None,
    source: Annotated[
        Path | None, typer.Option(help="Only the recorded source at this path.")
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", help="Embed every chunk of the selected sources again, replacing each source atomically.")
    ] = False,
    allow_empty: AllowEmptyOpt = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Re-read recorded sources: unchanged chunks keep their vectors, vanished sources lose theirs.

    Missing vectors are backfilled. --full re-embeds every chunk of the selected scope / source.
    """
    name = _collection(collection)
    with _engine(store, embedder) as engine:
        report = _indexing(
            engine,
            name,
            store,
            as_json,
            debug,
            lambda tick, embed_tick: engine.reindex(
                collection=name,
                scope=scope,
                source=source,
                full=full,
                progress=tick,
                allow_empty=allow_empty,
                embed_progress=embed_tick,
            ),
        )
    if as_json:
        _print_json(report)
    else:
        _print_report(report)


def _figure(value: int | None) -> str:
    return "unknown" if value is None else str(value)


@app.command()
def coverage(
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Per scope: sources present vs indexed, chunks without a vector, model, last indexed."""
    name = _collection(collection)
    with _engine(store, embedder, create=False) as engine:
        report = _run(debug, lambda: engine.coverage(collection=name))
    if as_json:
        _print_json(report)
        return
    table = Table(title=f"coverage of {report.collection}")
    for column in (
        "scope", "present", "indexed", "outdated", "vanished", "chunks", "no vector", "model", "last indexed"
    ):
        table.add_column(column)
    for row in report.scopes:
        table.add_row(
            row.scope,
            _figure(row.sources_present),
            _figure(row.sources_indexed),
            _figure(row.sources_outdated),
            _figure(row.sources_vanished),
            str(row.chunks),
            str(row.chunks_without_vector),
            row.embedding_model or "—",
            row.last_indexed_at or "—",
        )
    console.print(table)
    for root in report.roots:
        where = root.path + (f" @ {root.ref}" if root.ref else "")
        if not root.available:
            console.print(f"[red]unreadable[/red] {root.kind} {safe(where)}: {safe(root.reason)}", highlight=False)
            continue
        console.print(
            f"{root.kind} {safe(where)}: {root.sources_present} sources, {len(root.skipped)} skipped",
            highlight=False,
        )
        for item in root.skipped:
            console.print(f"  [yellow]skipped[/yellow] {safe(item.path)}: {safe(item.reason)}", highlight=False)
    if report.sources_without_root:
        console.print(f"{report.sources_without_root} sources indexed from code (no recorded root)")


@app.command()
def calibrate(
    samples: Annotated[int, typer.Option(help="Chunks to draw pseudo-queries from.")] = 200,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Measure only; do not save the weight.")] = False,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Choose the collection's dense fusion weight on pseudo-queries from its own chunks (no labels)."""
    name = _collection(collection)
    with _engine(store, embedder) as engine:
        result = _run(debug, lambda: engine.calibrate(collection=name, samples=samples, save=not dry_run))
    if as_json:
        _print_json(result)
        return
    state = "not saved (dry run)" if dry_run else f"saved as {name}'s fusion denseWeight"
    console.print(f"dense weight {result.dense_weight:g} — {state}", highlight=False)
    console.print(f"  {escape(result.reason)}", highlight=False)


@app.command("delete-collection")
def delete_collection(
    name: Annotated[str, typer.Argument(help="The collection to delete, with all its chunks.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    keys: Annotated[
        Path | None,
        typer.Option("--keys", help="Also revoke in this API key file (PLAIT_KEYS and keys.db next to the store always)."),
    ] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Delete a collection: its chunks, vectors, lexical index and settings."""
    with _engine(store, embedder, keys=keys) as engine:

        def action() -> dict[str, Any]:
            info = engine.store.get_collection(name)
            if info is None:
                raise NotFoundError(f"collection {name!r} does not exist")
            if not yes and not typer.confirm(f"delete collection {name!r} ({info.chunks} chunks)?"):
                raise typer.Abort()
            done = engine.delete_collection_report(name)  # revokes its keys in every key file
            return {
                "name": name,
                "deleted": done.deleted,
                "chunks": info.chunks,
                "sources": info.sources,
                "revokedKeys": done.revoked_keys,
            }

        result = _run(debug, action)
    if as_json:
        _print_json(result)
    else:
        revoked = result["revokedKeys"]
        keys_note = f", {len(revoked)} API key(s) revoked" if revoked else ""
        console.print(
            f"deleted collection {name} ({result['chunks']} chunks, {result['sources']} sources{keys_note})",
            highlight=False,
        )


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
        console.print(
            f"[bold]{hit.ranks.fused:>2}[/bold] {_BADGE[hit.match.value]:<9} {hit.score:.4f} "
            f"dense {dense} · lexical {lexical}{reranked}  [blue]{_origin_text(hit)}[/blue]",
            highlight=False,
        )
        if hit.snippet:
            console.print("   " + highlighted(hit.snippet, hit.highlights), highlight=False)
        else:
            console.print("   [dim]" + safe(" ".join(hit.content.split())[:200]) + "[/dim]", highlight=False)
    f = result.fusion
    line = f"fusion {f.method.value}"
    if f.method.value == "rrf":
        line += f" (k={f.rrf_k}, lexical_weight={f.lexical_weight})"
    elif f.method.value == "weighted":
        line += f" (vector {f.vector_weight} / lexical {f.lexical_score_weight}, threshold {f.threshold})"
    else:
        line += f" (dense weight used {f.dense_weight_used}: {escape(f.fusion_reason or '')}{_language_note(f)})"
    if f.lexical_weight_mode.value == "auto":
        line += f" \\[auto: {escape(f.lexical_weight_reason or '')}]"
    line += f" · over-fetch {f.overfetch} · "
    if not result.vector_available:
        line += f"[yellow]lexical only[/yellow]: {result.vector_unavailable_reason}"
    elif result.vector_coverage < 1.0:
        line += f"[yellow]{coverage_text(result.vector_coverage)}[/yellow] (backfill in progress)"
    else:
        line += "dense arm on"
    console.print(line, highlight=False)
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


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="The query.")],
    k: Annotated[int, typer.Option("-k", help="How many hits.")] = 8,
    fusion: Annotated[str | None, typer.Option(help="rrf | weighted | minmax | dbsf | adaptive")] = None,
    lexical_weight: Annotated[
        str | None, typer.Option(help="0..1 (0.5 weighs both arms equally), or 'auto' (identifier-aware).")
    ] = None,
    overfetch: Annotated[int | None, typer.Option(help="Candidates per arm before fusion.")] = None,
    language_prior: LanguagePriorOpt = None,
    offset: Annotated[int, typer.Option(help="Skip this many fused positions (paging).")] = 0,
    qa_first: Annotated[
        bool, typer.Option("--qa-first", help="Answer with a matching approved FAQ card when there is one.")
    ] = False,
    scope: Annotated[list[str] | None, typer.Option(help="Only these scopes (repeatable).")] = None,
    meta: Annotated[list[str] | None, typer.Option(help="Metadata filter KEY=VALUE (repeatable).")] = None,
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
    metadata: dict[str, str] = {}
    for item in meta or []:
        key, sep, value = item.partition("=")
        if not sep:
            err.print(f"[red]error:[/red] --meta {item!r} is not KEY=VALUE", highlight=False)
            raise typer.Exit(1)
        metadata[key] = value
    with _engine(store, embedder, llm=llm, cross_encoder=cross_encoder, create=False) as engine:
        result = _run(
            debug,
            lambda: engine.search(
                query,
                collection=name,
                k=k,
                fusion=fusion,
                lexical_weight=_weight(lexical_weight),
                overfetch=overfetch,
                language_prior=language_prior,
                scopes=scope,
                metadata=metadata or None,
                rerank=rerank,
                k_overfetch=k_overfetch,
                offset=offset,
                qa_first=qa_first,
            ),
        )
    if as_json:
        _print_json(result)
    else:
        _print_result(result, debug)


def _language_note(f: FusionSettings) -> str:
    """``; query language en, declared by the embedder`` for adaptive fusion, else ``""``."""
    if f.method.value != "adaptive" or f.query_language is None:
        return ""
    if f.embedder_covers_query is None:
        covered = "embedder languages unknown"
    else:
        covered = "declared by the embedder" if f.embedder_covers_query else "not declared by the embedder"
    return f"; query language {f.query_language}, {covered}"


def _weight(value: str | None) -> float | str | None:
    """``--lexical-weight``: 'auto' stays a string, anything else must be a number."""
    if value is None or value.strip().lower() == "auto":
        return None if value is None else "auto"
    try:
        return float(value)
    except ValueError:
        err.print(f"[red]error:[/red] --lexical-weight {value!r} is not a number in 0..1 or 'auto'", highlight=False)
        raise typer.Exit(1) from None


@app.command()
def explain(
    query: Annotated[str, typer.Argument(help="The query.")],
    doc: Annotated[str | None, typer.Option("--doc", help="The document id (metadata docId or source id).")] = None,
    path: Annotated[str | None, typer.Option("--path", help="The source path (relative to its root).")] = None,
    chunk: Annotated[str | None, typer.Option("--chunk", help="The chunk id.")] = None,
    k: Annotated[int, typer.Option("-k", help="How many hits the search returns.")] = 8,
    fusion: Annotated[str | None, typer.Option(help="rrf | weighted | minmax | dbsf | adaptive")] = None,
    lexical_weight: Annotated[str | None, typer.Option(help="0..1, or 'auto'.")] = None,
    overfetch: Annotated[int | None, typer.Option(help="Candidates per arm before fusion.")] = None,
    language_prior: LanguagePriorOpt = None,
    offset: Annotated[int, typer.Option(help="The page start the search used.")] = 0,
    scope: Annotated[list[str] | None, typer.Option(help="Only these scopes (repeatable).")] = None,
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
                fusion=fusion,
                lexical_weight=_weight(lexical_weight),
                overfetch=overfetch,
                language_prior=language_prior,
                offset=offset,
                scopes=scope,
                rerank=rerank,
                k_overfetch=k_overfetch,
            ),
        )
    if as_json:
        _print_json(result)
        return
    _print_explain(result)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


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
    console.print(
        f"[bold]lexical[/bold]    rank {lex.rank if lex.rank is not None else 'absent'} of {lex.candidates} "
        f"matching (over-fetch {lex.overfetch}) · BM25 {_num(lex.score)}",
        highlight=False,
    )
    _print_terms(lex)
    dense = result.dense
    if dense.ran:
        console.print(
            f"[bold]dense[/bold]      rank {dense.rank if dense.rank is not None else 'absent'} of "
            f"{dense.candidates} · cosine {_num(dense.score)}",
            highlight=False,
        )
    else:
        console.print(f"[bold]dense[/bold]      off: {dense.reason}", highlight=False)
    fus = result.fusion
    if fus.returned:
        state = "returned"
    elif not ing.indexed and not ing.chunks:
        state = "not returned (no such source)" if target["kind"] == "path" else "not returned (not indexed)"
    else:
        state = f"not returned ({fus.dropped_by or 'not reached'})"
    console.print(
        f"[bold]fusion[/bold]     rank {fus.rank if fus.rank is not None else 'absent'} · score "
        f"{_num(fus.score)} ({_num(fus.score_normalised)} of the best) · k {fus.k} offset {fus.offset} · {state}",
        highlight=False,
    )
    if fus.settings.dense_weight_used is not None:
        console.print(
            f"           {fus.settings.method.value}: dense weight {fus.settings.dense_weight_used:g} — "
            f"{escape(fus.settings.fusion_reason or '')}{_language_note(fus.settings)}",
            highlight=False,
        )
    if result.rerank is not None:
        rr = result.rerank
        console.print(
            f"[bold]rerank[/bold]     {rr.method}: {rr.rank_before} → {rr.rank_after}"
            + ("" if rr.reranked else f" (fused order kept: {rr.reason})"),
            highlight=False,
        )
    console.print(
        f"[bold]diagnosis[/bold]  \\[{result.diagnosis.code.value}] {escape(result.diagnosis.message)}",
        highlight=False,
    )


@app.command()
def collections(
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List collections with their embedding model and counts."""
    with _engine(store, embedder, create=False) as engine:
        infos = _run(debug, engine.collections)
    if as_json:
        _print_json([to_json(i) for i in infos])
        return
    table = Table(title="collections")
    for column in ("name", "model", "dim", "sources", "chunks", "no vector", "last indexed"):
        table.add_column(column)
    for i in infos:
        table.add_row(
            i.name,
            f"{i.embedder_provider}/{i.embedder_model}" if i.embedder_model else "—",
            str(i.dimension or "—"),
            str(i.sources),
            str(i.chunks),
            str(i.chunks_without_vector),
            i.last_indexed_at or "—",
        )
    console.print(table)


def main() -> None:
    """Console-script entry point."""
    app()


from plait.api.commands import register as _register_api

_register_api(app)

from plait.evaluation.commands import register as _register_eval

_register_eval(app)

from plait.refinery.commands import register as _register_refinery

_register_refinery(app)

if __name__ == "__main__":
    main()
