"""Policies live in the service, not in one adapter (issue 19): one engine runs one
reindex at a time, whichever interface asks (the lock used to be HTTP's only)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from plait.embeddings.base import TextKind
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait


class SlowEmbedder(FakeEmbedder):
    """Records how many embedding calls overlap."""

    def __init__(self) -> None:
        super().__init__(dimension=16)
        self.active = 0
        self.most = 0
        self._lock = threading.Lock()

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        with self._lock:
            self.active += 1
            self.most = max(self.most, self.active)
        time.sleep(0.05)
        try:
            return super()._embed_batch(texts, kind)
        finally:
            with self._lock:
                self.active -= 1


def test_one_reindex_at_a_time_per_engine(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(4):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nrefund policy number {i}\n", encoding="utf-8")
    embedder = SlowEmbedder()
    with Plait(str(tmp_path / "p.db"), embedder=embedder) as engine:
        engine.index(folder)
        embedder.most = 0
        reports = []
        threads = [
            threading.Thread(target=lambda: reports.append(engine.reindex(full=True))) for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(reports) == 3 and all(r.complete for r in reports)
    assert all(r.embedding.embedded == 4 for r in reports)
    assert embedder.most == 1  # never two reindexes embedding at once
