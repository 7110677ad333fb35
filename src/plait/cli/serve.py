"""CLI commands for the network interfaces: ``serve``, ``keys create|list|revoke``, ``mcp``.

They are added to the main ``plait`` app by :func:`register`, so the core CLI does not
import FastAPI or the MCP SDK until one of these commands runs.
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import Annotated

import typer

from plait.api.keys import ALL_COLLECTIONS, KeyStore, role_of
from plait.cli.logs import configure_logging
from plait.cli.options import CollectionOpt, DebugOpt, EmbedderOpt, JsonOpt, StoreOpt, console, err, fail, port_or_exit
from plait.cli.options import collection_name as _collection
from plait.cli.options import open_engine as _engine
from plait.cli.options import print_json as _print_json
from plait.cli.options import run_or_exit as _run
from plait.collection_names import check_key_collection
from plait.config import Settings
from plait.errors import NotFoundError
from plait.sources.walks import DEFAULT_MAX_AGE
from plait.stores.base import Store
from plait.terminal import safe
from plait.types import to_json

__all__ = ["is_loopback", "register"]

KeysOpt = Annotated[
    Path | None,
    typer.Option(
        "--keys",
        help="A stand-alone API key file (env PLAIT_KEYS; default: the keys kept in the store).",
    ),
]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _StoreKeys(KeyStore):
    """The keys of a store this command opened (closing them closes the store)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.records())
        self._store = store

    def close(self) -> None:
        self._store.close()


def _key_store(keys: Path | None, store: str | None) -> KeyStore:
    """The key file ``--keys`` / ``PLAIT_KEYS`` names, else the keys kept in the store."""
    settings = Settings.resolve(store=store, keys=str(keys) if keys is not None else None)
    if settings.keys:
        return KeyStore(Path(settings.keys))
    from plait.stores import open_store

    return _StoreKeys(open_store(settings.store))


def _store_collections(store: str | None) -> list[str]:
    """The collections of the store, read without creating it (a SQLite file that does
    not exist holds none): what a key may name besides ``*``."""
    from plait.stores import open_store

    try:
        opened = open_store(Settings.resolve(store=store).store, create=False)
    except NotFoundError:
        return []
    try:
        return [info.name for info in opened.list_collections()]
    finally:
        opened.close()


def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8000,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="No API keys (local use: loopback hosts only).")
    ] = False,
    keys: KeysOpt = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    max_in_flight: Annotated[
        int, typer.Option("--max-in-flight", help="Concurrent requests before the rest get a quick 503.")
    ] = 64,
    no_backfill: Annotated[
        bool,
        typer.Option("--no-backfill", help="Do not embed, in the background, chunks that still lack a vector."),
    ] = False,
    log_json: Annotated[
        bool,
        typer.Option(
            "--log-json",
            help="Log one JSON object per line on stderr (access log included, with each request's id).",
        ),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs) and the search & debug page at /.

    /metrics (Prometheus), /readyz (the store answers) and /healthz (the process answers);
    every response carries X-Request-Id (an incoming well-formed one is kept).

    Collections with chunks still lacking a vector (a detached or interrupted index) are
    embedded in a background thread while serving; searches meanwhile use the dense arm
    over the chunks that have one (``vectorCoverage``).
    """
    if no_auth and not is_loopback(host):
        fail(
            f"--no-auth only binds to loopback (127.0.0.1, ::1, localhost), "
            f"not {host!r}: create a key with 'plait keys create' instead"
        )
    port_or_exit(port)
    from plait.api.http import create_app

    name = _collection(collection)
    with _engine(store, embedder, walk_max_age=DEFAULT_MAX_AGE) as engine:  # readers reuse root walks
        key_store = None if no_auth else (
            _run(debug, lambda: KeyStore(keys)) if keys is not None else engine.keys
        )
        fastapi_app = _run(
            debug, lambda: create_app(
                engine,
                auth=not no_auth,
                keys=key_store,
                default_collection=name,
                max_in_flight=max_in_flight,
            )
        )
        import uvicorn

        mode = "no auth (loopback only)" if no_auth else f"API keys from {key_store.where if key_store else ''}"
        err.print(f"plait serving on http://{host}:{port}/ — {mode}", highlight=False)
        pending = [] if no_backfill else [c.name for c in engine.collections() if c.chunks_without_vector]
        worker = None
        if pending:
            err.print(
                f"embedding the chunks without a vector of {safe(', '.join(pending))} in the background",
                highlight=False,
            )
            worker = engine.start_backfill()
        if log_json:
            plait_log = logging.getLogger("plait")
            level = plait_log.level if plait_log.level not in (logging.NOTSET, logging.WARNING) else logging.INFO
            configure_logging(level, json_format=True)
        try:
            uvicorn.run(
                fastapi_app,
                host=host,
                port=port,
                log_level="debug" if debug else ("warning" if log_json else "info"),
                access_log=not log_json,  # plait's own access log (plait.api.access) has the request id
            )
        finally:
            if worker is not None:
                thread, stop = worker
                stop.set()
                thread.join(timeout=60)


keys_app = typer.Typer(help="API keys: a role (reader | maintainer | admin) per collection.")


@keys_app.command("create")
def keys_create(
    role: Annotated[str, typer.Option(help="reader | maintainer | admin")] = "reader",
    collection: Annotated[
        str | None, typer.Option("--collection", "-c", help="Collection the key covers; '*' for all.")
    ] = None,
    keys: KeysOpt = None,
    store: StoreOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Create a key and print its token — shown only this once. The collection must exist
    in the store (or be '*', every collection)."""
    name = _collection(collection)
    _run(debug, lambda: role_of(role))
    existing = None if name == ALL_COLLECTIONS else _run(debug, lambda: _store_collections(store))
    if existing is not None:  # before the key store is opened (which creates a store file)
        _run(debug, lambda: check_key_collection(name, existing))
    key_store = _run(debug, lambda: _key_store(keys, store))
    try:
        key, token = _run(debug, lambda: key_store.create(role=role, collection=name, collections=existing))
    finally:
        key_store.close()
    if as_json:
        _print_json({**to_json(key), "token": token})
        return
    console.print(f"key {key.id}: {key.role.value} on {safe(repr(key.collection))}", highlight=False)
    console.print(token, highlight=False, soft_wrap=True)
    err.print("store this token now: it is not shown again", highlight=False)


