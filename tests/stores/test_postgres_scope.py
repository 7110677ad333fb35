"""The PostgreSQL store's search scopes: per thread, per collection, gone with the block
(so nothing one search read is used by a later one)."""

from __future__ import annotations

import threading

from plait.stores.postgres_scope import SearchScopes


def test_a_scope_lives_for_its_block_in_its_thread_only() -> None:
    scopes = SearchScopes()
    assert scopes.get("c") is None
    with scopes.scope("c"):
        seen = scopes.get("c")
        assert seen is not None and seen.key is None  # nothing read yet
        seen.saw(7, 16, (3, 1), 40)
        assert scopes.get("other") is None
        elsewhere: list[object] = []
        worker = threading.Thread(target=lambda: elsewhere.append(scopes.get("c")))
        worker.start()
        worker.join()
        assert elsewhere == [None]  # another thread (another HTTP request) has none
        with scopes.scope("c"):  # a nested search starts afresh
            inner = scopes.get("c")
            assert inner is not None and inner.key is None
        assert scopes.get("c") is seen and seen.key == (3, 1)
    assert scopes.get("c") is None  # the next search reads the key again
