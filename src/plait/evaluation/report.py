"""The quality report: a Markdown/HTML table and a PNG plot of each strategy per slice.

:func:`render_html` writes one self-contained HTML file: dataset, model, settings,
machine and date, a table of every metric per strategy and slice, the per-query
comparisons, and a grouped bar chart (matplotlib, PNG, embedded as base64) of
nDCG@10 and recall@100 per strategy and slice. :func:`render_markdown` gives the same
table as Markdown for ``benchmarks/results``. matplotlib is the ``eval`` extra.
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plait.errors import ConfigError
from plait.evaluation.metrics import EVAL_INSTALL_HINT, MEASURES, measure_label
from plait.evaluation.models import EvalReport, StrategyResult
from plait.evaluation.slices import SLICES
from plait.types import FusionSettings

__all__ = [
    "check_report_path", "describe", "plot_png", "render_html", "render_markdown", "settings_text", "write_html",
]

_PLOTTED = ("ndcg@10", "recall@100")


def describe(s: FusionSettings) -> str:
    """Fusion settings in one line, naming only the fields the method uses."""
    if s.method.value == "rrf":
        return f"rrf k={s.rrf_k} lexical_weight={s.lexical_weight} overfetch={s.overfetch}"
    if s.method.value == "adaptive" and s.estimated_base is not None:
        # the collection's arm estimate is the base, not dense_weight (plait.fusion.resolve_fusion)
        return f"adaptive base={s.estimated_base} (collection estimate, per query) overfetch={s.overfetch}"
    if s.method.value in ("minmax", "dbsf", "adaptive"):
        per_query = " (per query)" if s.method.value == "adaptive" else ""
        return f"{s.method.value} dense_weight={s.dense_weight}{per_query} overfetch={s.overfetch}"
    return (
        f"weighted vector={s.vector_weight} lexical={s.lexical_score_weight} "
        f"threshold={s.threshold} overfetch={s.overfetch}"
    )


def settings_text(result: StrategyResult) -> str:
    """A one-line description of a strategy's fusion settings ('—' for a single arm)."""
    if result.settings is None:
        return "—"
    return describe(result.settings) + (" + rerank" if result.strategy == "rrf+rerank" else "")


def _rows(report: EvalReport) -> list[list[str]]:
    rows = []
    for result in report.strategies:
        if not result.available:
            rows.append([result.strategy, "—", "—", *["—"] * len(MEASURES), f"unavailable: {result.reason}"])
            continue
        for item in result.slices:
            rows.append(
                [
                    result.strategy,
                    item.slice,
                    str(item.queries),
                    *[f"{item.metrics[m]:.4f}" for m in MEASURES],
                    settings_text(result),
                ]
            )
    return rows


def _header(depth: int) -> list[str]:
    return ["strategy", "slice", "queries", *(measure_label(m, depth) for m in MEASURES), "settings"]


def render_markdown(report: EvalReport) -> str:
    """The results table (and comparisons) as Markdown."""
    lines = [
        (
            f"### {report.dataset} ({report.split}) — {report.queries} queries, "
            f"{report.corpus_docs} documents, {report.chunks} chunks"
        ),
        "",
        f"embedder: `{report.embedder or 'none'}` · depth {report.depth} · metrics: {report.metric_provider}",
        "",
        "| " + " | ".join(_header(report.depth)) + " |",
        "|" + "|".join("---" for _ in _header(report.depth)) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(report)]
    if report.comparisons:
        lines += ["", "| per query (nDCG@10) | better | worse | tied | mean Δ |", "|---|---|---|---|---|"]
        lines += [
            f"| {c.strategy} vs {c.baseline} | {c.better} | {c.worse} | {c.tied} | {c.mean_delta:+.4f} |"
            for c in report.comparisons
        ]
    return "\n".join(lines) + "\n"


