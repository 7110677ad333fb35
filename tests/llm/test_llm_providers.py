"""OllamaLLM and OpenAILLM against a real local HTTP server speaking their wire formats."""

from __future__ import annotations

import time

import pytest

from plait.errors import ConfigError, ProviderResponseError, ProviderUnavailableError, ValidationError
from plait.llm import LLM, LLM_NAMES, OllamaLLM, OpenAILLM, make_llm
from plait.testing.wire import WireServer, closed_port

MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What does ERR-4012 mean?"},
]

_LLM_ENV = (
    "PLAIT_LLM",
    "PLAIT_LLM_MODEL",
    "PLAIT_LLM_TIMEOUT",
    "PLAIT_OLLAMA_URL",
    "PLAIT_OPENAI_URL",
    "PLAIT_OPENAI_API_KEY",
    "OPENAI_API_KEY",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _LLM_ENV:
        monkeypatch.delenv(name, raising=False)


def reply_with_system_and_user(messages: list[dict]) -> str:
    """Proves both messages arrived, in order."""
    return " | ".join(f"{m['role']}:{m['content']}" for m in messages)


# -- wire formats -----------------------------------------------------------------------


def test_ollama_chat_request_and_reply() -> None:
    with WireServer(chat=reply_with_system_and_user) as srv:
        with OllamaLLM(base_url=srv.url, model="qwen2.5:0.5b") as llm:
            assert isinstance(llm, LLM)
            assert (llm.provider, llm.model) == ("ollama", "qwen2.5:0.5b")
            text = llm.chat(MESSAGES, max_tokens=64)
        assert text == "system:Answer briefly. | user:What does ERR-4012 mean?"
        (request,) = srv.requests
        assert (request.method, request.path) == ("POST", "/api/chat")
        assert request.body == {
            "model": "qwen2.5:0.5b",
            "messages": MESSAGES,
            "stream": False,  # else Ollama answers NDJSON chunks
            "options": {"temperature": 0.0, "num_predict": 64},
        }


def test_openai_chat_request_reply_and_auth() -> None:
    with WireServer(chat=reply_with_system_and_user) as srv:
        with OpenAILLM(base_url=srv.url + "/v1", model="gpt-test", api_key="sk-abc") as llm:
            text = llm.chat(MESSAGES, temperature=0.3)
            assert llm.url == srv.url + "/v1/chat/completions"
            assert "sk-abc" not in repr(llm)
        assert text == "system:Answer briefly. | user:What does ERR-4012 mean?"
        (request,) = srv.requests
        assert request.path == "/v1/chat/completions"
        assert request.body == {
            "model": "gpt-test",
            "messages": MESSAGES,
            "temperature": 0.3,
            "stream": False,
        }
        assert request.headers["Authorization"] == "Bearer sk-abc"


def test_openai_base_url_without_v1() -> None:
    with WireServer(chat=lambda m: "ok") as srv:
        llm = OpenAILLM(base_url=srv.url + "/")
        assert llm.chat([{"role": "user", "content": "hi"}], max_tokens=5) == "ok"
        assert srv.requests[0].path == "/v1/chat/completions"
        assert srv.requests[0].body["max_tokens"] == 5
        assert "Authorization" not in srv.requests[0].headers


# -- failures: retries, timeouts, clear errors ------------------------------------------


@pytest.mark.parametrize("cls", [OllamaLLM, OpenAILLM])
def test_flap_is_retried(cls: type) -> None:
    with WireServer(chat=lambda m: "second time lucky", flap=True) as srv:
        llm = cls(base_url=srv.url, retries=1, backoff=0.01)
        assert llm.chat(MESSAGES) == "second time lucky"
        assert len(srv.requests) == 2


@pytest.mark.parametrize("cls", [OllamaLLM, OpenAILLM])
def test_persistent_500_gives_up_after_the_retries(cls: type) -> None:
    with WireServer(status=500) as srv:
        llm = cls(base_url=srv.url, retries=2, backoff=0.01)
        with pytest.raises(ProviderResponseError, match="HTTP 500 after 3 attempts") as info:
            llm.chat(MESSAGES)
        assert srv.url in str(info.value)
        assert len(srv.requests) == 3


def test_503_is_unavailable() -> None:
    with WireServer(status=503) as srv:
        llm = OllamaLLM(base_url=srv.url, retries=1, backoff=0.01)
        with pytest.raises(ProviderUnavailableError, match="HTTP 503"):
            llm.chat(MESSAGES)
        assert len(srv.requests) == 2


def test_4xx_is_not_retried_and_names_the_model() -> None:
    with WireServer(status=404) as srv:
        llm = OllamaLLM(base_url=srv.url, model="no-such-model", retries=3, backoff=0.01)
        with pytest.raises(ProviderResponseError, match="HTTP 404.*'no-such-model'"):
            llm.chat(MESSAGES)
        assert len(srv.requests) == 1


@pytest.mark.parametrize("cls", [OllamaLLM, OpenAILLM])
def test_malformed_body(cls: type) -> None:
    with WireServer(malformed=True) as srv, pytest.raises(ProviderResponseError, match="malformed JSON"):
        cls(base_url=srv.url, retries=0).chat(MESSAGES)


def test_timeout_is_bounded_and_reported() -> None:
    with WireServer(chat=lambda m: "too late", delay=5.0) as srv:
        llm = OpenAILLM(base_url=srv.url, timeout=0.3, retries=1, backoff=0.05)
        started = time.perf_counter()
        with pytest.raises(ProviderUnavailableError, match=r"timed out after 0.3s") as info:
            llm.chat(MESSAGES)
        elapsed = time.perf_counter() - started
        assert "after 2 attempts" in str(info.value)
        # two attempts of 0.3 s plus one 0.05 s backoff, nowhere near the 5 s delay
        assert elapsed < 3.0
        assert len(srv.requests) == 2


def test_unreachable_server() -> None:
    llm = OllamaLLM(base_url=closed_port(), retries=1, backoff=0.01)
    with pytest.raises(ProviderUnavailableError, match="unreachable after 2 attempts.*refused"):
        llm.chat(MESSAGES)


def test_server_error_in_chat_function_is_a_response_error() -> None:
    def broken(messages: list[dict]) -> str:
        raise ValueError("model crashed")

    with WireServer(chat=broken) as srv, pytest.raises(ProviderResponseError, match="HTTP 400.*model crashed"):
        OllamaLLM(base_url=srv.url).chat(MESSAGES)


# -- validation before anything is sent -------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "kwargs", "message"),
    [
        ([], {}, "messages is empty"),
        ([{"role": "robot", "content": "x"}], {}, "role 'robot'; allowed: system, user, assistant"),
        ([{"role": "user", "content": 3}], {}, r"messages\[0\] content must be a string"),
        ([{"role": "user", "content": "x"}], {"temperature": 2.5}, "temperature must be in 0..2"),
        ([{"role": "user", "content": "x"}], {"max_tokens": 0}, "max_tokens must be a positive integer"),
    ],
)
def test_bad_chat_arguments(messages: list, kwargs: dict, message: str) -> None:
    with WireServer() as srv:
        with pytest.raises(ValidationError, match=message):
            OllamaLLM(base_url=srv.url).chat(messages, **kwargs)
        assert srv.requests == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "localhost:11434"}, "must start with http"),
        ({"model": ""}, "model must not be empty"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"retries": -1}, "retries must be >= 0"),
        ({"backoff": -0.5}, "backoff must be >= 0"),
    ],
)
def test_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        OllamaLLM(**kwargs)


