"""Generic JSONL documents, the BEIR corpus format: ``{"_id", "title", "text", ...}``.

One document per line. ``_id`` (or ``id``) is required and becomes the source id;
``title`` and ``text`` are joined as the chunked text (the title as a heading when
present); other scalar fields are copied into the chunk metadata. Malformed lines (not
JSON, not an object, no id or text, a kept field holding a lone surrogate) are skipped
with their line number.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from plait._text import check_texts
from plait.errors import SourceError, ValidationError
from plait.sources.base import Scan, SourceDocument, SourcePart
from plait.types import FileOrigin, SkippedSource

__all__ = ["JsonlSource"]


def _invalid_text(kept: dict[str, object]) -> str | None:
    """Why a field the index keeps cannot be stored (a lone surrogate such as
    ``"\\ud800"``, which JSON allows and UTF-8 cannot hold), else None."""
    for key, value in kept.items():
        try:
            check_texts(key, "a field name")
            check_texts(value, repr(key))
        except ValidationError as exc:
            return str(exc)
    return None


@dataclass(frozen=True, kw_only=True)
class JsonlSource:
    """A ``.jsonl`` file of documents, all in one scope (default ``docs``)."""

    path: Path
    scope: str = "docs"

    def scan(self) -> Scan:
        if not self.path.is_file():
            raise SourceError(f"{self.path} is not a file")
        scan = Scan(documents=[])
        scan.documents = self._documents(scan)
        return scan

    def _documents(self, scan: Scan) -> Iterator[SourceDocument]:
        name = self.path.name
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                scan.seen += 1
                where = f"{name}:{number}"
                try:
                    # a byte-order mark opening the file is not part of its first record
                    record = json.loads(raw.decode("utf-8-sig" if number == 1 else "utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    scan.skipped.append(SkippedSource(path=where, reason=f"malformed line: {exc}"))
                    continue
                except RecursionError:
                    scan.skipped.append(
                        SkippedSource(path=where, reason="malformed line: JSON nested too deeply")
                    )
                    continue
                if not isinstance(record, dict):
                    scan.skipped.append(SkippedSource(path=where, reason="line is not a JSON object"))
                    continue
                doc_id = record.get("_id", record.get("id"))
                text = record.get("text")
                if doc_id is None or not isinstance(text, str):
                    scan.skipped.append(
                        SkippedSource(path=where, reason="missing '_id' or string 'text'")
                    )
                    continue
                title = record.get("title") or None
                body = f"{title}\n\n{text}" if title else text
                metadata = {
                    k: v
                    for k, v in record.items()
                    if k not in ("_id", "id", "text", "title")
                    and isinstance(v, str | int | float | bool)
                }
                id_key = "_id" if "_id" in record else "id"
                invalid = _invalid_text({id_key: doc_id, "title": title, "text": text, **metadata})
                if invalid is not None:
                    scan.skipped.append(SkippedSource(path=where, reason=f"malformed line: {invalid}"))
                    continue
                metadata["docId"] = str(doc_id)
                origin = FileOrigin(source_path=f"{name}#{doc_id}", title=title)
                yield SourceDocument(
                    source_id=str(doc_id),
                    scope=self.scope,
                    parts=(SourcePart(text=body, origin=origin, markdown=False),),
                    metadata=metadata,
                )
