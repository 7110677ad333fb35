"""A bundled model loads before the query deadline starts (:func:`plait.embeddings.base.load_local`).

Before, a process's first search loaded the model inside the deadline thread: on a busy
2-core machine e5 took 3.7 s to load, and with other work running `plait search` went
lexical only ("query embedding took longer than the 5 s deadline") in 5 of 6 runs, one of
which then aborted at exit (rc 134) with the load still running in that thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from plait.embeddings.base import TextKind, load_local
from plait.embeddings.cache import CachedEmbedder
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents


class _SlowLoading(FakeEmbedder):
    """A local model whose first use loads it for ``seconds`` (lazily, as the bundled ones)."""

    provider = "local"

    def __init__(self, seconds: float) -> None:
        super().__init__(dimension=32)
        self.seconds = seconds
        self.loaded = False
        self.loaded_on: list[str] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            if not self.loaded:
                time.sleep(self.seconds)
                self.loaded = True
                self.loaded_on.append(threading.current_thread().name)

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        self.load()
        return super()._embed_batch(texts, kind)


def test_the_first_search_of_a_process_waits_for_the_model_not_the_deadline(tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    with Plait(store, embedder=_SlowLoading(seconds=0.0)) as engine:  # same provider and model
        engine.index_documents(documents(ARTICLE_DOCS))
    slow = _SlowLoading(seconds=0.6)
    with Plait(store, embedder=slow, query_deadline=0.3) as engine:  # a new process: model not loaded
        result = engine.search("why was my card declined", k=3)
    assert result.vector_available
    assert slow.loaded_on == [threading.current_thread().name]  # on the caller's thread, not the deadline's
    assert result.hits and result.hits[0].ranks.dense is not None


def test_load_local_follows_a_cache_wrapper_and_leaves_other_providers_alone(tmp_path: Path) -> None:
    slow = _SlowLoading(seconds=0.0)
    load_local(CachedEmbedder(slow, path=str(tmp_path / "c.sqlite")))
    assert slow.loaded
    remote = FakeEmbedder()  # provider "fake": nothing to load
    load_local(remote)
    assert remote.calls == 0


_SEARCH = """
import json, sys
from plait.service import Plait
with Plait(sys.argv[1], embedder="e5", query_deadline=float(sys.argv[2])) as engine:
    result = engine.search("why was my card declined", k=3)
print(json.dumps({"vector": result.vector_available, "dense": [h.ranks.dense for h in result.hits]}))
"""


def test_a_new_process_searching_with_e5_gets_the_dense_arm_under_a_short_deadline(tmp_path: Path) -> None:
    """The real bundled model in a fresh interpreter (its load is always well over 0.25 s:
    1–4 s measured on the project's machine); the query itself takes ~12 ms."""
    store = str(tmp_path / "e5.db")
    with Plait(store, embedder="e5") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _SEARCH, store, "0.25"], capture_output=True, text=True, timeout=120, env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["vector"] is True
    assert any(rank is not None for rank in answer["dense"])
