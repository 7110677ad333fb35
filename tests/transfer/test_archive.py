"""Issue 27 item 2: export / import in the versioned JSONL format (optionally zstd)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from plait.api.keys import KeyStore
from plait.archive import export_collection, import_collection
from plait.copying import verify_copy
from plait.errors import ConflictError, ModelMismatchError, ValidationError
from plait.refinery.store import RefineryStore
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.types import to_json

from .conftest import StoreFactory
from .test_copy import USAGE, fill


@pytest.mark.parametrize(("name", "to_kind"), [("kb.jsonl", "sqlite"), ("kb.jsonl.zst", "postgres"), ("kb.jsonl", "milvus")])
def test_export_then_import_is_the_same_collection(make_store: StoreFactory, tmp_path: Path, name: str, to_kind: str) -> None:
    source, target = make_store("sqlite"), make_store(to_kind)
    token, everything = fill(source)
    path = tmp_path / name
    out = export_collection(source, "kb", path)
    n = len(ARTICLE_DOCS)
    assert (out.sources, out.chunks, out.vectors, out.runs, out.cards, out.keys, out.usage) == (n, n, n, 1, 1, 2, 2)
    if name.endswith(".zst"):
        assert path.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"  # the zstd frame magic
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        assert (header["format"], header["version"], header["embedder"]["dimension"]) == ("plait-collection", 2, 16)
        assert header["counts"] == {"sources": n, "chunks": n, "vectors": n, "runs": 1, "cards": 1, "keys": 2, "usage": 2}
        first = json.loads(lines[1])
        vector = np.frombuffer(base64.b64decode(first["vector"]), dtype="<f4")
        stored = source.vectors_by_hash("kb", [first["chunk"]["contentHash"]])[first["chunk"]["contentHash"]]
        assert np.allclose(vector, stored) and len(lines) == 1 + n + 4 + 2
        assert json.loads(lines[-1]) == {"type": "usage", "row": to_json(USAGE[1])}
    back = import_collection(target, path)
    assert (back.sources, back.chunks, back.vectors, back.runs, back.cards, back.keys, back.usage) == (n, n, n, 1, 1, 2, 2)
    assert target.usage("kb") == USAGE
    check = verify_copy(source, target, "kb")
    assert check.ok, check
    assert [c.question for c in RefineryStore(target.records()).list_cards("kb")] == ["What does ERR-4012 mean?"]
    assert KeyStore(target.records()).authenticate(token) is not None
    assert KeyStore(target.records()).authenticate(everything) is not None
    assert target.get_settings("kb") == source.get_settings("kb")
    with pytest.raises(ConflictError, match="already holds 5 chunks: pass --replace"):
        import_collection(target, path)
    assert import_collection(target, path, replace=True).chunks == n
    assert target.usage("kb") == USAGE  # replaced, not added up


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_a_bad_line_is_named_and_nothing_is_written(make_store: StoreFactory, tmp_path: Path) -> None:
    source, target = make_store("sqlite"), make_store("sqlite")
    fill(source)
    good = tmp_path / "good.jsonl"
    export_collection(source, "kb", good)
    lines = _lines(good)

    def broken(number: int, text: str) -> Path:
        path = tmp_path / f"bad{number}.jsonl"
        changed = list(lines)
        changed[number - 1] = text
        path.write_text("\n".join(changed) + "\n", encoding="utf-8")
        return path

    short = json.loads(lines[3])
    short["vector"] = base64.b64encode(np.zeros(3, dtype="<f4").tobytes()).decode()
    cases = [
        (broken(4, json.dumps(short)), "line 4: vector has 3 dimensions, the header says 16"),
        (broken(3, "{not json"), "line 3: not JSON"),
        (broken(5, json.dumps({"type": "chunk", "sourceId": "x", "scope": "docs", "root": "", "chunk": {"id": 1}})),
         "line 5: invalid chunk"),
        (broken(1, json.dumps({**json.loads(lines[0]), "version": 3})), "line 1: format version 3 is not supported"),
        (broken(len(lines), json.dumps({"type": "usage", "row": {"bucket": "x", "kind": "telepathy"}})),
         f"line {len(lines)}: invalid usage row: kind"),
        (broken(7, json.dumps({"type": "mystery"})), "line 7: unknown line type 'mystery'"),
    ]
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    cases.append((truncated, "the header counts"))
    for path, message in cases:
        with pytest.raises(ValidationError, match=message):
            import_collection(target, path)
        assert target.get_collection("kb") is None, message  # nothing half-written
    assert RefineryStore(target.records()).list_cards("kb") == [] and KeyStore(target.records()).list_keys() == []


def test_a_version_1_archive_still_imports(make_store: StoreFactory, tmp_path: Path) -> None:
    source, target = make_store("sqlite"), make_store("sqlite")
    fill(source)
    path = tmp_path / "kb.jsonl"
    export_collection(source, "kb", path)
    lines = _lines(path)
    header = json.loads(lines[0])
    del header["counts"]["usage"]
    old = tmp_path / "v1.jsonl"  # what plait wrote before usage rows travelled
    body = [line for line in lines[1:] if json.loads(line)["type"] != "usage"]
    old.write_text("\n".join([json.dumps({**header, "version": 1}), *body]) + "\n", encoding="utf-8")
    back = import_collection(target, old)
    assert (back.chunks, back.cards, back.keys, back.usage) == (len(ARTICLE_DOCS), 1, 2, 0)
    assert target.usage("kb") == [] and verify_copy(source, target, "kb").ok


def test_export_embedder_must_be_the_collections_model(make_store: StoreFactory, tmp_path: Path) -> None:
    """``export_collection(embedder=...)`` (``plait export --embedder``) was accepted and
    dropped: the archive carried the collection's vectors whatever it named. It must be their
    model; another one (or none) is refused before the file is opened. A collection never
    embedded takes it as its recorded embedder, in the archive only."""
    store = make_store("sqlite")
    Plait(store, embedder="fake").index_documents(documents(ARTICLE_DOCS), collection="kb")  # fake/hash-64, 64-d
    path = tmp_path / "kb.jsonl"
    path.write_text("my notes\n", encoding="utf-8")
    said = {"e5": "local/multilingual-e5-small (384-d)", "none": "none (no vectors)"}
    for name, model in said.items():
        with pytest.raises(ModelMismatchError) as refused:
            export_collection(store, "kb", path, overwrite=True, embedder=name)
        assert str(refused.value) == (
            f"the vectors of collection 'kb' are from fake/hash-64 (64-d); embedder {name!r} is {model}. A "
            "collection's vectors come from one model and an export embeds nothing: leave the embedder out, or "
            "name the collection's, 'fake'"
        )
    assert path.read_text(encoding="utf-8") == "my notes\n"  # refused before the file was opened
    report = export_collection(store, "kb", path, overwrite=True, embedder="fake")
    assert (report.chunks, report.vectors) == (5, 5)
    assert json.loads(_lines(path)[0])["settings"] == store.get_settings("kb")
    Plait(store, embedder="none").index_documents(documents({"z": "zebra crossing"}), collection="plain")
    for name, recorded in (("FAKE", "fake"), ("none", None)):
        plain = tmp_path / f"plain-{name}.jsonl"
        assert export_collection(store, "plain", plain, embedder=name).vectors == 0
        header = json.loads(_lines(plain)[0])
        assert header["embedder"] == {"provider": None, "model": None, "dimension": None}
        assert header["settings"].get("embedder") == recorded
    assert "embedder" not in store.get_settings("plain")  # the store is as it was


@pytest.mark.parametrize("name", ["kb.jsonl", "kb.jsonl.zst"])
def test_an_export_that_fails_part_way_leaves_the_old_archive(
    make_store: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """An export wrote straight into its file: one failing part-way (a store gone, a full
    disk) left a half archive under the name, and with ``overwrite`` the good archive it was
    to replace was already gone. It is written beside the name and renamed when whole."""
    import plait.archive as archive

    store = make_store("sqlite")
    Plait(store, embedder="fake").index_documents(documents(ARTICLE_DOCS), collection="kb")
    path = tmp_path / name
    export_collection(store, "kb", path)
    good = path.read_bytes()
    real = archive.read_source
    calls: list[str] = []

    def failing(store: object, collection: str, source_id: str):  # type: ignore[no-untyped-def]
        calls.append(source_id)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(store, collection, source_id)  # type: ignore[arg-type]

    monkeypatch.setattr(archive, "read_source", failing)
    with pytest.raises(OSError, match="No space left"):
        export_collection(store, "kb", path, overwrite=True)
    assert len(calls) == 2 and path.read_bytes() == good  # the old archive, whole
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("kb")) == [name]  # no partial file
    monkeypatch.setattr(archive, "read_source", real)
    assert export_collection(store, "kb", path, overwrite=True).chunks == 5
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("kb")) == [name]
