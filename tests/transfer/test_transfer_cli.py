"""``plait copy / export / import / backup`` on the command line (thin adapters)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents

runner = CliRunner()


def test_copy_export_import_backup_commands(tmp_path: Path) -> None:
    source = str(tmp_path / "from.db")
    with Plait(source, embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
        engine.index_documents(documents({"z": "zebra crossing"}), collection="other")
    target = str(tmp_path / "to.db")
    done = runner.invoke(app, ["copy", "--from", source, "--to", target, "-c", "kb", "--json"])
    assert done.exit_code == 0, done.output
    [report] = json.loads(done.stdout)
    assert (report["collection"], report["chunksCopied"], report["verification"]["ok"]) == ("kb", 5, True)
    again = runner.invoke(app, ["copy", "--from", source, "--to", target, "-c", "kb"])
    assert again.exit_code == 1 and "already holds 5 chunks of 5 sources: pass --replace" in " ".join(again.output.split())
    everything = runner.invoke(app, ["copy", "--store", source, "--to", target, "--replace", "--json"])
    assert [r["collection"] for r in json.loads(everything.stdout)] == ["kb", "other"]
    archive = tmp_path / "kb.jsonl.zst"
    out = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(archive), "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["chunks"] == 5
    third = str(tmp_path / "third.db")
    back = runner.invoke(app, ["import", str(archive), "--store", third, "--json"])
    assert back.exit_code == 0 and json.loads(back.stdout)["vectors"] == 5
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "plait-collection", "version": 9}\n', encoding="utf-8")
    refused = runner.invoke(app, ["import", str(bad), "--store", third])
    assert refused.exit_code == 1 and "line 1: format version 9 is not supported" in " ".join(refused.output.split())
    snap = tmp_path / "snap.db"
    saved = runner.invoke(app, ["backup", "--store", source, "-o", str(snap), "--json"])
    assert saved.exit_code == 0 and json.loads(saved.stdout)["bytes"] == snap.stat().st_size
    with Plait(str(snap), embedder=FakeEmbedder(dimension=16)) as restored:
        assert [c.name for c in restored.collections()] == ["kb", "other"]


def test_copy_from_a_store_to_itself_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    """Review 1, finding 3: ``--replace`` deleted the collection, then copied nothing from it."""
    source = tmp_path / "kb.db"
    with Plait(str(source), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    same = str(tmp_path / "." / "kb.db")
    refused = runner.invoke(app, ["copy", "--from", str(source), "--to", same, "-c", "kb", "--replace"])
    assert refused.exit_code == 1
    assert "the source and the target are the same store" in " ".join(refused.output.split())
    with Plait(str(source), embedder=FakeEmbedder(dimension=16)) as engine:
        [kb] = engine.collections()
        assert (kb.name, kb.chunks, kb.sources) == ("kb", 5, 5)


def test_copy_as_another_name_within_one_store(tmp_path: Path) -> None:
    """``plait copy --as NAME``: the only way to copy within one store from the CLI."""
    store = str(tmp_path / "kb.db")
    with Plait(store, embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
        engine.index_documents(documents({"z": "zebra crossing"}), collection="other")
    done = runner.invoke(app, ["copy", "--store", store, "--to", store, "-c", "kb", "--as", "kb2", "--json"])
    assert done.exit_code == 0, done.output
    [report] = json.loads(done.stdout)
    assert (report["collection"], report["targetCollection"], report["chunksCopied"]) == ("kb", "kb2", 5)
    assert report["verification"]["ok"] is True
    human = runner.invoke(app, ["copy", "--store", store, "--to", store, "-c", "other", "--as", "other2"])
    assert human.exit_code == 0 and "other -> other2: 1 sources copied" in " ".join(human.output.split())
    with Plait(store, embedder=FakeEmbedder(dimension=16)) as engine:
        counts = {c.name: (c.chunks, c.sources) for c in engine.collections()}
    assert counts == {"kb": (5, 5), "kb2": (5, 5), "other": (1, 1), "other2": (1, 1)}
    for args in (["--as", "x"], ["-c", "kb", "-c", "other", "--as", "x"]):
        refused = runner.invoke(app, ["copy", "--store", store, "--to", store, *args])
        assert refused.exit_code == 1
        assert "--as NAME needs exactly one --collection" in refused.output
        assert len(refused.output.strip().splitlines()) == 1


def _kb(tmp_path: Path) -> str:
    source = str(tmp_path / "from.db")
    with Plait(source, embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    return source


def test_a_missing_source_store_is_an_error_and_creates_no_store(tmp_path: Path) -> None:
    """``plait copy --from nope.db`` exited 0 and left two empty stores; ``export --store
    nope.db`` created one. A copy that fails leaves no new, empty target store."""
    missing, target = str(tmp_path / "nope.db"), str(tmp_path / "to.db")
    done = runner.invoke(app, ["copy", "--from", missing, "--to", target])
    assert done.exit_code == 1 and "nope.db does not exist" in done.stderr, done.output
    out = runner.invoke(app, ["export", "--store", missing, "-c", "kb", "-o", str(tmp_path / "x.jsonl")])
    assert out.exit_code == 1 and "nope.db does not exist" in out.stderr
    source = _kb(tmp_path)
    wrong = runner.invoke(app, ["copy", "--from", source, "--to", target, "-c", "absent"])
    assert wrong.exit_code == 1 and "'absent' does not exist" in wrong.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["from.db"]


def test_unusable_archives_and_outputs_are_one_line_errors(tmp_path: Path) -> None:
    """A corrupt, mislabelled or truncated .zst archive, and an export into a missing
    folder or onto a folder, printed tracebacks (or "the archive is empty (no header)")."""
    source = _kb(tmp_path)
    archive = tmp_path / "kb.jsonl.zst"
    assert runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(archive)]).exit_code == 0
    data = archive.read_bytes()
    plain = tmp_path / "plain.jsonl"
    assert runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(plain)]).exit_code == 0
    cases = {
        "cut.jsonl.zst": (data[: len(data) // 2], "the archive is truncated"),
        "head.jsonl.zst": (data[:100], "the archive is truncated"),
        "mislabelled.jsonl.zst": (plain.read_bytes(), "not a readable zstd archive"),
    }
    for name, (content, needle) in cases.items():
        (tmp_path / name).write_bytes(content)
        done = runner.invoke(app, ["import", str(tmp_path / name), "--store", str(tmp_path / "in.db")])
        assert done.exit_code == 1 and needle in done.stderr, (name, done.output)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.output
    assert not (tmp_path / "in.db").exists()  # the failed imports left no store
    folder = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(tmp_path)])
    assert folder.exit_code == 1 and "is a folder" in folder.stderr, folder.output
    nowhere = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(tmp_path / "no" / "x.jsonl")])
    assert nowhere.exit_code == 1 and "does not exist: create the folder first" in nowhere.stderr


def test_export_and_backup_never_replace_a_file_unasked(tmp_path: Path) -> None:
    """``plait backup -o other.db`` replaced a store full of data without a word, and
    export any file; both now need ``--overwrite``."""
    source = _kb(tmp_path)
    other = str(tmp_path / "other.db")
    with Plait(other, embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents({"z": "zebra crossing"}), collection="zoo")
    refused = runner.invoke(app, ["backup", "--store", source, "-o", other])
    assert refused.exit_code == 1 and "other.db exists: pass --overwrite to replace it" in refused.stderr
    with Plait(other, embedder=FakeEmbedder(dimension=16)) as engine:
        assert [c.name for c in engine.collections()] == ["zoo"]  # untouched
    assert runner.invoke(app, ["backup", "--store", source, "-o", other, "--overwrite"]).exit_code == 0
    with Plait(other, embedder=FakeEmbedder(dimension=16)) as engine:
        assert [c.name for c in engine.collections()] == ["kb"]
    notes = tmp_path / "notes.jsonl"
    notes.write_text("my notes\n", encoding="utf-8")
    out = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(notes)])
    assert out.exit_code == 1 and "notes.jsonl exists: pass --overwrite" in out.stderr
    assert notes.read_text(encoding="utf-8") == "my notes\n"
    again = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(notes), "--overwrite", "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["chunks"] == 5


def test_import_embedder_must_be_the_archives_model(tmp_path: Path) -> None:
    """``plait import --embedder X`` was accepted and ignored: the archive's vectors went in
    whatever X was. An import embeds nothing, so X must be the vectors' model — another one
    (or none) is a one-line error that writes nothing; an archive with no vectors takes it as
    its collection's embedder."""
    source = str(tmp_path / "from.db")
    with Plait(source, embedder="fake") as engine:  # recorded as 'fake': fake/hash-64, 64-d
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    archive = tmp_path / "kb.jsonl"
    assert runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(archive)]).exit_code == 0
    target = tmp_path / "to.db"
    wrong = {
        "e5": "embedder 'e5' is local/multilingual-e5-small (384-d)",
        "none": "embedder 'none' is none (no vectors)",
    }
    for name, said in wrong.items():
        done = runner.invoke(app, ["import", str(archive), "--store", str(target), "--embedder", name])
        assert (done.exit_code, done.stderr) == (
            1,
            f"error: {archive}: the archive's vectors are from fake/hash-64 (64-d); {said}. A collection's vectors "
            "come from one model and an import embeds nothing: leave the embedder out, or name the archive's, 'fake'\n",
        ), done.output
    assert not target.exists()  # nothing written, no store left behind
    with Plait(str(target), embedder="fake") as engine:
        engine.index_documents(documents({"z": "zebra crossing"}), collection="kb")
    kept = runner.invoke(app, ["import", str(archive), "--store", str(target), "--embedder", "e5", "--replace"])
    assert kept.exit_code == 1 and "embedder 'e5' is local/" in kept.stderr
    with Plait(str(target), embedder="fake") as engine:  # --replace refused before it deleted anything
        assert [(c.name, c.chunks) for c in engine.collections()] == [("kb", 1)]
    same = runner.invoke(app, ["import", str(archive), "--store", str(target), "--embedder", "fake", "--replace", "--json"])
    assert same.exit_code == 0, same.output
    assert (json.loads(same.stdout)["chunks"], json.loads(same.stdout)["vectors"]) == (5, 5)
    # the model alone is not enough: fake/hash-64 vectors of 16 dimensions are not what 'fake' (64) makes
    (tmp_path / "small").mkdir()
    small = tmp_path / "small.jsonl"
    assert runner.invoke(app, ["export", "--store", _kb(tmp_path / "small"), "-c", "kb", "-o", str(small)]).exit_code == 0
    done = runner.invoke(app, ["import", str(small), "--store", str(tmp_path / "s.db"), "--embedder", "fake"])
    assert (done.exit_code, done.stderr) == (
        1,
        f"error: {small}: the archive's vectors are from fake/hash-64 (16-d); embedder 'fake' is fake/hash-64 "
        "(64-d). A collection's vectors come from one model and an import embeds nothing: leave the embedder out\n",
    )


