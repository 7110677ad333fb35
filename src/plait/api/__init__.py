"""Network interfaces over :class:`plait.service.Plait`: the HTTP API, API keys, MCP.

The modules are imported on demand so the core library never needs FastAPI:
``plait.api.http.create_app``, ``plait.api.keys.KeyStore`` (the CLI commands are in
:mod:`plait.cli.serve`).
"""
