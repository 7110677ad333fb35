"""A fake embedder with a remote provider's latency on query embeddings (shared by the
PostgreSQL tests of the statement sent ahead and of closing a store)."""

from __future__ import annotations

import time
from typing import Any

from plait.embeddings.fake import FakeEmbedder


class SlowQueries(FakeEmbedder):
    """A remote provider's latency on query embeddings (``delay`` seconds): a search's
    statement sent ahead is in flight meanwhile."""

    delay = 0.0

    def embed_query(self, text: str) -> Any:
        time.sleep(self.delay)
        return super().embed_query(text)