def test_import_of_an_archive_without_vectors_records_the_embedder(tmp_path: Path) -> None:
    """A collection never embedded travels with no model: ``--embedder`` on its import is the
    collection's embedder from then on (as a first index records it), and a backfill embeds
    its chunks with it."""
    source = str(tmp_path / "from.db")
    with Plait(source, embedder="none") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    archive = tmp_path / "kb.jsonl"
    assert runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(archive)]).exit_code == 0
    plain = str(tmp_path / "plain.db")
    assert runner.invoke(app, ["import", str(archive), "--store", plain, "--embedder", "none"]).exit_code == 0
    [info] = json.loads(runner.invoke(app, ["collections", "--store", plain, "--json"]).stdout)
    assert (info["embedderProvider"], info["embedderModel"], info["chunksWithoutVector"]) == (None, None, 5)
    target = str(tmp_path / "to.db")
    done = runner.invoke(app, ["import", str(archive), "--store", target, "--embedder", "fake", "--json"])
    assert done.exit_code == 0, done.output
    assert (json.loads(done.stdout)["chunks"], json.loads(done.stdout)["vectors"]) == (5, 0)
    [info] = json.loads(runner.invoke(app, ["collections", "--store", target, "--json"]).stdout)
    assert (info["embedderProvider"], info["embedderModel"], info["dimension"]) == ("fake", "hash-64", 64)
    with Plait(target) as engine:  # no embedder named: the collection's recorded one
        assert engine.embedder_for("kb")[1] == "fake"
        report = engine.backfill(collection="kb")
        assert report.embedding.embedded == 5 and engine.vector_coverage("kb") == 1.0


