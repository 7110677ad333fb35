"""The same-store guard on a Milvus server: its address normalised (scheme, case, default
port, trailing slash, database) and resolved, so ``localhost`` and ``127.0.0.1`` are one
server; when that cannot be decided, a ``--replace`` of the same collection is refused.

The server is a real one: milvus-lite's gRPC server (the one pymilvus starts for a
``.db`` path), started here on a TCP port of this machine and reached over
``http://``/``tcp://`` as any Milvus server is.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.copying import copy_collection, same_store
from plait.errors import ValidationError
from plait.store_identity import milvus_address, server_sameness, store_sameness
from plait.testing.contract import make_chunk


@pytest.mark.parametrize(
    ("uri", "want"),
    [
        ("http://localhost:19530", ("localhost", 19530, "default")),
        ("localhost:19530", ("localhost", 19530, "default")),
        ("tcp://localhost:19530", ("localhost", 19530, "default")),
        ("http://localhost", ("localhost", 19530, "default")),  # the default port
        ("http://LocalHost:19530/", ("localhost", 19530, "default")),  # case, trailing slash
        ("http://localhost.:19530//", ("localhost", 19530, "default")),  # a fully qualified name
        ("  http://localhost:19530  ", ("localhost", 19530, "default")),
        ("https://milvus.example.com", ("milvus.example.com", 443, "default")),  # https: 443
        ("https://milvus.example.com:19530/", ("milvus.example.com", 19530, "default")),
        ("http://localhost:19530/default", ("localhost", 19530, "default")),
        ("http://localhost:19530/team/", ("localhost", 19530, "team")),  # pymilvus's database
        ("http://[::1]:19530", ("::1", 19530, "default")),
        ("http://user:secret@127.0.0.1:19530", ("127.0.0.1", 19530, "default")),
    ],
)
def test_a_milvus_address_is_normalised(uri: str, want: tuple[str, int, str]) -> None:
    assert milvus_address(uri) == want


def _resolves(host: str) -> bool:
    try:
        return any(info[4][0] == "127.0.0.1" for info in socket.getaddrinfo(host, 19530))
    except OSError:
        return False


def test_server_sameness_resolves_names_and_is_unknown_when_it_cannot_tell() -> None:
    if not _resolves("localhost"):
        pytest.skip("localhost does not resolve to 127.0.0.1 here")
    same = [
        ("http://localhost:19530", "http://127.0.0.1:19530"),  # resolved: 127.0.0.1 in both
        ("localhost:19530", "http://127.0.0.1"),
        ("http://LOCALHOST:19530/", "tcp://127.0.0.1:19530/default"),
        ("http://127.0.0.1:19530", "http://127.0.0.1:19530"),
    ]
    for a, b in same:
        assert server_sameness(a, b) == server_sameness(b, a) == "same", (a, b)
    different = [
        ("http://localhost:19530", "http://127.0.0.1:19531"),  # another port
        ("http://localhost:19530/a", "http://127.0.0.1:19530/b"),  # another database
        ("https://localhost", "http://localhost"),  # 443 and 19530
        ("http://192.0.2.1:19530", "http://198.51.100.7:19530"),  # two addresses, neither this machine's
    ]
    for a, b in different:
        assert server_sameness(a, b) == server_sameness(b, a) == "different", (a, b)
    unknown = [
        ("http://127.0.0.1:19530", "http://127.0.0.2:19530"),  # two addresses of this machine
        ("http://localhost:19530", "http://no-such-host.invalid:19530"),  # does not resolve
    ]
    for a, b in unknown:
        assert server_sameness(a, b) == server_sameness(b, a) == "unknown", (a, b)


@pytest.fixture(scope="module")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A Milvus server (milvus-lite's) on every IPv4 address of this machine; its port."""
    pytest.importorskip("milvus_lite")
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    folder = tmp_path_factory.mktemp("milvus-server")
    server, db, port = start_server_in_thread(data_dir=str(folder / "data"), host="0.0.0.0", port=0)
    try:
        yield int(port)
    finally:
        server.stop(grace=0)
        db.close()


def _open(uri: str, tmp_path: Path, prefix: str) -> Any:
    from plait.stores.milvus import MilvusStore

    return MilvusStore(uri, prefix=prefix, records=tmp_path / f"{prefix}.records.sqlite")


def test_one_milvus_server_under_every_spelling_is_one_store_and_replace_is_refused(
    milvus_server: int, tmp_path: Path
) -> None:
    if not _resolves("localhost"):
        pytest.skip("localhost does not resolve to 127.0.0.1 here")
    port = milvus_server
    main = _open(f"http://127.0.0.1:{port}", tmp_path, "s")
    spellings = [f"http://localhost:{port}", f"tcp://localhost:{port}/", f"http://LOCALHOST:{port}/default"]
    twins = [_open(uri, tmp_path, "s") for uri in spellings]
    other_prefix = _open(f"http://localhost:{port}", tmp_path, "other")
    try:
        main.ensure_collection("kb")
        main.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
        for twin in twins:
            assert twin.uri != main.uri
            assert same_store(main, twin) and same_store(twin, main), twin.uri
            with pytest.raises(ValidationError, match="same store"):
                copy_collection(main, twin, "kb", replace=True)
            with pytest.raises(ValidationError, match="same store"):
                copy_collection(twin, main, "kb", replace=True)
        info = main.get_collection("kb")
        assert info is not None and info.chunks == 1  # nothing lost
        assert store_sameness(main, other_prefix) == "different"
    finally:
        for store in (main, *twins, other_prefix):
            store.close()


def test_when_it_cannot_tell_a_replace_of_the_same_collection_is_refused(
    milvus_server: int, tmp_path: Path
) -> None:
    """127.0.0.1 and 127.0.0.2 reach the one server (it listens on every address): the
    guard cannot tell, so a --replace of a collection both may hold is refused with a
    clear error; a target whose collection is seen to be another one (created at another
    time) or that has none is copied as before."""
    port = milvus_server
    first = _open(f"http://127.0.0.1:{port}", tmp_path, "u")
    second = _open(f"http://127.0.0.2:{port}", tmp_path, "u")
    try:
        assert store_sameness(first, second) == "unknown" and not same_store(first, second)
        first.ensure_collection("kb")
        first.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
        with pytest.raises(ValidationError, match="cannot tell whether the source and the target are one store"):
            copy_collection(first, second, "kb", replace=True)
        info = first.get_collection("kb")
        assert info is not None and info.chunks == 1 and info.sources == 1  # nothing lost
        # under another name nothing of the source is replaced: allowed
        report = copy_collection(first, second, "kb", target_name="kb-copy", replace=True)
        assert report.chunks_copied == 1
    finally:
        first.close()
        second.close()


def test_a_replace_onto_another_milvus_server_still_runs(milvus_server: int, tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    server, db, port = start_server_in_thread(data_dir=str(tmp_path / "other"), host="127.0.0.1", port=0)
    source = _open(f"http://localhost:{milvus_server}", tmp_path, "r")
    target = _open(f"http://localhost:{port}", tmp_path, "r")
    try:
        assert store_sameness(source, target) == "different"
        source.ensure_collection("kb")
        source.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
        target.ensure_collection("kb")
        target.replace_source("kb", "old.md", "docs", [make_chunk("o-0", "old text", source_id="old.md")])
        report = copy_collection(source, target, "kb", replace=True)
        assert report.chunks_copied == 1 and report.verification is not None and report.verification.ok
        assert [s.source_id for s in target.list_sources("kb")] == ["a.md"]
    finally:
        source.close()
        target.close()
        server.stop(grace=0)
        db.close()
