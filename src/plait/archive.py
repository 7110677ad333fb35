"""Export / import a collection as a versioned JSONL archive (issue 27 item 2).

Format ``plait-collection`` version 2, one JSON object per line, UTF-8, optionally
zstd-compressed (a file name ending in ``.zst``)::

    {"format": "plait-collection", "version": 2, "collection": "kb",
     "embedder": {"provider": "fake", "model": "hash-16", "dimension": 16},
     "counts": {"sources": 5, "chunks": 5, "vectors": 5, "runs": 1, "cards": 1, "keys": 2, "usage": 3},
     "settings": {...}, "scopes": [{"scope": "docs", "lastIndexedAt": "..."}], "exportedAt": "..."}
    {"type": "chunk", "sourceId": "a.md", "scope": "docs", "root": "", "chunk": {...}, "vector": "<base64>"}
    ...
    {"type": "run", "row": [...]}  {"type": "card", "row": [...]}  {"type": "key", "row": [...]}
    {"type": "usage", "row": {"bucket": "2026-12-01T13:00:00Z", "kind": "embedding", ...}}

Line 1 is the header; each chunk line holds the chunk as the API shows it (camelCase)
and its vector as base64 of little-endian float32 (``null`` when it has none). A
source's chunks are consecutive. Run, card and key lines hold table rows in the column
order of :mod:`plait.stores.records_import` (keys carry only token hashes, never tokens).
Usage lines (version 2) hold the collection's usage-metering rows
(:class:`~plait.usage.UsageRow`, camelCase), the history ``plait usage`` reports.
Version 1 (no usage lines, no ``usage`` count) is still read.

Import reads the file twice: first it validates the header and every line (JSON, the
line's type, the chunk model, the vector's length against the header's dimension, the
counts against the header) and names the first bad line by its number, writing nothing;
then it writes each source atomically. Should the write itself fail, the collection it
created is deleted again, so nothing half-written remains.

Export embeds nothing either: an embedder named for it (``plait export --embedder``,
``export_collection(embedder=NAME)``) must be the model of the collection's vectors, else
it is refused before the file is opened; a collection never embedded takes it as its
recorded embedder (the archive's ``settings.embedder``), which an import then uses.

Import embeds nothing: the vectors are the archive's. An embedder named on import (``plait
import --embedder``) must therefore be the model they come from — the header's provider,
model and dimension — else it is refused before anything is written (a collection's
vectors come from one model). An archive with no model (a collection never embedded)
takes it as its collection's embedder, as a first index would record it; its chunks wait
for their vectors as after ``plait index --detach``.
"""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError as PydanticValidationError

from plait.analysis import analyse
from plait.carried_model import VectorModel, carried_embedder, collection_embedder
from plait.collection_names import check_new_collection
from plait.collection_settings import portable_settings, restore_settings, write_settings
from plait.copying import read_source
from plait.errors import ConflictError, NotFoundError, PlaitError, ValidationError
from plait.fields import lexical_text
from plait.refinery.store import RefineryStore
from plait.stores.base import Store, StoredChunk
from plait.stores.records_import import collection_records, write_records
from plait.types import Chunk, Model, to_json
from plait.usage import UsageRow

if TYPE_CHECKING:
    from plait.embeddings.base import Embedder

__all__ = ["FORMAT", "VERSION", "ArchiveReport", "export_collection", "import_collection"]

FORMAT = "plait-collection"
VERSION = 2
#: Versions this plait imports (1: before usage rows travelled).
READABLE = (1, 2)
_ROW_TYPES = {"run": "runs", "card": "cards", "key": "keys"}


class ArchiveReport(Model):
    """What an export or import wrote."""

    collection: str
    path: str
    sources: int
    chunks: int
    vectors: int
    runs: int
    cards: int
    keys: int
    usage: int = 0
    """Usage-metering rows (``plait usage``) written or read."""


@contextmanager
def _open(path: Path, mode: str, *, zstd: bool | None = None) -> Iterator[IO[str]]:
    """A text stream on ``path``, through zstd when ``zstd`` (by default: when its name
    ends in ``.zst``)."""
    if not (path.suffix == ".zst" if zstd is None else zstd):
        with path.open(mode + "t", encoding="utf-8", newline="\n") as handle:
            yield handle
        return
    import zstandard

    with path.open(mode + "b") as raw:
        if mode == "w":
            with zstandard.ZstdCompressor(level=3).stream_writer(raw) as packed:
                text = io.TextIOWrapper(packed, encoding="utf-8", newline="\n")
                yield text
                text.flush()
                text.detach()
        else:
            with zstandard.ZstdDecompressor().stream_reader(raw) as packed:
                yield io.TextIOWrapper(packed, encoding="utf-8", newline="\n")