def test_copy_embedder_must_be_the_collections_model(tmp_path: Path) -> None:
    """``plait copy --embedder X`` was accepted and ignored (``del embedder``): the vectors
    went over whatever X was. A copy embeds nothing, so X must be the model of every
    copied collection's vectors; another one is a one-line error before
    the target is opened — no store file left, no collection copied, a --replace target
    untouched. A matching one copies as before."""
    source = str(tmp_path / "from.db")
    with Plait(source, embedder="fake") as engine:  # recorded as 'fake': fake/hash-64, 64-d
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    with Plait(source, embedder=FakeEmbedder(dimension=16)) as engine:  # fake/hash-64 too, but 16-d
        engine.index_documents(documents({"z": "zebra crossing"}), collection="small")
    target = tmp_path / "to.db"
    done = runner.invoke(app, ["copy", "--from", source, "--to", str(target), "-c", "kb", "--embedder", "e5"])
    assert (done.exit_code, done.stderr) == (
        1,
        "error: the vectors of collection 'kb' are from fake/hash-64 (64-d); embedder 'e5' is "
        "local/multilingual-e5-small (384-d). A collection's vectors come from one model and a copy embeds "
        "nothing: leave the embedder out, or name the collection's, 'fake'\n",
    ), done.output
    # every collection is checked first: 'kb' fits, 'small' does not, and 'kb' is not copied either
    everything = runner.invoke(app, ["copy", "--from", source, "--to", str(target), "--embedder", "fake"])
    assert (everything.exit_code, everything.stderr) == (
        1,
        "error: the vectors of collection 'small' are from fake/hash-64 (16-d); embedder 'fake' is "
        "fake/hash-64 (64-d). A collection's vectors come from one model and a copy embeds nothing: leave "
        "the embedder out\n",
    ), everything.output
    assert not target.exists()  # nothing written, no store left behind
    with Plait(str(target), embedder="fake") as engine:
        engine.index_documents(documents({"z": "zebra crossing"}), collection="kb")
    kept = runner.invoke(app, ["copy", "--from", source, "--to", str(target), "-c", "kb", "--embedder", "e5", "--replace"])
    assert kept.exit_code == 1 and "embedder 'e5' is local/" in kept.stderr
    with Plait(str(target), embedder="fake") as engine:  # --replace refused before it deleted anything
        assert [(c.name, c.chunks) for c in engine.collections()] == [("kb", 1)]
    same = runner.invoke(
        app, ["copy", "--from", source, "--to", str(target), "-c", "kb", "--embedder", "fake", "--replace", "--json"]
    )
    assert same.exit_code == 0, same.output
    [report] = json.loads(same.stdout)
    assert (report["chunksCopied"], report["vectorsCopied"], report["verification"]["ok"]) == (5, 5, True)


