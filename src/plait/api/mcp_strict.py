"""An ``MCPServer`` whose tools take their arguments as strictly as the HTTP API takes a body.

The SDK validates a call's arguments with a model built from the tool function's
signature: it ignores names the tool does not take (``{"query": "x", "kk": 3}`` ran
with ``k=8``) and reports a wrong type with pydantic's multi-line report. Here an
unknown argument is a tool error naming it and the arguments the tool takes, and an
argument the signature rejects is reported in one line naming it, as the HTTP API's
422 does (:func:`plait.api.messages.describe_validation`). An argument that is a field
of the HTTP API's request bodies is passed on as given and checked by the request model
(``true`` as a number, NaN, ranges, ``'auto'``, fusion knobs, metadata filters:
:mod:`plait.api.mcp_arguments`), in the 422's words with each field named as the tool's
argument (:func:`snake_named`).

Imported on demand: it needs the ``mcp`` extra.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from plait.api.messages import describe_validation, one_line

__all__ = ["StrictMCPServer", "snake_named", "unknown_arguments"]


def unknown_arguments(tool: str, given: list[str], takes: list[str]) -> str | None:
    """The message for the names in ``given`` that ``tool`` does not take (None: all known).

    >>> unknown_arguments("search", ["query", "kk"], ["query", "k"])
    "unknown argument 'kk'; search takes: query, k"
    """
    unknown = [name for name in given if name not in takes]
    if not unknown:
        return None
    names = ", ".join(repr(name) for name in unknown)
    return f"unknown argument{'s' if len(unknown) > 1 else ''} {names}; {tool} takes: {', '.join(takes) or 'none'}"


def snake_named(message: str, takes: list[str]) -> str:
    """``message`` with each field the engine names in camelCase, at the start of one of its
    ``; ``-separated parts, named as the tool's argument (``minTermCoverage:`` →
    ``min_term_coverage:``): the engine checks the HTTP API's request model.

    >>> snake_named("minTermCoverage: Input should be ≤ 1; k: bad", ["question", "k", "min_term_coverage"])
    'min_term_coverage: Input should be ≤ 1; k: bad'
    """
    camel = {to_camel(name): name for name in takes if "_" in name}  # the request models' aliases
    parts = message.split("; ")
    for i, part in enumerate(parts):
        field, colon, rest = part.partition(":")
        if colon and field in camel:
            parts[i] = f"{camel[field]}:{rest}"
    return "; ".join(parts)


class StrictMCPServer(MCPServer[Any]):
    """Refuses unknown tool arguments and reports a rejected one in one line (see the module)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        tool = next((t for t in await self.list_tools() if t.name == name), None)
        takes: list[str] = []
        if tool is not None:  # an unknown tool: the SDK's own error
            takes = list(tool.input_schema.get("properties", {}))
            problem = unknown_arguments(name, list(arguments), takes)
            if problem is not None:
                raise ToolError(f"Error executing tool {name}: {one_line(problem)}")
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: the SDK reports it without details
        except ToolError as exc:
            # the SDK wraps an argument its model rejects as 'Error executing tool <name>:
            # <pydantic's multi-line report>'; a tool's own errors carry no such cause
            if not isinstance(exc.__cause__, ValidationError):
                prefix, text = f"Error executing tool {name}: ", str(exc)
                renamed = prefix + snake_named(text.removeprefix(prefix), takes)
                if not text.startswith(prefix) or renamed == text:
                    raise
                raise ToolError(renamed) from exc.__cause__
            message = describe_validation(exc.__cause__.errors())
            raise ToolError(f"Error executing tool {name}: {message}") from exc.__cause__
