"""Unit vectors at a given angle in the first plane: hand-made dense rankings for tests
(a smaller angle to the query's vector is a higher cosine)."""

from __future__ import annotations

import math

import numpy as np

DIM = 8


def angle(degrees: float, dim: int = DIM) -> list[float]:
    """``[cos θ, sin θ, 0, …]`` of length ``dim``."""
    r = math.radians(degrees)
    v = np.zeros(dim)
    v[0], v[1] = math.cos(r), math.sin(r)
    return list(v)
