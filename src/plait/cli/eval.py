"""The ``plait eval`` and ``plait tune`` commands, added to the CLI by :func:`register`.

Both take a BEIR dataset folder, index its corpus (into a throwaway store unless
``--store`` is given; passages through the embedding cache) and print a table, or with
``--json`` exactly the camelCase :class:`~plait.evaluation.models.EvalReport` /
:class:`~plait.evaluation.models.TuneReport`. Exit code 1 with a one-line message on a
user error (a traceback only with ``--debug``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from plait.cli.options import CollectionOpt, DebugOpt, EmbedderOpt, StoreOpt, make_console
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.collection_settings import read_settings, write_settings
from plait.errors import ConfigError
from plait.evaluation.metrics import measure_label
from plait.evaluation.models import EvalReport, TuneReport
from plait.evaluation.prepare import prepared
from plait.evaluation.report import check_report_path, describe, settings_text, write_html
from plait.evaluation.runner import (
    DEFAULT_DEPTH,
    STRATEGIES,
    collect_arms,
    evaluate,
    saved_fusion,
)
from plait.evaluation.tuner import OVERFETCH, fusion_to_save, tune
from plait.terminal import safe
from plait.types import to_json

__all__ = ["register"]

T = TypeVar("T")
console = make_console()
err = make_console(stderr=True)

DatasetArg = Annotated[Path, typer.Argument(help="A BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.")]
SplitOpt = Annotated[str, typer.Option(help="The qrels split to evaluate.")]
CacheOpt = Annotated[
    Path | None, typer.Option("--cache", help="Embedding cache folder (default ~/.cache/plait).")
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not use the embedding cache.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


def _strategies(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown or not names:
        raise ConfigError(f"unknown strategies {unknown or [text]}; allowed: {', '.join(STRATEGIES)}")
    return names


def _print_eval(report: EvalReport) -> None:
    console.print(
        f"[bold]{report.dataset}[/bold] ({report.split}): {report.queries} queries "
        f"({report.slice_counts.get('identifier', 0)} identifier, {report.slice_counts.get('natural', 0)} natural) · "
        f"{report.corpus_docs} docs → {report.chunks} chunks · embedder {report.embedder or 'none'} · depth {report.depth}",
        highlight=False,
    )
    table = Table()
    recall = measure_label("recall@100", report.depth, short=True)  # R@20 for --depth 20
    for column in ("strategy", "slice", "n", "nDCG@10", "R@10", recall, "MRR@10", "settings"):
        table.add_column(column)
    for result in report.strategies:
        if not result.available:
            table.add_row(result.strategy, "—", "—", "—", "—", "—", "—", f"[yellow]unavailable[/yellow]: {result.reason}")
            continue
        for item in result.slices:
            m = item.metrics
            table.add_row(
                result.strategy,
                item.slice,
                str(item.queries),
                f"{m['ndcg@10']:.4f}",
                f"{m['recall@10']:.4f}",
                f"{m['recall@100']:.4f}",
                f"{m['mrr@10']:.4f}",
                settings_text(result),
            )
    console.print(table)
    skipped = report.index.skipped if report.index is not None else []
    if skipped:
        console.print(
            f"[yellow]{len(skipped)} corpus line{'s' if len(skipped) != 1 else ''} not indexed[/yellow], e.g. "
            f"{safe(skipped[0].path)}: {safe(skipped[0].reason)}",
            highlight=False,
            soft_wrap=True,
        )
    missing = report.relevant_not_indexed
    if missing:
        console.print(
            f"[yellow]{len(missing)} relevant document{'s' if len(missing) != 1 else ''} of the qrels "
            f"not in the index[/yellow] "
            f"(every strategy misses them), e.g. {safe(', '.join(missing[:3]))}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"metrics: {report.metric_provider}", highlight=False)
    if report.cache:
        console.print(
            f"embedding cache: {report.cache.get('hits', 0)} passages reused, {report.cache.get('embedded', 0)} embedded",
            highlight=False,
        )


def _print_tune(report: TuneReport) -> None:
    c = report.chosen
    console.print(
        f"[bold]{report.dataset}[/bold] ({report.split}): {report.queries} queries, {report.candidates} candidate "
        f"settings, {report.folds}-fold cross-validation on {report.measure} (seed {report.seed})",
        highlight=False,
    )
    for fold in report.fold_results:
        console.print(
            f"  fold {fold.fold} ({fold.queries} q): chose {describe(fold.chosen)} → {fold.chosen_score:.4f} "
            f"held out (defaults {fold.default_score:.4f})",
            highlight=False,
        )
    console.print(
        f"held-out {report.measure}: {report.held_out_score:.4f} vs defaults {report.default_score:.4f} "
        f"→ gain [bold]{report.gain:+.4f}[/bold]",
        highlight=False,
    )
    console.print(f"chosen settings: {describe(c)}", highlight=False)
    if report.saved_to:
        console.print(f"saved as the fusion defaults of {safe(report.saved_to)}", highlight=False)


def eval_command(
    dataset: DatasetArg,
    split: SplitOpt = "test",
    strategies: Annotated[str, typer.Option(help="Comma-separated: " + ",".join(STRATEGIES))] = ",".join(STRATEGIES),
    depth: Annotated[int, typer.Option(help="Documents retrieved per query.")] = DEFAULT_DEPTH,
    report: Annotated[Path | None, typer.Option("--report", help="Write an HTML report here.")] = None,
    rerank: Annotated[str, typer.Option(help="Reranker for rrf+rerank: cross-encoder | llm.")] = "cross-encoder",
    cross_encoder: Annotated[str | None, typer.Option(help="Cross-encoder model dir or package.")] = None,
    llm: Annotated[str | None, typer.Option(help="LLM provider for --rerank llm.")] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    cache: CacheOpt = None,
    no_cache: NoCacheOpt = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Score bm25, vector, rrf, weighted and rrf+rerank on a BEIR dataset, per query slice."""

    def action() -> EvalReport:
        names = _strategies(strategies)
        if report is not None:
            check_report_path(report)

        def reranker() -> Any:
            from plait.rerank import make_reranker

            return make_reranker(rerank, llm=llm, cross_encoder=cross_encoder)

        with prepared(
            dataset, split=split, store=store, collection=collection, embedder=embedder,
            cache=cache, use_cache=not no_cache,
        ) as ready:
            outcome = evaluate(
                ready.dataset,
                store=ready.store,
                collection=ready.collection,
                embedder=ready.embedder,
                strategies=names,
                depth=depth,
                reranker=reranker if "rrf+rerank" in names else None,
                index=ready.index,
                cache=ready.cache,
            )
        return outcome.report

    result = _run(debug, action)
    if as_json:
        _print_json(to_json(result))
    else:
        _print_eval(result)
    if report is not None:  # after the figures are out: a failed write loses none of them
        _run(debug, lambda: write_html(result, report))
        if not as_json:
            console.print(f"report written to {report}", highlight=False)