def test_export_embedder_must_be_the_collections_model(tmp_path: Path) -> None:
    """``plait export --embedder X`` was accepted and ignored (``del embedder``): the archive
    carried the collection's vectors whatever X was. X must be their model; another one is a one-line error with no file written or replaced. A matching one
    exports as before; a collection never embedded takes X, and an import of its archive
    embeds with it."""
    source = str(tmp_path / "from.db")
    with Plait(source, embedder="fake") as engine:  # recorded as 'fake': fake/hash-64, 64-d
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    archive = tmp_path / "kb.jsonl.zst"
    done = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(archive), "--embedder", "e5"])
    assert (done.exit_code, done.stderr) == (
        1,
        "error: the vectors of collection 'kb' are from fake/hash-64 (64-d); embedder 'e5' is "
        "local/multilingual-e5-small (384-d). A collection's vectors come from one model and an export embeds "
        "nothing: leave the embedder out, or name the collection's, 'fake'\n",
    ), done.output
    assert not archive.exists()  # no file left behind
    notes = tmp_path / "notes.jsonl"
    notes.write_text("my notes\n", encoding="utf-8")
    kept = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(notes), "--overwrite", "--embedder", "e5"])
    assert kept.exit_code == 1 and "embedder 'e5' is local/" in kept.stderr
    assert notes.read_text(encoding="utf-8") == "my notes\n"  # --overwrite refused before it replaced anything
    same = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(archive), "--embedder", "fake", "--json"])
    assert same.exit_code == 0, same.output
    assert (json.loads(same.stdout)["chunks"], json.loads(same.stdout)["vectors"]) == (5, 5)
    with Plait(source, embedder="none") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="plain")
    plain = tmp_path / "plain.jsonl"
    out = runner.invoke(app, ["export", "--store", source, "-c", "plain", "-o", str(plain), "--embedder", "fake"])
    assert out.exit_code == 0, out.output
    target = str(tmp_path / "to.db")
    assert runner.invoke(app, ["import", str(plain), "--store", target]).exit_code == 0
    with Plait(target) as engine:  # no embedder named: the one the archive recorded
        assert engine.embedder_for("plain")[1] == "fake"
        report = engine.backfill(collection="plain")
        assert report.embedding.embedded == 5 and engine.vector_coverage("plain") == 1.0