# -- make_llm ---------------------------------------------------------------------------


def test_make_llm_none_and_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LLM_NAMES == ("none", "ollama", "openai")
    assert make_llm() is None  # PLAIT_LLM unset
    assert make_llm("none") is None
    monkeypatch.setenv("PLAIT_LLM", "none")
    assert make_llm() is None
    with pytest.raises(ConfigError, match="unknown LLM 'gpt'; allowed: none, ollama, openai"):
        make_llm("gpt")
    with pytest.raises(ConfigError, match="bad option for LLM 'ollama'"):
        make_llm("ollama", temperature=0.2)


def test_make_llm_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with WireServer(chat=lambda m: "from env") as srv:
        monkeypatch.setenv("PLAIT_LLM", "ollama")
        monkeypatch.setenv("PLAIT_OLLAMA_URL", srv.url)
        monkeypatch.setenv("PLAIT_LLM_MODEL", "llama3.1:8b")
        monkeypatch.setenv("PLAIT_LLM_TIMEOUT", "7.5")
        llm = make_llm()
        assert isinstance(llm, OllamaLLM)
        assert (llm.model, llm.timeout, llm.base_url) == ("llama3.1:8b", 7.5, srv.url)
        assert llm.chat(MESSAGES) == "from env"
        assert srv.requests[0].body["model"] == "llama3.1:8b"
        # explicit options win over the environment
        assert make_llm("ollama", model="other").model == "other"


def test_make_openai_needs_a_key_only_for_openai_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_llm("openai")
    with WireServer(chat=lambda m: "compatible") as srv:
        monkeypatch.setenv("PLAIT_OPENAI_URL", srv.url + "/v1")
        assert make_llm("openai").chat(MESSAGES) == "compatible"  # a local server needs no key
        monkeypatch.setenv("OPENAI_API_KEY", "sk-generic")
        monkeypatch.setenv("PLAIT_OPENAI_API_KEY", "sk-plait")
        make_llm("openai").chat(MESSAGES)
        assert srv.requests[-1].headers["Authorization"] == "Bearer sk-plait"


@pytest.mark.parametrize("value", ["soon", "0", "-1"])
def test_bad_timeout_in_environment(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("PLAIT_LLM_TIMEOUT", value)
    with pytest.raises(ConfigError, match=f"PLAIT_LLM_TIMEOUT must be .*{value!r}"):
        make_llm("ollama")
