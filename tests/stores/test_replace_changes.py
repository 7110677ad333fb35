"""replace_changes: the one rule by which SQLite, PostgreSQL and Milvus decide what
replacing a source's chunks adds, updates, keeps and deletes."""

from __future__ import annotations

from plait.stores.base import ReplaceCounts, replace_changes
from plait.testing.contract import make_chunk


def test_kept_replaced_added_and_gone_by_id_and_content_hash() -> None:
    # stored: a (same content), b (content changed), c (no longer in the source)
    existing = {"a": (1, "h-alpha"), "b": (2, "h-old beta"), "c": (3, "h-gamma")}
    chunks = [make_chunk("b", "beta"), make_chunk("a", "alpha"), make_chunk("d", "delta")]
    changes, gone, counts = replace_changes(existing, chunks, lambda row: row[1])
    assert [(c.item.chunk.id, c.kept, c.replaced) for c in changes] == [
        ("b", None, (2, "h-old beta")),
        ("a", (1, "h-alpha"), None),
        ("d", None, None),
    ]
    assert gone == [(3, "h-gamma")]
    assert counts == ReplaceCounts(added=1, updated=1, unchanged=1, deleted=1)
    # an empty source deletes everything it held
    assert replace_changes(existing, [], lambda row: row[1])[1:] == (
        [(1, "h-alpha"), (2, "h-old beta"), (3, "h-gamma")],
        ReplaceCounts(deleted=3),
    )
