"""The chat-provider protocol that rerank, ask and the Refinery build on.

Only the smallest operation is abstract: one non-streaming chat call that takes
OpenAI-style messages (``[{"role": "system" | "user" | "assistant", "content": str}]``)
and returns the assistant's text. Providers raise
:class:`~plait.errors.ProviderUnavailableError` when the server cannot be reached in
time and :class:`~plait.errors.ProviderResponseError` when it answers with something
the protocol does not promise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from plait._http import RetryingJSONClient
from plait.errors import ConfigError, ProviderResponseError, ValidationError
from plait.usage import UsageEvent, estimate_tokens, llm_tokens, report

__all__ = ["LLM", "HTTPChatLLM", "check_messages"]

_ROLES = ("system", "user", "assistant")


@runtime_checkable
class LLM(Protocol):
    """A chat model: ``chat(messages) -> str``.

    ``provider`` names the backend (``ollama``, ``openai``) and ``model`` the model it
    is asked for; both are shown in errors and debug output.
    """

    provider: str
    model: str

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str:
        """The assistant's reply to ``messages`` (no streaming)."""
        ...


def check_messages(
    messages: Sequence[dict[str, Any]], *, temperature: float, max_tokens: int | None
) -> list[dict[str, Any]]:
    """Validate chat arguments before anything is sent; return the messages as a list.

    Raises :class:`~plait.errors.ValidationError` naming the bad value.
    """
    if not messages:
        raise ValidationError("messages is empty; give at least one message")
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValidationError(f"messages[{position}] is {type(message).__name__}, not an object")
        role = message.get("role")
        if role not in _ROLES:
            raise ValidationError(
                f"messages[{position}] has role {role!r}; allowed: {', '.join(_ROLES)}"
            )
        if not isinstance(message.get("content"), str):
            raise ValidationError(f"messages[{position}] content must be a string")
    if not 0.0 <= temperature <= 2.0:
        raise ValidationError(f"temperature must be in 0..2, got {temperature!r}")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise ValidationError(f"max_tokens must be a positive integer or None, got {max_tokens!r}")
    return list(messages)


class HTTPChatLLM:
    """Shared plumbing for chat servers over HTTP: settings checks, one retrying client.

    Subclasses set ``provider`` and implement :meth:`_endpoint`, :meth:`_payload` and
    :meth:`_parse`. Timeouts, retries and backoff follow :mod:`plait._http`: the
    worst case for one call is ``(retries + 1) * timeout`` plus the backoff sleeps.
    """

    provider = "http"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        timeout: float = 60.0,
        retries: int = 1,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Validate the settings; nothing is contacted until the first :meth:`chat`."""
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{self.provider} base_url must start with http:// or https://, got {base_url!r}"
            )
        if not model:
            raise ConfigError(f"{self.provider} model must not be empty")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._transport = RetryingJSONClient(
            provider=self.provider,
            model=model,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            headers=headers,
        )
        self.timeout = self._transport.timeout
        self.retries = self._transport.retries
        self.backoff = self._transport.backoff

    # -- subclass hooks -------------------------------------------------------

    def _endpoint(self) -> str:
        raise NotImplementedError

    def _payload(
        self, messages: list[dict[str, Any]], temperature: float, max_tokens: int | None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, answer: Any) -> str:
        raise NotImplementedError

    # -- public ---------------------------------------------------------------

    @property
    def url(self) -> str:
        """The full URL chats are POSTed to."""
        return self._endpoint()

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str:
        """Send ``messages`` and return the assistant's text (see :class:`LLM`)."""
        checked = check_messages(messages, temperature=temperature, max_tokens=max_tokens)
        answer = self._transport.post(self._endpoint(), self._payload(checked, temperature, max_tokens))
        reply = self._parse(answer)
        prompt, completion = llm_tokens(answer)
        sent = [str(m.get("content", "")) for m in checked]
        report(
            UsageEvent(
                kind="llm", provider=self.provider, model=self.model, texts=len(sent),
                characters=sum(len(t) for t in sent),
                input_tokens=prompt if prompt is not None else estimate_tokens(sent),
                output_tokens=completion if completion is not None else estimate_tokens([reply]),
                estimated=prompt is None or completion is None,
            )
        )
        return reply

    def close(self) -> None:
        """Close the HTTP connection pool (a later chat opens a new one)."""
        self._transport.close()

    def __enter__(self) -> HTTPChatLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never shows an API key
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"

    def _bad(self, what: str) -> ProviderResponseError:
        return ProviderResponseError(f"{self.provider} at {self._endpoint()} {what}")
