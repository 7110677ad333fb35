"""Padding token sequences into a batch, and mean pooling over the real tokens.

Shared by the two onnxruntime embedders (:mod:`plait.embeddings.e5_onnx` and
:class:`plait.embeddings.local.MiniLMEmbedder`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["mean_pool", "pad_batch"]


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, mask)``, both int64 ``[len(sequences), longest]``; padding at the end."""
    width = max(len(s) for s in sequences)
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = sequence
        mask[row, : len(sequence)] = 1
    return ids, mask


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """float32 ``[B, H]``: the mean of ``hidden[B, T, H]`` over the tokens where ``mask`` is 1."""
    weights = mask.astype(np.float32)[..., None]
    summed: np.ndarray = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
    pooled: np.ndarray = summed / weights.sum(axis=1)
    return pooled
