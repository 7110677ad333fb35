"""A real HTTP server that speaks the Ollama and OpenAI wire formats, for tests.

It listens on 127.0.0.1 on a free port, in a background thread, and answers:

========================  =====================================================
``POST /api/embed``       Ollama embeddings: ``{"model", "input"}`` → ``{"embeddings"}``
``POST /api/chat``        Ollama chat: non-streaming JSON, or NDJSON chunks when
                          ``"stream"`` is not ``false`` (Ollama's default)
``POST /v1/embeddings``   OpenAI embeddings (``dimensions`` and ``encoding_format``
                          ``"base64"`` honoured)
``POST /v1/chat/completions``  OpenAI chat completion (SSE when ``"stream": true``)
``GET /api/tags``, ``GET /v1/models``, ``GET /health``  small listings / liveness
========================  =====================================================

Behaviour is scriptable through constructor arguments, which are also plain
attributes that a test may change while the server runs::

    with WireServer(dimension=8) as srv:
        embedder = OllamaEmbedder(base_url=srv.url)
        embedder.embed_documents(["a"])
        srv.status = 500                      # every later request fails
        assert srv.requests[0].path == "/api/embed"

Fault modes: ``delay`` (seconds before answering), ``status`` (answer every request
with this HTTP status and an error body), ``malformed`` (HTTP 200 with a body that is
not JSON), ``wrong_dimension`` (``True`` → vectors one longer than normal, an ``int``
→ vectors of that length), ``flap`` (requests 1, 3, 5, … fail with HTTP 500) and
``shuffle`` (OpenAI ``data`` items in reverse order, to test sorting by index) and
``drip`` (seconds between the bytes of every answer body: each read is quick, the
whole answer slow).
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

import numpy as np

from plait.embeddings.fake import FakeEmbedder

__all__ = ["ChatFn", "EmbedFn", "RecordedRequest", "WireServer", "closed_port"]

#: texts -> one vector per text (any float sequence; ragged answers are allowed on purpose).
EmbedFn = Callable[[list[str]], Sequence[Sequence[float]]]
#: chat messages -> the assistant's reply.
ChatFn = Callable[[list[dict[str, Any]]], str]


def closed_port() -> str:
    """A URL on 127.0.0.1 where nothing listens (a port bound, read and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _echo_chat(messages: list[dict[str, Any]]) -> str:
    """Default chat reply: echo the last user message."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return f"echo: {message.get('content', '')}"
    return "echo:"


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (``body`` is None when it was not JSON)."""

    method: str
    path: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    wire: WireServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection; streams end on close

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    # -- plumbing --------------------------------------------------------------

    def _send(
        self, status: int, body: bytes, content_type: str = "application/json"
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            drip = self.server.wire.drip
            if drip > 0:  # one byte at a time: no single read ever waits long
                for i in range(len(body)):
                    if self.server.wire._stopping.is_set():
                        return
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(drip)
            else:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout test)
            pass

    def _json(self, status: int, obj: Any) -> None:
        if not self.server.wire.usage and isinstance(obj, dict):
            obj = {k: v for k, v in obj.items() if k not in ("usage", "prompt_eval_count", "eval_count")}
        self._send(status, json.dumps(obj).encode("utf-8"))

    def _error(self, status: int, message: str) -> None:
        if self.path.startswith("/v1/"):
            kind = "server_error" if status >= 500 else "invalid_request_error"
            self._json(
                status, {"error": {"message": message, "type": kind, "code": None}}
            )
        else:
            self._json(status, {"error": message})

    def _read_body(self) -> tuple[bytes, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return raw, json.loads(raw) if raw else None
        except ValueError:
            return raw, None

    # -- dispatch --------------------------------------------------------------

    def do_GET(self) -> None:
        wire = self.server.wire
        wire._record("GET", self.path, None, dict(self.headers))
        if self.path in ("/", "/health"):
            self._json(200, {"status": "ok"})
        elif self.path == "/api/tags":
            self._json(200, {"models": [{"name": wire.model, "model": wire.model}]})
        elif self.path == "/v1/models":
            self._json(
                200, {"object": "list", "data": [{"id": wire.model, "object": "model"}]}
            )
        else:
            self._error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        wire = self.server.wire
        raw, body = self._read_body()
        number = wire._record("POST", self.path, body, dict(self.headers))
        if wire.delay > 0:
            wire._stopping.wait(wire.delay)
        if wire.status is not None:
            self._error(wire.status, f"scripted failure: HTTP {wire.status}")
            return
        if wire.flap and number % 2 == 1:
            self._error(500, "scripted flap: every other request fails")
            return
        if wire.malformed:
            self._send(200, b'{"embeddings": [[0.1, 0.2], oops')
            return
        if not isinstance(body, dict):
            self._error(400, f"request body is not a JSON object: {raw[:80]!r}")
            return
        routes = {
            "/api/embed": self._ollama_embed,
            "/api/chat": self._ollama_chat,
            "/v1/embeddings": self._openai_embed,
            "/v1/chat/completions": self._openai_chat,
        }
        route = routes.get(self.path)
        if route is None:
            self._error(404, f"no route for POST {self.path}")
            return
        try:
            route(body)
        except (TypeError, ValueError, KeyError) as exc:
            self._error(400, f"bad request: {exc}")
        except Exception as exc:  # noqa: BLE001 - a scripted function failed: answer, never hang
            self._error(500, f"server error: {type(exc).__name__}: {exc}")

    # -- embeddings ------------------------------------------------------------

    @staticmethod
    def _inputs(body: dict[str, Any]) -> list[str]:
        value = body.get("input")
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise ValueError("'input' must be a string or a list of strings")

    def _ollama_embed(self, body: dict[str, Any]) -> None:
        texts = self._inputs(body)
        vectors = self.server.wire._vectors(texts, None)
        self._json(
            200,
            {
                "model": body.get("model", self.server.wire.model),
                "embeddings": vectors,
                "total_duration": 1000,
                "load_duration": 10,
                "prompt_eval_count": sum(len(t.split()) for t in texts),
            },
        )

    def _openai_embed(self, body: dict[str, Any]) -> None:
        texts = self._inputs(body)
        dimensions = body.get("dimensions")
        if dimensions is not None and (
            not isinstance(dimensions, int) or dimensions < 1
        ):
            raise ValueError("'dimensions' must be a positive integer")
        vectors = self.server.wire._vectors(texts, dimensions)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, vector in enumerate(vectors):
            embedding: Any = vector
            if as_base64:
                embedding = base64.b64encode(
                    np.asarray(vector, dtype="<f4").tobytes()
                ).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        if self.server.wire.shuffle:
            data.reverse()
        tokens = sum(len(t.split()) for t in texts)
        self._json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", self.server.wire.model),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    # -- chat ------------------------------------------------------------------

    @staticmethod
    def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) for m in messages
        ):
            raise ValueError("'messages' must be a list of objects")
        return messages

    def _ollama_chat(self, body: dict[str, Any]) -> None:
        wire = self.server.wire
        reply = wire.chat(self._messages(body))
        model = body.get("model", wire.model)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        final = {
            "model": model,
            "created_at": stamp,
            "message": {"role": "assistant", "content": reply},
            "done_reason": "stop",
            "done": True,
            "total_duration": 1000,
            "prompt_eval_count": 1,
            "eval_count": max(1, len(reply.split())),
        }
        if body.get("stream", True) is False:
            self._json(200, final)
            return
        lines = []
        for piece in _pieces(reply):
            chunk = {
                "model": model,
                "created_at": stamp,
                "message": {"role": "assistant", "content": piece},
                "done": False,
            }
            lines.append(json.dumps(chunk))
        lines.append(
            json.dumps({**final, "message": {"role": "assistant", "content": ""}})
        )
        self._send(
            200, ("\n".join(lines) + "\n").encode("utf-8"), "application/x-ndjson"
        )

    def _openai_chat(self, body: dict[str, Any]) -> None:
        wire = self.server.wire
        messages = self._messages(body)
        reply = wire.chat(messages)
        model = body.get("model", wire.model)
        ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        completion_tokens = len(reply.split())
        if body.get("stream") is True:
            events = []
            for i, piece in enumerate(_pieces(reply)):
                delta: dict[str, Any] = {"content": piece}
                if i == 0:
                    delta["role"] = "assistant"
                events.append(
                    {
                        "id": ident,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [
                            {"index": 0, "delta": delta, "finish_reason": None}
                        ],
                    }
                )
            events.append(
                {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                }
            )
            text = (
                "".join(f"data: {json.dumps(e)}\n\n" for e in events)
                + "data: [DONE]\n\n"
            )
            self._send(200, text.encode("utf-8"), "text/event-stream")
            return
        self._json(
            200,
            {
                "id": ident,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )


def _pieces(text: str) -> list[str]:
    """Split a reply into streaming chunks (word by word, spaces kept)."""
    words = text.split(" ")
    return [w if i == len(words) - 1 else w + " " for i, w in enumerate(words)] or [""]


class WireServer:
    """A scriptable Ollama + OpenAI server on 127.0.0.1 (see the module docstring).

    ``embed`` maps a list of texts to vectors (default: :class:`FakeEmbedder` of
    ``dimension``, unit length); ``chat`` maps messages to a reply (default: echo the
    last user message). ``requests`` records every request in arrival order.
    """

    def __init__(
        self,
        *,
        dimension: int = 64,
        embed: EmbedFn | None = None,
        chat: ChatFn | None = None,
        delay: float = 0.0,
        status: int | None = None,
        malformed: bool = False,
        wrong_dimension: bool | int = False,
        flap: bool = False,
        shuffle: bool = False,
        drip: float = 0.0,
        model: str = "wire-model",
        usage: bool = True,
    ) -> None:
        """Configure the server; :meth:`start` (or ``with``) makes it listen. ``usage``
        False leaves the token counts out of every answer (a provider that reports none)."""
        self.usage = usage
        self.dimension = dimension
        self.embed = embed
        self.chat: ChatFn = chat or _echo_chat
        self.delay = delay
        self.status = status
        self.malformed = malformed
        self.wrong_dimension = wrong_dimension
        self.flap = flap
        self.shuffle = shuffle
        self.drip = drip
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._fakes: dict[int, FakeEmbedder] = {}

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> Self:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.wire = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"wire-server-{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (delayed handlers are woken up)."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._server is None:
            raise RuntimeError("WireServer is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    # -- records -------------------------------------------------------------------

    def _record(
        self, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> int:
        """Store one request; return its 1-based number among all requests."""
        with self._lock:
            self.requests.append(RecordedRequest(method, path, body, headers))
            return len(self.requests)

    def paths(self) -> list[str]:
        """The paths of all requests so far, in order."""
        with self._lock:
            return [r.path for r in self.requests]

    def clear(self) -> None:
        """Forget the recorded requests (the flap counter restarts too)."""
        with self._lock:
            self.requests.clear()

    # -- vectors -------------------------------------------------------------------

    def _fake(self, dim: int) -> FakeEmbedder:
        with self._lock:
            fake = self._fakes.get(dim)
            if fake is None:
                fake = self._fakes[dim] = FakeEmbedder(
                    dimension=dim, model=f"hash-{dim}"
                )
            return fake

    def _vectors(self, texts: list[str], dimensions: int | None) -> list[list[float]]:
        """Vectors for ``texts``: from ``embed`` or a FakeEmbedder, then any fault applied."""
        if self.embed is not None:
            rows = [[float(x) for x in row] for row in self.embed(texts)]
            if dimensions:
                rows = [row[:dimensions] for row in rows]
        else:
            fake = self._fake(dimensions or self.dimension)
            rows = fake.embed_documents(texts).astype(float).tolist()
        if self.wrong_dimension is True:
            rows = [[*row, 0.5] for row in rows]
        elif self.wrong_dimension:
            size = int(self.wrong_dimension)
            rows = [(row + [0.5] * size)[:size] for row in rows]
        return rows