def _vector_text(vector: np.ndarray | None) -> str | None:
    if vector is None:
        return None
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def export_collection(
    store: Store,
    collection: str,
    path: str | Path,
    *,
    overwrite: bool = False,
    embedder: str | None = None,
    embedder_is_default: bool = False,
) -> ArchiveReport:
    """Write ``collection`` to an archive at ``path`` (``.zst``: zstd-compressed); an
    existing file there is replaced only with ``overwrite``.

    ``embedder`` (a name, as ``--embedder``) must be the model of the collection's vectors
    (:class:`~plait.errors.ModelMismatchError` otherwise, nothing written); a collection
    never embedded records it as its embedder in the archive (see the module docstring).
    ``embedder_is_default``: it is ``PLAIT_EMBEDDER``'s, not named for this export; another
    model is then left out (:mod:`plait.carried_model`)."""
    info = store.get_collection(collection)
    if info is None:
        raise NotFoundError(f"collection {collection!r} does not exist")
    settings = portable_settings(store, collection)
    if embedder is not None:
        record = collection_embedder(store, collection, embedder, action="an export", default=embedder_is_default)
        if record is not None:  # a collection never embedded
            settings = {**settings, "embedder": embedder.strip().lower()}
    target = Path(path)
    if target.is_dir():
        raise ValidationError(f"{target} is a folder: name the archive file (e.g. {target / (collection + '.jsonl.zst')})")
    if not target.parent.is_dir():
        raise ValidationError(f"{target.parent} does not exist: create the folder first")
    if target.exists() and not overwrite:
        raise ConflictError(f"{target} exists: pass --overwrite to replace it")
    sources = store.list_sources(collection)
    rows = collection_records(store.records(), collection)
    vectors = info.chunks - info.chunks_without_vector
    usage = store.usage(collection)
    counts = {
        "sources": len(sources), "chunks": info.chunks, "vectors": vectors,
        "runs": len(rows["runs"]), "cards": len(rows["cards"]), "keys": len(rows["keys"]), "usage": len(usage),
    }
    header = {
        "format": FORMAT,
        "version": VERSION,
        "collection": collection,
        "embedder": {"provider": info.embedder_provider, "model": info.embedder_model, "dimension": info.dimension},
        "counts": counts,
        "settings": settings,
        "scopes": [{"scope": s.scope, "lastIndexedAt": s.last_indexed_at} for s in store.scopes(collection)],
        "exportedAt": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    # written beside it and renamed when whole: a failure part-way leaves no half archive
    # under the name, and a file --overwrite was to replace stays as it was
    partial = target.with_name(target.name + ".partial")
    try:
        with _open(partial, "w", zstd=target.suffix == ".zst") as out:
            out.write(json.dumps(header, ensure_ascii=False) + "\n")
            for source in sources:
                for item in read_source(store, collection, source.source_id):
                    line = {
                        "type": "chunk", "sourceId": source.source_id, "scope": source.scope, "root": source.root,
                        "chunk": to_json(item.chunk), "vector": _vector_text(item.vector),
                    }
                    out.write(json.dumps(line, ensure_ascii=False) + "\n")
            for kind, table in _ROW_TYPES.items():
                for row in rows[table]:
                    out.write(json.dumps({"type": kind, "row": row}, ensure_ascii=False) + "\n")
            for metered in usage:
                out.write(json.dumps({"type": "usage", "row": to_json(metered)}, ensure_ascii=False) + "\n")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return ArchiveReport(collection=collection, path=str(target), **counts)


class _Bad(PlaitError):
    pass


def _header(text: str) -> dict[str, Any]:
    try:
        header = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Bad(f"not JSON ({exc.msg})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _Bad(f"not a {FORMAT} header")
    if header.get("version") not in READABLE:
        raise _Bad(
            f"format version {header.get('version')!r} is not supported "
            f"(this plait reads {' and '.join(str(v) for v in READABLE)})"
        )
    for key, kind in (("collection", str), ("embedder", dict), ("counts", dict), ("settings", dict), ("scopes", list)):
        if not isinstance(header.get(key), kind):
            raise _Bad(f"header field {key!r} is missing or not a {kind.__name__}")
    return header


def _chunk_line(data: dict[str, Any], dimension: int | None) -> tuple[str, str, str, Chunk, np.ndarray | None]:
    for key in ("sourceId", "scope", "root"):
        if not isinstance(data.get(key), str):
            raise _Bad(f"chunk line field {key!r} is missing or not a string")
    try:
        chunk = Chunk.model_validate(data.get("chunk"))
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        raise _Bad(f"invalid chunk: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    if chunk.source_id != data["sourceId"]:
        raise _Bad(f"chunk {chunk.id!r} belongs to source {chunk.source_id!r}, not {data['sourceId']!r}")
    vector = None
    if data.get("vector") is not None:
        try:
            vector = np.frombuffer(base64.b64decode(str(data["vector"]), validate=True), dtype="<f4").astype(np.float32)
        except (ValueError, TypeError):
            raise _Bad("vector is not base64 of float32 values") from None
        if dimension is None or vector.shape[0] != dimension:
            raise _Bad(f"vector has {vector.shape[0]} dimensions, the header says {dimension}")
    return data["sourceId"], data["scope"], data["root"], chunk, vector


def _usage_line(data: dict[str, Any]) -> UsageRow:
    try:
        return UsageRow.model_validate(data.get("row"))
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        raise _Bad(f"invalid usage row: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with _open(path, "r") as handle:
        yield from enumerate(handle, start=1)


def _read(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every line after the header, parsed, with its number (validation errors name it)."""
    for number, text in _lines(path):
        if number == 1:
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _Bad(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(data, dict) or data.get("type") not in ("chunk", "usage", *_ROW_TYPES):
            raise _Bad(f"line {number}: unknown line type {data.get('type') if isinstance(data, dict) else None!r}")
        yield number, data


def _zstd_problem(path: Path) -> str | None:
    """Why a ``.zst`` archive cannot be read whole — not zstd, corrupt, or cut before its
    frame ends (a truncated file otherwise reads as a shorter one) — else None."""
    import zstandard

    decompressor = zstandard.ZstdDecompressor().decompressobj()
    try:
        with path.open("rb") as raw:
            while block := raw.read(1 << 20):
                decompressor.decompress(block)
                if decompressor.eof:
                    break
    except zstandard.ZstdError as exc:
        return f"not a readable zstd archive ({exc})"
    except OSError as exc:
        return f"cannot read the archive: {exc}"
    return None if decompressor.eof else "the zstd stream ends before its frame does: the archive is truncated"


def _validate(path: Path) -> dict[str, Any]:
    if path.suffix == ".zst" and (problem := _zstd_problem(path)) is not None:
        raise ValidationError(f"{path}: {problem}")
    try:
        first = next(_lines(path), None)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"{path}: cannot read the archive: {exc}") from None
    if first is None:
        raise ValidationError(f"{path}: line 1: the archive is empty (no header)")
    try:
        header = _header(first[1])
    except _Bad as exc:
        raise ValidationError(f"{path}: line 1: {exc}") from None
    dimension = header["embedder"].get("dimension")
    seen = {"chunks": 0, "vectors": 0, "runs": 0, "cards": 0, "keys": 0, "usage": 0}
    sources: list[str] = []
    done: set[str] = set()
    number = 1
    try:
        for at, data in _read(path):
            number = at  # named by the error below
            if data["type"] == "chunk":
                source_id, _, _, _, vector = _chunk_line(data, dimension)
                if not sources or sources[-1] != source_id:
                    if source_id in done:
                        raise _Bad(f"the chunks of source {source_id!r} are not consecutive")
                    if sources:
                        done.add(sources[-1])
                    sources.append(source_id)
                seen["chunks"] += 1
                seen["vectors"] += vector is not None
            elif data["type"] == "usage":
                _usage_line(data)
                seen["usage"] += 1
            elif not isinstance(data.get("row"), list):
                raise _Bad(f"a {data['type']} line needs a 'row' list")
            else:
                seen[_ROW_TYPES[data["type"]]] += 1
    except _Bad as exc:
        text = str(exc)
        raise ValidationError(f"{path}: {text if text.startswith('line ') else f'line {number}: {text}'}") from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise ValidationError(f"{path}: cannot read the archive after line {number}: {exc}") from None
    seen["sources"] = len(sources)
    wanted = {k: header["counts"].get(k, 0 if k == "usage" and header["version"] == 1 else None) for k in seen}
    if wanted != seen:
        raise ValidationError(f"{path}: the header counts {wanted} but the file holds {seen} (truncated?)")
    return header


def _embedder_to_record(path: Path, header: dict[str, Any], name: str, *, default: bool) -> Embedder | None:
    """The embedder called ``name`` when it fits the archive (see the module docstring):
    None for the archive's own model (nothing to record), the embedder to record for an
    archive with no model. Raises :class:`ModelMismatchError` when it does not fit."""
    model = header["embedder"]
    carried = VectorModel(model.get("provider"), model.get("model"), model.get("dimension"), header["settings"].get("embedder"))
    return carried_embedder(
        name, carried, vectors=f"{path}: the archive's vectors", owner="the archive's", action="an import", default=default
    )


def import_collection(
    store: Store,
    path: str | Path,
    *,
    collection: str | None = None,
    replace: bool = False,
    embedder: str | None = None,
    embedder_is_default: bool = False,
) -> ArchiveReport:
    """Import an archive into ``store`` (as ``collection``, default the archive's name).

    ``embedder`` (a name, as ``--embedder``) must be the model of the archive's vectors
    (:class:`ModelMismatchError` otherwise, nothing written); an archive with no model
    records it as the collection's embedder (see the module docstring).
    ``embedder_is_default``: it is ``PLAIT_EMBEDDER``'s, not named for this import; another
    model is then left out (:mod:`plait.carried_model`)."""
    if collection is not None:  # a new name; the archive's own was accepted when it was made
        check_new_collection(store, collection)
    source = Path(path)
    header = _validate(source)
    record = None if embedder is None else _embedder_to_record(source, header, embedder, default=embedder_is_default)
    name = collection or header["collection"]
    existing = store.get_collection(name)
    if existing is not None and (existing.chunks or existing.sources) and not replace:
        raise ConflictError(
            f"collection {name!r} already holds {existing.chunks} chunks: pass --replace to overwrite it"
        )
    if existing is not None:
        store.delete_collection(name)
        RefineryStore(store.records()).delete_collection(name)
    try:
        counts = _write(store, source, header, name)
        if record is not None and embedder is not None:  # an archive with no model
            store.set_embedder(name, provider=record.provider, model=record.model, dimension=record.dimension)
            write_settings(store, name, embedder=embedder.strip().lower())
    except BaseException:
        store.delete_collection(name)  # nothing half-written remains
        RefineryStore(store.records()).delete_collection(name)
        raise
    return ArchiveReport(collection=name, path=str(source), **counts)


def _write(store: Store, path: Path, header: dict[str, Any], name: str) -> dict[str, int]:
    store.ensure_collection(name)
    model = header["embedder"]
    if model.get("model") is not None:
        store.set_embedder(name, provider=model.get("provider") or "", model=model["model"], dimension=model.get("dimension"))
    counts = {"sources": 0, "chunks": 0, "vectors": 0}
    rows: dict[str, list[list[Any]]] = {"runs": [], "cards": [], "keys": []}
    usage: list[UsageRow] = []
    batch: list[StoredChunk] = []
    current: tuple[str, str, str] | None = None

    def flush() -> None:
        if current is not None:
            store.replace_source(name, current[0], current[1], batch, root=current[2])
            counts["sources"] += 1

    for _, data in _read(path):
        if data["type"] == "usage":
            usage.append(_usage_line(data))
            continue
        if data["type"] != "chunk":
            rows[_ROW_TYPES[data["type"]]].append(data["row"])
            continue
        source_id, scope, root, chunk, vector = _chunk_line(data, model.get("dimension"))
        if current is None or current[0] != source_id:
            flush()
            batch, current = [], (source_id, scope, root)
        fields = analyse(lexical_text(chunk))
        batch.append(StoredChunk(chunk, list(fields.exact), list(fields.stems), vector))
        counts["chunks"] += 1
        counts["vectors"] += vector is not None
    flush()
    for scope in header["scopes"]:
        if scope.get("lastIndexedAt"):
            store.mark_scope_indexed(name, scope["scope"], scope["lastIndexedAt"])
    restore_settings(store, name, header["settings"])
    if name != header["collection"]:
        for table in ("runs", "cards"):
            for row in rows[table]:
                row[1] = name
        rows["keys"] = [[*r[:4], name if r[4] == header["collection"] else r[4], *r[5:]] for r in rows["keys"]]
    runs, cards, keys = write_records(store.records(), rows)
    store.add_usage(name, usage)  # a fresh collection: the rows as they were
    return {**counts, "runs": runs, "cards": cards, "keys": keys, "usage": len(usage)}