@keys_app.command("list")
def keys_list(
    keys: KeysOpt = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List keys (id, role, collection, token hint, revoked) — never the tokens."""
    key_store = _run(debug, lambda: _key_store(keys, store))
    try:
        listed = [k for k in key_store.list_keys() if collection is None or k.collection == collection]
    finally:
        key_store.close()
    if as_json:
        _print_json([to_json(k) for k in listed])
        return
    from rich.table import Table

    table = Table(title="API keys")
    for column in ("id", "role", "collection", "token", "created", "revoked"):
        table.add_column(column)
    for k in listed:
        table.add_row(str(k.id), k.role.value, safe(k.collection), k.hint, k.created_at, k.revoked_at or "—")
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[int, typer.Argument(help="The key's id (see 'plait keys list').")],
    keys: KeysOpt = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Revoke a key: it stops working at once."""
    key_store = _run(debug, lambda: _key_store(keys, store))
    try:
        key = _run(debug, lambda: key_store.revoke(key_id))
    finally:
        key_store.close()
    if as_json:
        _print_json(key)
    else:
        console.print(f"key {key.id} revoked at {key.revoked_at}", highlight=False)


def mcp(
    no_reindex: Annotated[
        bool, typer.Option("--no-reindex", help="Leave the reindex tool out (read-only agents).")
    ] = False,
    usage: Annotated[
        bool,
        typer.Option("--usage", help="Offer the usage tool (provider usage, a maintainer's figure; agents are readers)."),
    ] = False,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio | streamable-http")
    ] = "stdio",
    host: Annotated[
        str, typer.Option(help="Address to bind with streamable-http (loopback only: no auth).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind with streamable-http.")] = 8001,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    embedder: EmbedderOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Serve MCP tools (collections, search, explain, ask, faq_list, coverage, reindex, and
    usage with --usage) for agents, over stdio or streamable HTTP (endpoint
    http://HOST:PORT/mcp)."""
    from plait.api.mcp import create_mcp_server

    if transport not in _MCP_TRANSPORTS:
        fail(f"--transport {transport!r} is not one of: {', '.join(_MCP_TRANSPORTS)}")
    if transport == "streamable-http":
        if not is_loopback(host):
            fail(
                "the MCP HTTP transport has no API keys, so it only binds to "
                f"loopback (127.0.0.1, ::1, localhost), not {host!r}"
            )
        port_or_exit(port)
    name = _collection(collection)
    with _engine(store, embedder, walk_max_age=DEFAULT_MAX_AGE) as engine:  # readers reuse root walks
        server = _run(
            debug,
            lambda: create_mcp_server(
                engine, default_collection=name, allow_reindex=not no_reindex, allow_usage=usage
            ),
        )
        if transport == "stdio":
            server.run("stdio")
        else:
            err.print(f"plait MCP on http://{host}:{port}/mcp (streamable HTTP)", highlight=False)
            server.run("streamable-http", host=host, port=port)


_MCP_TRANSPORTS = ("stdio", "streamable-http")


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``keys`` and ``mcp`` to the main CLI."""
    app.command("serve")(serve)
    app.add_typer(keys_app, name="keys")
    app.command("mcp")(mcp)