def test_backup_refuses_collection_and_embedder_flags_not_their_env(tmp_path: Path) -> None:
    """``plait backup -c kb --embedder e5`` backed up the whole store, flags dropped
    (``del collection, embedder``). A given flag is now a one-line error, nothing written;
    PLAIT_COLLECTION and PLAIT_EMBEDDER, defaults for every command, are not refused."""
    source = _kb(tmp_path)
    with Plait(source, embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents({"z": "zebra crossing"}), collection="other")
    snap = tmp_path / "snap.db"
    tail = (
        "not apply to plait backup: a backup copies the whole store as it is, every collection with its vectors, "
        "and embeds nothing; leave {} out (plait export -c NAME writes one collection)\n"
    )
    cases = {
        ("-c", "kb"): "error: --collection 'kb' does " + tail.format("it"),
        ("--embedder", "e5"): "error: --embedder 'e5' does " + tail.format("it"),
        ("--collection", "kb", "--embedder", "fake"): "error: --collection 'kb' and --embedder 'fake' do "
        + tail.format("them"),
        ("-c", ""): "error: --collection '' does " + tail.format("it"),  # given, if empty: not ignored (review)
    }
    for flags, said in cases.items():
        done = runner.invoke(app, ["backup", "--store", source, "-o", str(snap), *flags])
        assert (done.exit_code, done.stderr) == (1, said), done.output
    assert not snap.exists()
    env = {"PLAIT_COLLECTION": "kb", "PLAIT_EMBEDDER": "e5"}
    done = runner.invoke(app, ["backup", "--store", source, "-o", str(snap), "--json"], env=env)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["bytes"] == snap.stat().st_size
    with Plait(str(snap), embedder=FakeEmbedder(dimension=16)) as restored:
        assert [(c.name, c.chunks) for c in restored.collections()] == [("kb", 5), ("other", 1)]


def test_plait_embedder_alone_does_not_refuse_another_model_s_vectors(tmp_path: Path) -> None:
    """Regression (stop 43's noticed list): ``PLAIT_EMBEDDER`` was checked as if named on
    the command, so a global ``PLAIT_EMBEDDER=e5`` (the model one indexes with) refused to
    copy, export or import a collection of fake/hash-64 vectors. Alone it only records the
    embedder of a collection never embedded; ``--embedder`` is still checked."""
    source = str(tmp_path / "from.db")
    with Plait(source, embedder="fake") as engine:  # fake/hash-64, 64-d
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    with Plait(source, embedder="none") as engine:  # never embedded
        engine.index_documents(documents({"z": "zebra crossing"}), collection="plain")
    env = {"PLAIT_EMBEDDER": "e5"}
    copied = runner.invoke(app, ["copy", "--from", source, "--to", str(tmp_path / "to.db"), "--json"], env=env)
    assert copied.exit_code == 0, copied.output
    assert [(r["collection"], r["vectorsCopied"], r["verification"]["ok"]) for r in json.loads(copied.stdout)] == [
        ("kb", 5, True), ("plain", 0, True)
    ]
    archive = tmp_path / "kb.jsonl"
    exported = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(archive), "--json"], env=env)
    assert exported.exit_code == 0, exported.output
    imported = runner.invoke(app, ["import", str(archive), "--store", str(tmp_path / "in.db"), "--json"], env=env)
    assert imported.exit_code == 0, imported.output
    for store in (tmp_path / "to.db", tmp_path / "in.db"):  # the vectors keep their own model
        infos = json.loads(runner.invoke(app, ["collections", "--store", str(store), "--json"]).stdout)
        kb = next(i for i in infos if i["name"] == "kb")
        assert (kb["embedderProvider"], kb["embedderModel"], kb["dimension"]) == ("fake", "hash-64", 64)
    [plain] = [i for i in json.loads(runner.invoke(app, ["collections", "--store", str(tmp_path / "to.db"), "--json"]).stdout)
               if i["name"] == "plain"]
    assert (plain["embedderProvider"], plain["embedderModel"]) == ("local", "multilingual-e5-small")  # recorded
    named = runner.invoke(app, ["copy", "--from", source, "--to", str(tmp_path / "x.db"), "-c", "kb", "--embedder", "e5"])
    assert named.exit_code == 1 and "embedder 'e5' is local/multilingual-e5-small (384-d)" in named.stderr


