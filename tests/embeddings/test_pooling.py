"""Padding and mean pooling shared by the onnxruntime embedders."""

from __future__ import annotations

import numpy as np

from plait.embeddings.pooling import mean_pool, pad_batch


def test_pad_batch_pads_at_the_end_with_the_pad_id() -> None:
    ids, mask = pad_batch([[5, 6, 7], [8]], 1)
    assert ids.tolist() == [[5, 6, 7], [8, 1, 1]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert ids.dtype == mask.dtype == np.int64


def test_mean_pool_ignores_padding() -> None:
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    np.testing.assert_allclose(mean_pool(hidden, mask), [[2.0, 3.0]])
