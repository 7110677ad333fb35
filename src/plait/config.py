"""Settings: the only module that reads ``PLAIT_*`` environment variables.

One typed :class:`Settings` (pydantic-settings) holds every variable; CLI flags and
keyword arguments pass through :meth:`Settings.resolve`, where an explicit value wins over
the environment, which wins over the default. A malformed value (``PLAIT_LLM_TIMEOUT=soon``)
is a :class:`~plait.errors.ConfigError` naming the variable, raised when settings are read.

| setting          | env                        | default / meaning                                   |
|------------------|----------------------------|-----------------------------------------------------|
| store            | ``PLAIT_STORE``            | ``./.plait/plait.db``                               |
| collection       | ``PLAIT_COLLECTION``       | ``default``                                         |
| embedder         | ``PLAIT_EMBEDDER``         | the collection's recorded embedder, else the default |
| keys             | ``PLAIT_KEYS``             | a stand-alone key file (default: the keys kept in the store) |
| llm              | ``PLAIT_LLM``              | ``none`` (ollama, openai)                           |
| llm_model        | ``PLAIT_LLM_MODEL``        | the provider's default chat model                   |
| llm_timeout      | ``PLAIT_LLM_TIMEOUT``      | seconds, > 0                                        |
| ollama_url       | ``PLAIT_OLLAMA_URL``       | ``http://127.0.0.1:11434``                          |
| ollama_model     | ``PLAIT_OLLAMA_MODEL``     | ``nomic-embed-text`` (embeddings)                   |
| openai_url       | ``PLAIT_OPENAI_URL``       | ``https://api.openai.com``                          |
| openai_model     | ``PLAIT_OPENAI_MODEL``     | the provider's default embedding model              |
| openai_api_key   | ``PLAIT_OPENAI_API_KEY`` or ``OPENAI_API_KEY`` | (secret)                        |
| embed_timeout    | ``PLAIT_EMBED_TIMEOUT``    | seconds, > 0 (remote embedders)                     |
| embed_languages  | ``PLAIT_EMBED_LANGUAGES``  | a remote model's languages, e.g. ``en,pt``          |
| cross_encoder    | ``PLAIT_CROSS_ENCODER``    | model directory or package for ``rerank=cross-encoder`` |
| backfill_batch   | ``PLAIT_BACKFILL_BATCH``   | 32 chunks embedded and committed at a time          |
| ann_threshold    | ``PLAIT_ANN_THRESHOLD``    | 20 000 vectors before the SQLite store uses ANN     |
| milvus_token     | ``PLAIT_MILVUS_TOKEN``     | (secret) a Milvus server's token                    |
| pg_dsn           | ``PLAIT_PG_DSN``           | tests: a PostgreSQL to use instead of pgserver      |
| log_level        | ``PLAIT_LOG_LEVEL``        | the CLI's log level (``--verbose``/``--quiet`` win) |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from plait.errors import ConfigError

__all__ = ["DEFAULT_COLLECTION", "DEFAULT_STORE", "Settings"]

DEFAULT_STORE = "./.plait/plait.db"
DEFAULT_COLLECTION = "default"


#: Text settings where a blank value means "not set".
_OPTIONAL_TEXT = (
    "embedder", "keys", "llm", "llm_model", "ollama_url", "ollama_model", "openai_url", "openai_model",
    "openai_api_key", "embed_languages", "cross_encoder", "milvus_token", "pg_dsn", "log_level",
)


def _env_name(field: str) -> str:
    return f"PLAIT_{field.upper()}"


class Settings(BaseSettings):
    """Resolved settings: explicit values win over the environment, which wins over defaults."""

    model_config = SettingsConfigDict(
        env_prefix="PLAIT_", env_ignore_empty=True, extra="ignore", frozen=True, populate_by_name=True
    )

    store: str = DEFAULT_STORE
    collection: str = DEFAULT_COLLECTION
    embedder: str | None = None
    keys: str | None = None
    llm: str | None = None
    llm_model: str | None = None
    llm_timeout: float | None = None
    ollama_url: str | None = None
    ollama_model: str | None = None
    openai_url: str | None = None
    openai_model: str | None = None
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("PLAIT_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    embed_timeout: float | None = None
    embed_languages: str | None = None
    cross_encoder: str | None = None
    backfill_batch: int | None = None
    ann_threshold: int | None = None
    milvus_token: SecretStr | None = None
    pg_dsn: str | None = None
    log_level: str | None = None

    @field_validator(*_OPTIONAL_TEXT, mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("llm_timeout", "embed_timeout", mode="before")
    @classmethod
    def _seconds(cls, value: Any, info: ValidationInfo) -> float | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        name = _env_name(str(info.field_name))
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be a number of seconds, got {value!r}") from None
        if not seconds > 0:
            raise ConfigError(f"{name} must be > 0 seconds, got {value!r}")
        return seconds

    @field_validator("backfill_batch", mode="before")
    @classmethod
    def _whole_batch(cls, value: Any) -> int | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"PLAIT_BACKFILL_BATCH must be a whole number, got {value!r}") from None

    @field_validator("ann_threshold", mode="before")
    @classmethod
    def _whole_threshold(cls, value: Any) -> int | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(
                f"PLAIT_ANN_THRESHOLD={value!r} is not an integer: use a count of vectors "
                "(0 = always ANN, a huge number = always exact)"
            ) from None

    @classmethod
    def resolve(cls, **explicit: Any) -> Settings:
        """The settings with ``explicit`` values (CLI flags, keyword arguments) over the
        environment; an explicit None or ``""`` means "not given"."""
        return cls(**{name: value for name, value in explicit.items() if value is not None and value != ""})

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """The settings of ``env`` (a mapping of variable names) alone, ignoring
        ``os.environ``: for code and tests that pass an environment explicitly."""
        data: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            names = [c for c in alias.choices if isinstance(c, str)] if isinstance(alias, AliasChoices) else []
            for key in [*names, _env_name(name)]:
                if key.startswith(("PLAIT_", "OPENAI_")) and env.get(key):
                    data[name] = env[key]
                    break
        return _Given(**data)

    def secret(self, name: str) -> str | None:
        """A secret setting's plain value (``openai_api_key``, ``milvus_token``), or None."""
        value = getattr(self, name)
        return value.get_secret_value() if isinstance(value, SecretStr) else value


class _Given(Settings):
    """Settings from keyword values only (see :meth:`Settings.from_env`)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)
