"""One typed settings object reads every ``PLAIT_*`` variable (issue 19.5), and the CLI's
``--verbose``/``--quiet`` show or hide the library's log."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import plait
from plait.cli import app
from plait.config import Settings
from plait.errors import ConfigError
from plait.service import Plait
from plait.stores.ann import resolve_ann_threshold

SRC = Path(plait.__file__).parent
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import os

    for name in list(os.environ):
        if name.startswith("PLAIT_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    logger = logging.getLogger("plait")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers  # the CLI configured the plait logger: undo it for later tests
    logger.setLevel(level)


def test_every_variable_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "PLAIT_STORE": "/tmp/x.db", "PLAIT_COLLECTION": "docs", "PLAIT_EMBEDDER": "fake", "PLAIT_KEYS": "k.db",
        "PLAIT_LLM": "ollama", "PLAIT_LLM_MODEL": "m", "PLAIT_LLM_TIMEOUT": "7.5", "PLAIT_OLLAMA_URL": "http://o",
        "PLAIT_OLLAMA_MODEL": "om", "PLAIT_OPENAI_URL": "http://a", "PLAIT_OPENAI_MODEL": "am",
        "OPENAI_API_KEY": "sk-generic", "PLAIT_EMBED_TIMEOUT": "2", "PLAIT_EMBED_LANGUAGES": "en,pt",
        "PLAIT_CROSS_ENCODER": "ce", "PLAIT_BACKFILL_BATCH": "4", "PLAIT_ANN_THRESHOLD": " 500 ",
        "PLAIT_MILVUS_TOKEN": "tok", "PLAIT_PG_DSN": "postgresql://x", "PLAIT_LOG_LEVEL": "info",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    s = Settings.resolve()
    assert (s.store, s.collection, s.embedder, s.keys, s.llm, s.llm_model) == ("/tmp/x.db", "docs", "fake", "k.db", "ollama", "m")
    assert (s.llm_timeout, s.embed_timeout, s.backfill_batch, s.ann_threshold) == (7.5, 2.0, 4, 500)
    assert (s.ollama_url, s.ollama_model, s.openai_url, s.openai_model) == ("http://o", "om", "http://a", "am")
    assert (s.embed_languages, s.cross_encoder, s.pg_dsn, s.log_level) == ("en,pt", "ce", "postgresql://x", "info")
    assert s.secret("openai_api_key") == "sk-generic" and s.secret("milvus_token") == "tok"
    assert "sk-generic" not in repr(s) and "tok'" not in repr(s)  # secrets are masked
    monkeypatch.setenv("PLAIT_OPENAI_API_KEY", "sk-plait")
    assert Settings.resolve().secret("openai_api_key") == "sk-plait"  # the PLAIT_ name wins
    # explicit values (CLI flags, keyword arguments) win; None and "" mean "not given"
    s = Settings.resolve(store="mine.db", collection="", embedder=None)
    assert (s.store, s.collection, s.embedder) == ("mine.db", "docs", "fake")


def test_defaults_and_blank_values(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings.resolve()
    assert (s.store, s.collection, s.embedder, s.backfill_batch, s.llm_timeout) == (
        "./.plait/plait.db", "default", None, None, None
    )
    monkeypatch.setenv("PLAIT_KEYS", "")
    monkeypatch.setenv("PLAIT_BACKFILL_BATCH", "   ")
    monkeypatch.setenv("PLAIT_LLM", "  ")
    s = Settings.resolve()
    assert (s.keys, s.backfill_batch, s.llm) == (None, None, None)


def test_an_explicit_environment_ignores_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_ANN_THRESHOLD", "9")
    assert Settings.from_env({}).ann_threshold is None
    assert Settings.from_env({"PLAIT_ANN_THRESHOLD": "500"}).ann_threshold == 500
    assert resolve_ann_threshold(None) == 9
    assert resolve_ann_threshold(None, {}) == 20_000


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PLAIT_BACKFILL_BATCH", "lots", "PLAIT_BACKFILL_BATCH must be a whole number, got 'lots'"),
        ("PLAIT_LLM_TIMEOUT", "soon", "PLAIT_LLM_TIMEOUT must be a number of seconds, got 'soon'"),
        ("PLAIT_EMBED_TIMEOUT", "-1", "PLAIT_EMBED_TIMEOUT must be > 0 seconds, got '-1'"),
        ("PLAIT_ANN_THRESHOLD", "many", "PLAIT_ANN_THRESHOLD='many' is not an integer"),
    ],
)
def test_a_malformed_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.resolve()
    with pytest.raises(ConfigError, match=re.escape(message)):
        Plait(str(tmp_path / "p.db"), embedder="none")


def test_only_config_reads_plait_variables() -> None:
    fields = {f"PLAIT_{name.upper()}" for name in Settings.model_fields}
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "config.py":
            assert not re.search(r"(environ|getenv)\b[^\n]*[\"']PLAIT_", text), f"{path} reads PLAIT_* itself"
            assert "envvar=" not in text, f"{path}: a CLI option reads the environment itself"
        for name in set(re.findall(r"PLAIT_[A-Z0-9_]*[A-Z0-9]", text)):
            assert name in fields, f"{path} mentions {name}, which is no Settings field"


def test_verbose_and_quiet_show_and_hide_the_log(tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    command = ["index", str(EXAMPLES), "--store", store, "--embedder", "fake", "--json"]
    loud = runner.invoke(app, ["-v", *command])
    assert loud.exit_code == 0, loud.output
    report = json.loads(loud.stdout)  # the log goes to stderr, never into the JSON
    assert f"INFO plait.ingest: indexed 'default': {report['sourcesIndexed']}/{report['sourcesSeen']} sources" in loud.stderr
    debug = runner.invoke(app, ["-vv", "search", "ERR-4012", "--store", store, "--json"])
    assert debug.exit_code == 0 and json.loads(debug.stdout)["hits"]
    silent = runner.invoke(app, command)
    assert silent.exit_code == 0 and "plait.ingest" not in silent.stderr
    quiet = runner.invoke(app, ["--quiet", *command])
    assert quiet.exit_code == 0 and quiet.stderr.count("INFO") == 0
    assert logging.getLogger("plait").level == logging.ERROR
    bad = runner.invoke(app, command, env={"PLAIT_LOG_LEVEL": "chatty"})
    assert bad.exit_code == 1
    assert "PLAIT_LOG_LEVEL must be one of debug, info, warning, error, got 'chatty'" in bad.output
    assert "Traceback" not in bad.output