def tune_command(
    dataset: DatasetArg,
    split: SplitOpt = "test",
    folds: Annotated[int, typer.Option(help="Cross-validation folds.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the query shuffle.")] = 0,
    measure: Annotated[str, typer.Option(help="ndcg@10 | recall@10 | recall@100 | mrr@10")] = "ndcg@10",
    save: Annotated[bool, typer.Option("--save", help="Save the chosen settings as the collection's defaults.")] = False,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    cache: CacheOpt = None,
    no_cache: NoCacheOpt = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Search fusion settings with cross-validation over queries; print the held-out gain."""

    def action() -> TuneReport:
        if save and store is None:
            raise ConfigError("--save needs --store: a throwaway store is deleted when tune ends")
        with prepared(
            dataset, split=split, store=store, collection=collection, embedder=embedder,
            cache=cache, use_cache=not no_cache,
        ) as ready:
            defaults = saved_fusion(ready.store, ready.collection)
            queries = {q: ready.dataset.queries[q] for q in ready.dataset.query_ids}
            arms = collect_arms(
                ready.store, ready.collection, queries, embedder=ready.embedder,
                limit=max(max(OVERFETCH), defaults.overfetch),
            )
            emb = ready.embedder
            result = tune(
                arms,
                ready.dataset.qrels,
                dataset=ready.dataset.name,
                split=split,
                embedder=f"{emb.provider}/{emb.model}" if emb is not None else None,
                defaults=defaults,
                folds=folds,
                seed=seed,
                measure=measure,
            )
            if save:
                saved = read_settings(ready.store, ready.collection).fusion
                write_settings(ready.store, ready.collection, fusion=fusion_to_save(result.chosen, saved))
                result = result.model_copy(update={"saved_to": f"{store}#{ready.collection}"})
        return result

    result = _run(debug, action)
    if as_json:
        _print_json(to_json(result))
    else:
        _print_tune(result)


def register(app: typer.Typer) -> None:
    """Add the ``eval`` and ``tune`` commands to ``app``."""
    app.command("eval")(eval_command)
    app.command("tune")(tune_command)
