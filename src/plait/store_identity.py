"""Whether two store objects are one storage: the copy's same-store guard (:mod:`plait.copying`).

:func:`store_sameness` answers ``"same"``, ``"different"`` or ``"unknown"``:

- **SQLite, milvus-lite:** the same file (by file identity; a path not there yet by its
  resolved absolute path), and for milvus-lite the same collection prefix.
- **PostgreSQL:** the servers are asked (:meth:`~plait.stores.postgres.PostgresStore.identity`):
  the cluster's ``system_identifier`` (``pg_control_system()``), which a physical
  replica shares with its primary (they hold the same data), the database and the schema.
  A server that denies ``pg_control_system()`` is named by its postmaster's start time,
  which a replica does *not* share; then the database and schema names and the OIDs of
  the database and of plait's collections table (a replica has its primary's catalog)
  decide only "different": equal OIDs under two start times are a primary and its
  replica, or two servers set up alike — ``"unknown"``.
- **Milvus server:** the address normalised (:func:`milvus_address`: scheme and case
  ignored, the default port filled in — 443 for ``https``, else 19530 — a trailing
  slash dropped, the database the first path segment or ``default``), and the same
  collection prefix. Two host names are the same server when they resolve
  (``socket.getaddrinfo``, both waited for at most :data:`RESOLVE_SECONDS` in all, logged
  at info level) to a common address; when either does not resolve in time, or both
  name only addresses of this machine (``localhost`` and this host's own name: one
  port, likely one server listening on all of them), the answer is ``"unknown"``.

The copy refuses to replace a collection of the same name when the answer is ``"same"``,
and also when it is ``"unknown"`` unless the target's collection is seen to be another
one (:func:`may_be_one_collection`): nothing is deleted on a guess.

Addresses cannot see every way of reaching one server (a port forward, a proxy, a load
balancer, NAT, a socket and a TCP port), so before anything is written to a target
collection of the source's name, :func:`is_one_collection` asks the storage itself: a
random token written into the target collection's settings is looked for through the
source. Seen there, the two are one collection whatever the addresses say.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from plait.stores.base import Store

__all__ = [
    "PROBE_KEY", "Sameness", "is_one_collection", "may_be_one_collection", "milvus_address", "postgres_sameness", "server_sameness", "store_sameness",
]

Sameness = Literal["same", "different", "unknown"]

log = logging.getLogger(__name__)

PROBE_KEY = "copyIdentityProbe"
"""The settings key :func:`is_one_collection` writes its token under (deleted after; not
carried by a copy or an export)."""

_MILVUS_PORT = 19530
_HTTPS_PORT = 443


def milvus_address(uri: str) -> tuple[str, int, str]:
    """(host, port, database) of a Milvus server URI, as pymilvus reads it: ``http://``,
    ``https://``, ``tcp://`` or none (``host:port``); the host lower case without a
    trailing dot, IPv6 brackets dropped; the port given or the default (443 for https,
    else 19530); the database the first segment of the path, else ``default``."""
    text = uri.strip()
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    host = (parts.hostname or "localhost").lower().rstrip(".")
    try:
        port = parts.port
    except ValueError:  # not a number: keep it apart from every other address
        port = None
    if port is None:
        port = _HTTPS_PORT if parts.scheme.lower() == "https" else _MILVUS_PORT
    segments = [s for s in parts.path.split("/") if s]
    return host, port, segments[0] if segments else "default"


RESOLVE_SECONDS = 2.0
"""How long :func:`server_sameness` waits for both host names to resolve (together)."""


def _resolve_all(hosts: Sequence[tuple[str, int]], timeout: float) -> list[list[Any] | None]:
    """``socket.getaddrinfo`` of each (host, port), each on a daemon thread, all waited for
    at most ``timeout`` seconds in all: a lookup not answered by then (a dead resolver) is
    None, as one that failed, and is left to finish on its own thread."""
    answers: list[list[Any] | None] = [None] * len(hosts)

    def lookup(at: int, host: str, port: int) -> None:
        try:
            answers[at] = list(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError):
            answers[at] = None

    threads = [
        threading.Thread(target=lookup, args=(at, host, port), name="plait-resolve", daemon=True)
        for at, (host, port) in enumerate(hosts)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for (host, _), thread in zip(hosts, threads, strict=True):
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            log.info("resolving %r took more than %.1f s: treated as not resolving", host, timeout)
    return [None if thread.is_alive() else answer for thread, answer in zip(threads, answers, strict=True)]


def _addresses(infos: list[Any] | None) -> frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address] | None:
    """The addresses of a ``getaddrinfo`` answer (IPv4-mapped IPv6 as IPv4); None for none."""
    if infos is None:
        return None
    found: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for info in infos:
        try:
            address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        except ValueError:
            continue
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        found.add(address)
    return frozenset(found) or None


def _local(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``address`` is this machine's (loopback, or a socket can be bound to it)."""
    if address.is_loopback or address.is_unspecified:
        return True
    family = socket.AF_INET6 if isinstance(address, ipaddress.IPv6Address) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(address), 0))
    except OSError:
        return False
    return True


