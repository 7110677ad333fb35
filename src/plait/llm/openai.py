"""OpenAI's ``POST /v1/chat/completions`` (and any compatible server: vLLM, LM Studio,
llama.cpp's server, Ollama's ``/v1``), non-streaming.

Request: ``{"model", "messages", "temperature", "max_tokens"?}``; answer:
``{"choices": [{"message": {"role": "assistant", "content": ...}}], ...}``.
``base_url`` may be given with or without the ``/v1`` suffix. A reply whose content
is a list of text parts is joined; a ``null`` content (a refusal, a tool call) is a
:class:`~plait.errors.ProviderResponseError`.
"""

from __future__ import annotations

import json
from typing import Any

from plait._http import excerpt
from plait.llm.base import HTTPChatLLM

__all__ = ["DEFAULT_OPENAI_CHAT_MODEL", "DEFAULT_OPENAI_URL", "OpenAILLM"]

DEFAULT_OPENAI_URL = "https://api.openai.com"
DEFAULT_OPENAI_CHAT_MODEL = "gpt-4o-mini"


class OpenAILLM(HTTPChatLLM):
    """A chat model behind an OpenAI-compatible API."""

    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_OPENAI_URL,
        model: str = DEFAULT_OPENAI_CHAT_MODEL,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 1,
        backoff: float = 0.5,
    ) -> None:
        """Point at an OpenAI-compatible server; nothing is contacted until the first chat."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(
            base_url=base_url,
            model=model,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            headers=headers,
        )

    def _endpoint(self) -> str:
        root = self.base_url
        if root.endswith("/v1"):
            return f"{root}/chat/completions"
        return f"{root}/v1/chat/completions"

    def _payload(
        self, messages: list[dict[str, Any]], temperature: float, max_tokens: int | None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "stream": False,
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        return payload

    def _parse(self, answer: Any) -> str:
        if not isinstance(answer, dict):
            raise self._bad(f"returned {type(answer).__name__} where an object was expected")
        choices = answer.get("choices")
        if not isinstance(choices, list):
            if "error" in answer:
                raise self._bad(f"returned an error: {excerpt(json.dumps(answer['error']))}")
            raise self._bad("answer has no 'choices' list")
        if not choices or not isinstance(choices[0], dict):
            raise self._bad("answer has no choice")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise self._bad("choices[0] has no 'message'")
        content = message.get("content")
        if isinstance(content, list):  # content parts
            texts = [p.get("text") for p in content if isinstance(p, dict)]
            content = "".join(t for t in texts if isinstance(t, str))
        if not isinstance(content, str):
            reason = choices[0].get("finish_reason")
            raise self._bad(
                f"returned no text content (finish_reason {reason!r}): {excerpt(repr(message), 120)}"
            )
        return content
