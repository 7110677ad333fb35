"""Small corpora for tests: the article's five documents (seeds/001, kb-101 … kb-105)."""

from __future__ import annotations

from collections.abc import Mapping

from plait.sources.base import SourceDocument, SourcePart
from plait.types import FileOrigin, Hit

__all__ = ["ARTICLE_DOCS", "doc_of", "documents"]

ARTICLE_DOCS: dict[str, str] = {
    "kb-101": "ERR-4012: checkout API rejects the cart when the session token expired.",
    "kb-102": "Payment timeouts: how to retry declined card transactions safely.",
    "kb-103": "ERR-4021: inventory service returns stale stock for SKU-88213-B.",
    "kb-104": "Why was my payment refused? Common reasons a card gets declined.",
    "kb-105": "Session management: refreshing expired tokens in the checkout flow.",
}


def documents(docs: Mapping[str, str], scope: str = "docs") -> list[SourceDocument]:
    """One single-part, plain-text document per (id, text); ``metadata.docId`` is the id."""
    return [
        SourceDocument(
            source_id=doc_id,
            scope=scope,
            parts=(SourcePart(text=text, origin=FileOrigin(source_path=f"{doc_id}.md", title=doc_id)),),
            metadata={"docId": doc_id},
        )
        for doc_id, text in docs.items()
    ]


def doc_of(hit: Hit) -> str:
    """The document id a hit came from."""
    return str(hit.metadata["docId"])