def test_copy_of_a_named_collection_the_source_lacks_copies_nothing(tmp_path: Path) -> None:
    """Regression (stop 43's noticed list): ``plait copy -c kb -c typo`` copied kb, then
    failed on typo, leaving half of what was asked done."""
    source = str(tmp_path / "from.db")
    with Plait(source, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    target = tmp_path / "to.db"
    done = runner.invoke(app, ["copy", "--from", source, "--to", str(target), "-c", "kb", "-c", "typo", "-c", "gone"])
    assert (done.exit_code, done.stderr) == (1, "error: collections 'typo', 'gone' do not exist in the source store; nothing copied\n")
    assert not target.exists()
    twice = runner.invoke(app, ["copy", "--from", source, "--to", str(target), "-c", "kb", "-c", "kb", "--json"])
    assert twice.exit_code == 0, twice.output
    assert [r["collection"] for r in json.loads(twice.stdout)] == ["kb"]  # named twice, copied once


def test_the_python_copy_takes_an_embedder_as_the_cli_does(tmp_path: Path) -> None:
    """``Plait.copy_collection`` had no ``embedder``: a never-embedded collection could not
    be given its model on a copy from Python, as ``plait copy --embedder`` gives it."""
    with Plait(str(tmp_path / "from.db"), embedder="none") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="plain")
        report = engine.copy_collection(str(tmp_path / "to.db"), collection="plain", embedder="fake")
    assert report.verification is not None and report.verification.ok
    with Plait(str(tmp_path / "to.db")) as copied:
        assert copied.embedder_for("plain")[1] == "fake"


def test_the_python_copy_of_several_collections_checks_the_whole_request_first(tmp_path: Path) -> None:
    """Review finding (stop 44): the checks of a copy of several collections (each named one
    exists, each copied once, the embedder fits every one) lived in the CLI alone
    (plait.copy_plan now); Plait.copy_collections applies them before anything is written."""
    from plait.errors import ModelMismatchError, NotFoundError

    with Plait(str(tmp_path / "from.db"), embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
        engine.index_documents(documents({"z": "zebra crossing"}), collection="zoo")
        target = tmp_path / "to.db"
        with pytest.raises(NotFoundError, match="collection 'typo' does not exist in the source store; nothing copied"):
            engine.copy_collections(str(target), collections=["kb", "typo"])
        with pytest.raises(ModelMismatchError, match="embedder 'e5' is local/multilingual-e5-small"):
            engine.copy_collections(str(target), embedder="e5")
        assert not target.exists()
        reports = engine.copy_collections(str(target), collections=["zoo", "kb", "zoo"])
    assert [(r.collection, r.chunks_copied, r.verification is not None and r.verification.ok) for r in reports] == [
        ("zoo", 1, True), ("kb", 5, True)
    ]


def test_copy_export_import_print_markup_names_as_written_and_refuse_bad_names_first(tmp_path: Path) -> None:
    """Noticed by a helper (collection names, stop 44): copy, export and import printed a
    collection's name as rich markup ('[/red]' ended the command with a MarkupError after
    the work was done); 'copy --as "bad "' was refused only after the target store was
    opened (and created); 'export -c ""' exported the default collection."""
    source = str(tmp_path / "from.db")
    with Plait(source, embedder="fake") as engine:
        engine.index_documents(documents({"z": "zebra crossing"}), collection="[/red]")
    target = tmp_path / "to.db"
    copied = runner.invoke(app, ["copy", "--from", source, "--to", str(target)])
    assert copied.exit_code == 0, copied.output
    assert copied.stdout.startswith("[/red]: 1 sources copied")
    archive = tmp_path / "red.jsonl"
    exported = runner.invoke(app, ["export", "--store", source, "-c", "[/red]", "-o", str(archive)])
    assert exported.exit_code == 0 and exported.stdout.startswith("exported [/red]: 1 chunks"), exported.output
    imported = runner.invoke(app, ["import", str(archive), "--store", str(tmp_path / "in.db")])
    assert imported.exit_code == 0 and imported.stdout.startswith("imported [/red]: 1 sources"), imported.output
    other = tmp_path / "other.db"
    bad = runner.invoke(app, ["copy", "--from", source, "--to", str(other), "-c", "[/red]", "--as", "bad "])
    assert (bad.exit_code, bad.stderr) == (
        1, "error: collection name 'bad ' has leading or trailing whitespace: use 'bad'\n"
    )
    assert not other.exists()
    empty = runner.invoke(app, ["export", "--store", source, "-c", "", "-o", str(tmp_path / "e.jsonl")])
    assert empty.exit_code == 1 and "the collection name is empty" in empty.stderr