def plot_png(report: EvalReport, *, measures: Sequence[str] = _PLOTTED) -> bytes:
    """A grouped bar chart (one panel per measure; bars: strategy × slice) as PNG bytes."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError(f"the report plot needs matplotlib: {EVAL_INSTALL_HINT}") from exc
    available = [r for r in report.strategies if r.available]
    slices = [s for s in SLICES if report.slice_counts.get(s)]
    fig, axes = plt.subplots(1, len(measures), figsize=(5.2 * len(measures), 3.8), squeeze=False)
    width = 0.8 / max(1, len(slices))
    for ax, measure in zip(axes[0], measures, strict=True):
        for j, slice_name in enumerate(slices):
            values = []
            for result in available:
                found = [i.metrics[measure] for i in result.slices if i.slice == slice_name]
                values.append(found[0] if found else 0.0)
            positions = [i + (j - (len(slices) - 1) / 2) * width for i in range(len(available))]
            label = f"{slice_name} (n={report.slice_counts[slice_name]})"
            bars = ax.bar(positions, values, width, label=label)
            ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
        ax.set_xticks(range(len(available)), [r.strategy for r in available], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{report.dataset}: {measure_label(measure, report.depth)}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


_STYLE = (
    "<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:72rem}"
    "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;"
    "font-size:.85rem;text-align:left}th{background:#f3f3f3}img{max-width:100%}</style>"
)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    thead = f"<thead><tr>{head}</tr></thead>" if header else ""
    return f"<table>{thead}<tbody>{body}</tbody></table>"


def render_html(report: EvalReport, *, png: bytes | None = None) -> str:
    """A self-contained HTML report (the plot embedded as a base64 PNG)."""
    image = png if png is not None else plot_png(report)
    context = [
        ("dataset", f"{report.dataset} ({report.dataset_path}), split {report.split}"),
        ("corpus", f"{report.corpus_docs} documents → {report.chunks} chunks"),
        ("queries", ", ".join(f"{k}: {v}" for k, v in report.slice_counts.items())),
        ("slice rule", report.slice_rule),
        ("embedder", report.embedder or "none (lexical only)"),
        ("depth", f"{report.depth} documents per query"),
        ("metrics", report.metric_provider),
        ("embedding cache", ", ".join(f"{k}: {v}" for k, v in report.cache.items()) or "not used"),
        ("machine", ", ".join(f"{k}: {v}" for k, v in report.machine.items())),
        ("date", report.date),
    ]
    comparisons = [
        (f"{c.strategy} vs {c.baseline}", c.better, c.worse, c.tied, f"{c.mean_delta:+.4f}")
        for c in report.comparisons
    ]
    encoded = base64.b64encode(image).decode("ascii")
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>plait eval — {html.escape(report.dataset)}</title>",
        _STYLE,
        "</head><body>",
        f"<h1>plait retrieval quality — {html.escape(report.dataset)}</h1>",
        _table([], context),
        "<h2>Strategies per slice</h2>",
        _table(_header(report.depth), _rows(report)),
        f"<img alt='metrics per strategy and slice' src='data:image/png;base64,{encoded}'>",
    ]
    if comparisons:
        parts += [
            "<h2>Per query, nDCG@10</h2>",
            _table(["comparison", "better", "worse", "tied", "mean Δ"], comparisons),
        ]
    parts.append("</body></html>")
    return "".join(parts)


def check_report_path(path: str | Path) -> Path:
    """``path`` if a report can be written there (its missing parents made then), else a
    :class:`~plait.errors.ConfigError`: checked before an evaluation, not after it."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"--report {target} is a folder; give a file name, e.g. {target / 'report.html'}")
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"--report {target}: cannot write in {ancestor}")
    return target


def write_html(report: EvalReport, path: str | Path) -> Path:
    """Write :func:`render_html` to ``path`` (parents created) and return the path;
    :class:`~plait.errors.ConfigError` when it cannot be written."""
    target = check_report_path(path)
    page = render_html(report)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--report {target}: {exc.strerror or exc}") from None
    return target
