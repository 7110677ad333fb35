"""Rerank with a sentence-transformers ``CrossEncoder`` that reads query and passage together.

The model comes from a local directory (one written by ``save_pretrained`` or a copy
of a Hugging Face model folder) or from an installed Python package that ships one
(a module with ``get_model_path()``, or whose own folder holds ``config.json``).
Nothing is ever downloaded: ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are set
before sentence-transformers is imported and the model is opened with
``local_files_only=True``.

Each candidate is scored against the query (cost grows linearly with the number of
candidates); the order is by descending score, ties keeping their fused order. A
missing model or missing dependencies raise :class:`~plait.errors.ConfigError`; a
failure while scoring falls back to the fused order with the reason.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from plait.errors import ConfigError, ProviderError
from plait.rerank.base import Candidate, RerankOutcome, fused_order

__all__ = ["CROSS_ENCODER_INSTALL_HINT", "CrossEncoderReranker", "resolve_model_path"]

CROSS_ENCODER_INSTALL_HINT = "pip install 'plait[rerank]' (torch and sentence-transformers)"

_PACKAGE_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _model_dir(path: Path, what: str) -> Path:
    if not (path / "config.json").is_file():
        raise ConfigError(f"{what} {path} has no config.json: it is not a saved model directory")
    return path


def resolve_model_path(model: str | Path) -> Path:
    """The directory holding the cross-encoder named by ``model`` (a path or a package).

    Raises :class:`~plait.errors.ConfigError` naming the value when it is neither a
    model directory nor an installed package that ships one.
    """
    text = str(model).strip()
    if not text:
        raise ConfigError("cross-encoder model is empty; give a model directory or a package name")
    path = Path(text).expanduser()
    if path.is_dir():
        return _model_dir(path, "cross-encoder directory")
    looks_like_package = set(text) <= _PACKAGE_NAME and not text.startswith((".", "-"))
    if looks_like_package:
        module_name = text.replace("-", "_")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            module = None
        if module is not None:
            getter = getattr(module, "get_model_path", None)
            if callable(getter):
                return _model_dir(Path(getter()), f"package {text!r} model path")
            location = getattr(module, "__file__", None)
            if location:
                return _model_dir(Path(location).parent, f"package {text!r} folder")
    raise ConfigError(
        f"cross-encoder model {text!r} is neither a directory with config.json nor an "
        "installed package that ships one; plait never downloads models: point it at a "
        "local model directory (e.g. one written by CrossEncoder(...).save_pretrained(DIR))"
    )


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


def _load(path: Path, *, device: str, max_length: int | None) -> Any:
    """Open the CrossEncoder at ``path`` offline."""
    # Set before sentence-transformers imports huggingface_hub, which reads them once.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as exc:
        raise ConfigError(
            f"the cross-encoder reranker needs sentence-transformers and torch "
            f"({exc.name or exc}): {CROSS_ENCODER_INSTALL_HINT}"
        ) from exc

    try:
        with _quiet_transformers():
            return CrossEncoder(
                str(path), device=device, max_length=max_length, local_files_only=True
            )
    except (OSError, ValueError, RuntimeError) as exc:
        raise ProviderError(f"could not load the cross-encoder at {path}: {exc}") from exc


class CrossEncoderReranker:
    """Scores every (query, candidate) pair with a cross-encoder; loads on first use.

    ``model`` is a directory or an installed package name (see the module docstring);
    ``max_length`` caps the word pieces per pair (None: the model's own limit).
    """

    name = "cross-encoder"

    def __init__(
        self,
        model: str | Path,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        max_length: int | None = 512,
    ) -> None:
        """Check that ``model`` resolves; the weights load on the first :meth:`rerank`."""
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size!r}")
        if max_length is not None and max_length < 8:
            raise ConfigError(f"max_length must be >= 8 or None, got {max_length!r}")
        self.path = resolve_model_path(model)
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(path={str(self.path)!r}, device={self.device!r})"

    def load(self) -> Any:
        """Load the model now (idempotent) and return it."""
        with self._lock:
            if self._model is None:
                self._model = _load(self.path, device=self.device, max_length=self.max_length)
            return self._model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """The model's relevance score of each text for ``query``."""
        if not texts:
            return []
        model = self.load()
        with self._lock:
            raw = model.predict(
                [(query, text) for text in texts],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        return [float(x) for x in list(raw)]

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> RerankOutcome:
        """Candidates by descending score (ties keep their fused order)."""
        if not candidates:
            return fused_order(candidates, "no candidates to rerank")
        self.load()  # a model that cannot be loaded is a configuration error: raise it
        try:
            scores = self.score(query, [text for _, text in candidates])
        except (RuntimeError, ValueError, TypeError) as exc:
            return fused_order(candidates, f"cross-encoder scoring failed ({type(exc).__name__}): {exc}")
        if len(scores) != len(candidates):
            return fused_order(
                candidates, f"cross-encoder returned {len(scores)} scores for {len(candidates)} pairs"
            )
        positions = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
        order = [candidates[i][0] for i in positions]
        return RerankOutcome(
            order=order,
            reranked=True,
            scores={candidates[i][0]: scores[i] for i in range(len(candidates))},
        )
