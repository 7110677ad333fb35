"""One rule for collection names (``plait.collection_names``), applied when a collection is
created or a key names one — never to using a collection that exists.

A user walk-through found: ``plait index docs -c " docs "`` made a collection apart from
``docs``; a collection named ``[/red]`` ended ``plait collections``, ``keys create``, ``keys
list``, ``coverage`` and the index report with rich's ``MarkupError``; ``keys create -c ""``
made a key for ``default``; ``keys create -c dcos`` (a typo) made a key for a collection
that does not exist.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.api.keys import KeyStore
from plait.cli import app
from plait.collection_names import check_key_collection, name_problem
from plait.embeddings.fake import FakeEmbedder
from plait.errors import NotFoundError, ValidationError
from plait.service import Plait
from plait.stores import open_store
from plait.testing.corpus import documents

runner = CliRunner()

NO_SUCH_KEY_COLLECTION = (
    "error: collection 'dcos' does not exist (the store's collections: 'docs'); index it first, "
    "or make the key for '*' (every collection)\n"
)


@pytest.fixture(autouse=True)
def _no_collection_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_COLLECTION", "PLAIT_STORE", "PLAIT_KEYS", "PLAIT_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nHow to rotate the signing key.\n", encoding="utf-8")
    return docs


def _invoke(args: list[str]) -> tuple[int, str, str]:
    result = runner.invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "a collection name cannot be empty"),
        (" ", "a collection name cannot be blank (' ')"),
        (" docs ", "collection name ' docs ' has leading or trailing whitespace: use 'docs'"),
        ("docs\n", "collection name 'docs\\n' holds a control character (U+000A)"),
        ("a\x1b[31mb", "collection name 'a\\x1b[31mb' holds a control character (U+001B)"),
        ("a\u2028b", "collection name 'a\\u2028b' holds a control character (U+2028)"),
        ("x" * 129, "a collection name is at most 128 characters; this one has 129"),
        ("*", "'*' cannot name a collection: it means every collection (an API key for all of them)"),
        ("[/red]", None),
        ("my docs", None),
        ("docs-v2.1_eu", None),
        ("文書", None),
        ("x" * 128, None),
    ],
)
def test_the_rule(name: str, problem: str | None) -> None:
    assert name_problem(name) == problem


def test_index_refuses_a_name_with_surrounding_whitespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, store = _docs(tmp_path), tmp_path / "p.db"
    common = [str(docs), "--store", str(store), "--embedder", "fake"]
    code, out, err = _invoke(["index", *common, "-c", " docs "])
    assert (code, out, err) == (1, "", "error: collection name ' docs ' has leading or trailing whitespace: use 'docs'\n")
    assert not store.exists()  # the failed first command left no store behind
    monkeypatch.setenv("PLAIT_COLLECTION", "docs ")
    code, _, err = _invoke(["index", *common])
    assert (code, err) == (1, "error: collection name 'docs ' has leading or trailing whitespace: use 'docs'\n")
    monkeypatch.delenv("PLAIT_COLLECTION")
    assert _invoke(["index", *common, "-c", "docs"])[0] == 0
    code, out, _ = _invoke(["collections", "--store", str(store), "--json"])
    assert code == 0 and [c["name"] for c in json.loads(out)] == ["docs"]


def test_an_explicit_empty_collection_is_an_error_not_the_default(tmp_path: Path) -> None:
    docs, store = _docs(tmp_path), str(tmp_path / "p.db")
    empty = "error: the collection name is empty: name one, or leave it out for 'default'\n"
    assert _invoke(["index", str(docs), "--store", store, "--embedder", "fake", "-c", ""]) == (1, "", empty)
    assert _invoke(["index", str(docs), "--store", store, "--embedder", "fake"])[0] == 0  # into 'default'
    assert _invoke(["search", "signing key", "--store", store, "-c", ""]) == (1, "", empty)
    assert _invoke(["keys", "create", "--store", store, "-c", ""]) == (1, "", empty)
    code, out, _ = _invoke(["keys", "list", "--store", store, "--json"])
    assert (code, json.loads(out)) == (0, [])  # no key was made for 'default'


def test_names_with_markup_print_as_written(tmp_path: Path) -> None:
    """Each of these ended with a MarkupError traceback (``[/red]`` closes a tag no one opened)."""
    docs, store = _docs(tmp_path), str(tmp_path / "p.db")
    common = ["--store", store, "-c", "[/red]"]
    code, out, err = _invoke(["index", str(docs), *common, "--embedder", "fake"])
    assert code == 0, err
    assert out.splitlines()[0] == "[/red]: 1/1 sources indexed · chunks +1 ~0 =0 -0"

    code, out, err = _invoke(["collections", "--store", store])
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if "fake/" in line]
    assert row.split("│")[1].strip() == "[/red]"

    code, out, err = _invoke(["coverage", *common])
    assert code == 0, err
    assert out.splitlines()[0].strip() == "coverage of [/red]"

    code, out, err = _invoke(["keys", "create", *common])
    assert code == 0, err
    assert out.splitlines()[0] == "key 1: reader on '[/red]'"

    code, out, err = _invoke(["keys", "list", "--store", store])
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if "reader" in line]
    assert [cell.strip() for cell in row.split("│")[1:4]] == ["1", "reader", "[/red]"]

    code, out, err = _invoke(["usage", *common])
    assert code == 0, err
    assert "[/red]" in out

    code, out, err = _invoke(["delete-collection", "[/red]", "--yes", "--store", store])
    assert (code, err) == (0, "")
    assert out == "deleted collection [/red] (1 chunks, 1 sources, 1 API key(s) revoked)\n"


def test_a_key_names_an_existing_collection_or_all(tmp_path: Path) -> None:
    docs, store = _docs(tmp_path), str(tmp_path / "p.db")
    assert _invoke(["index", str(docs), "--store", store, "--embedder", "fake", "-c", "docs"])[0] == 0

    assert _invoke(["keys", "create", "--store", store, "-c", "dcos"]) == (1, "", NO_SUCH_KEY_COLLECTION)
    key_file = str(tmp_path / "keys.db")  # a stand-alone key file: the store's collections still count
    assert _invoke(["keys", "create", "--store", store, "--keys", key_file, "-c", "dcos"]) == (
        1, "", NO_SUCH_KEY_COLLECTION
    )
    assert not Path(key_file).exists()
    code, out, _ = _invoke(["keys", "list", "--store", store, "--json"])
    assert (code, json.loads(out)) == (0, [])

    assert _invoke(["keys", "create", "--store", store, "-c", "docs"])[0] == 0
    assert _invoke(["keys", "create", "--store", store, "-c", "*"])[0] == 0
    code, out, _ = _invoke(["keys", "list", "--store", store, "--json"])
    assert [k["collection"] for k in json.loads(out)] == ["docs", "*"]

    missing = tmp_path / "none.db"  # a store that does not exist: nothing to name, and none is made
    assert _invoke(["keys", "create", "--store", str(missing), "-c", "docs"]) == (
        1, "", "error: collection 'docs' does not exist (the store has no collection yet); index it first, "
        "or make the key for '*' (every collection)\n",
    )
    assert not missing.exists()


def test_the_key_store_applies_the_rule(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.db")
    try:
        with pytest.raises(ValidationError, match=r"^collection name ' docs ' has leading or trailing whitespace"):
            keys.create(role="reader", collection=" docs ")
        with pytest.raises(NotFoundError, match=r"^collection 'dcos' does not exist \(the store's collections: "):
            keys.create(role="reader", collection="dcos", collections=["docs", "kb"])
        assert keys.list_keys() == []
        # a collection made before the rule may be named when the store holds it
        key, _ = keys.create(role="reader", collection=" old ", collections=[" old "])
        assert key.collection == " old "
    finally:
        keys.close()
    check_key_collection("*", [])  # every collection, even of an empty store


def test_a_collection_named_before_the_rule_stays_usable(tmp_path: Path) -> None:
    """Not locked out: a collection an older plait made under a name the rule refuses can
    still be indexed into, searched, given a key and deleted."""
    store_path = str(tmp_path / "p.db")
    store = open_store(store_path)
    store.ensure_collection(" old ")  # as plait did before the rule
    store.close()
    with Plait(store_path, embedder=FakeEmbedder(dimension=64)) as engine:
        report = engine.index_documents(documents({"kb-1": "Rotate the signing key monthly."}), collection=" old ")
        assert report.chunks_added == 1
        with pytest.raises(ValidationError, match=r"^collection name ' new ' has leading or trailing whitespace"):
            engine.index_documents(documents({"kb-2": "Other."}), collection=" new ")
    common = ["--store", store_path, "-c", " old "]
    code, out, err = _invoke(["search", "signing key", *common, "--json"])
    assert code == 0, err
    assert [h["metadata"]["docId"] for h in json.loads(out)["hits"]] == ["kb-1"]
    assert _invoke(["keys", "create", *common, "--json"])[0] == 0
    code, out, err = _invoke(["delete-collection", " old ", "--yes", "--store", store_path])
    assert (code, err) == (0, "")
    assert out == "deleted collection  old  (1 chunks, 1 sources, 1 API key(s) revoked)\n"


def test_a_copy_or_import_under_a_new_name_follows_the_rule(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "a.db"), embedder=FakeEmbedder(dimension=64)) as engine:
        engine.index_documents(documents({"kb-1": "Rotate the signing key monthly."}), collection="docs")
        with pytest.raises(ValidationError, match=r"^collection name 'docs ' has leading or trailing whitespace"):
            engine.copy_collection(str(tmp_path / "b.db"), collection="docs", target_collection="docs ")
    archive = tmp_path / "docs.jsonl"
    assert _invoke(["export", "--store", str(tmp_path / "a.db"), "-c", "docs", "-o", str(archive)])[0] == 0
    code, out, err = _invoke(["import", str(archive), "--store", str(tmp_path / "c.db"), "-c", "*"])
    assert (code, out, err) == (
        1, "", "error: '*' cannot name a collection: it means every collection (an API key for all of them)\n"
    )
    code, _, err = _invoke(["import", str(archive), "--store", str(tmp_path / "c.db")])
    assert code == 0, err