def server_sameness(a: str, b: str) -> Sameness:
    """Whether two Milvus server URIs name one server and database (module docstring)."""
    host_a, port_a, db_a = milvus_address(a)
    host_b, port_b, db_b = milvus_address(b)
    if port_a != port_b or db_a != db_b:
        return "different"
    if host_a == host_b:
        return "same"
    infos = _resolve_all([(host_a, port_a), (host_b, port_b)], RESOLVE_SECONDS)
    found_a, found_b = _addresses(infos[0]), _addresses(infos[1])
    if found_a is None or found_b is None:
        decided: Sameness = "unknown"
    elif found_a & found_b:
        decided = "same"
    elif all(_local(x) for x in found_a | found_b):
        decided = "unknown"  # one machine, one port: likely one server on all its addresses
    else:
        decided = "different"
    log.info(
        "Milvus %s:%d and %s:%d (database %r): %s (addresses %s / %s)",
        host_a, port_a, host_b, port_b, db_a, decided,
        sorted(map(str, found_a)) if found_a else "none", sorted(map(str, found_b)) if found_b else "none",
    )
    return decided


def _same_file(a: Path | str, b: Path | str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # a file not there (yet): its absolute path is all there is
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def postgres_sameness(a: Sequence[str], b: Sequence[str]) -> Sameness:
    """Whether two PostgreSQL identities (``PostgresStore.identity()``: cluster, database,
    schema, catalog OIDs) name one storage (module docstring)."""
    cluster_a, *where_a = a
    cluster_b, *where_b = b
    if cluster_a.startswith("system:") and cluster_b.startswith("system:"):
        return "same" if (cluster_a, where_a[:2]) == (cluster_b, where_b[:2]) else "different"
    if where_a != where_b:  # the database, the schema, or their catalog's OIDs differ
        return "different"
    # one postmaster start time: one server; two: a primary and its replica, or two alike
    return "same" if cluster_a == cluster_b and cluster_a else "unknown"


def store_sameness(a: Store, b: Store) -> Sameness:
    """Whether two store objects name one storage, however it was spelt (module docstring)."""
    if a is b:
        return "same"
    if type(a) is not type(b):
        return "different"
    file_a, file_b = getattr(a, "database_file", None), getattr(b, "database_file", None)
    if callable(file_a) and callable(file_b):
        path_a, path_b = file_a(), file_b()
        if path_a is None or path_b is None:
            return "different"  # two in-memory databases are two stores
        return "same" if _same_file(path_a, path_b) else "different"
    identity_a, identity_b = getattr(a, "identity", None), getattr(b, "identity", None)
    if callable(identity_a) and callable(identity_b):
        if getattr(a, "dsn", None) == getattr(b, "dsn", None) and getattr(a, "schema", None) == getattr(b, "schema", None):
            return "same"
        return postgres_sameness(identity_a(), identity_b())
    if getattr(a, "_prefix", None) != getattr(b, "_prefix", None):
        return "different"  # Milvus: each prefix is its own set of collections
    lite_a, lite_b = getattr(a, "lite_path", None), getattr(b, "lite_path", None)
    if isinstance(lite_a, Path) and isinstance(lite_b, Path):  # milvus-lite: the file it opened
        return "same" if _same_file(lite_a, lite_b) else "different"
    if isinstance(lite_a, Path) or isinstance(lite_b, Path):
        return "different"  # a milvus-lite file and a server
    uri_a, uri_b = getattr(a, "uri", None), getattr(b, "uri", None)
    if uri_a is None or uri_b is None:
        return "different"
    if str(uri_a).startswith("unix:") or str(uri_b).startswith("unix:"):
        paths = [str(u).removeprefix("unix:").removeprefix("//") for u in (uri_a, uri_b)]
        return "same" if _same_file(paths[0], paths[1]) else "different"
    return server_sameness(str(uri_a), str(uri_b))


def may_be_one_collection(a: Store, b: Store, name: str) -> bool:
    """For two stores whose sameness is ``"unknown"``: whether collection ``name`` of
    ``b`` may be ``a``'s. It is not when ``b`` has no such collection (``a``'s exists), or
    when both record when they were created and the times differ (one collection has one)."""
    mine, theirs = a.get_collection(name), b.get_collection(name)
    if mine is None or theirs is None:
        return False
    return not (mine.created_at and theirs.created_at and mine.created_at != theirs.created_at)


def is_one_collection(a: Store, b: Store, name_a: str, name_b: str) -> bool:
    """Whether collection ``name_b`` of ``b`` *is* collection ``name_a`` of ``a``, asked of
    the storage rather than inferred from addresses. Two collections that record different
    creation times are two; otherwise a random token is written into ``b``'s collection
    settings (key :data:`PROBE_KEY`, deleted again at once, whatever happened meanwhile) and
    read through ``a``: seen there, one collection. ``b`` must be writable (it is a copy's
    target)."""
    mine, theirs = a.get_collection(name_a), b.get_collection(name_b)
    if mine is None or theirs is None:
        return False
    if mine.created_at and theirs.created_at and mine.created_at != theirs.created_at:
        return False
    token = secrets.token_hex(16)
    b.update_settings(name_b, {PROBE_KEY: token})
    try:
        seen = a.get_settings(name_a).get(PROBE_KEY) == token
    finally:
        b.update_settings(name_b, {}, remove=[PROBE_KEY])  # no trace: not even a null
    log.info(
        "collection %r of the target %s collection %r of the source (a token written through the target %s)",
        name_b, "is" if seen else "is not", name_a, "was read back through the source" if seen else "was not seen there",
    )
    return seen
