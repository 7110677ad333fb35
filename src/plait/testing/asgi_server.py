"""Run an ASGI app (the plait HTTP API) under a real uvicorn server, for tests.

    with UvicornThread(create_app(engine, auth=False)) as server:
        httpx.get(server.url + "/healthz")

The server listens on 127.0.0.1 on a free port, in a background thread, and stops
when the block ends. Needs the ``server`` extra (uvicorn).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from plait.errors import ConfigError

__all__ = ["UvicornThread"]


KEEP_ALIVE_S = 75
"""Seconds an idle keep-alive connection stays open (uvicorn's default is 5)."""


class UvicornThread:
    """A uvicorn server in a daemon thread on ``127.0.0.1:<free port>``."""

    def __init__(self, app: Any, *, startup_timeout: float = 20.0) -> None:
        try:
            import uvicorn
        except ImportError:
            raise ConfigError("UvicornThread needs uvicorn: pip install 'plait[server]'") from None
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # Idle keep-alive connections are closed after 75 s, not uvicorn's 5 s: on a loaded
        # test machine a client's next request on a pooled connection could race the
        # server's close ("Server disconnected without sending a response").
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", access_log=False, timeout_keep_alive=KEEP_ALIVE_S
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._startup_timeout = startup_timeout

    def start(self) -> UvicornThread:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"uvicorn did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> UvicornThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
