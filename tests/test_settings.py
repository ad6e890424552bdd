"""Settings are read once at the edge: INTERLOCK_* variables, secret files, flags on top."""

from __future__ import annotations

import json
import logging
import re
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest
from eventsourcing.popo import POPOFactory

from interlock.bootstrap import auth_from, build_service, check_serving, notify_config
from interlock.cli.main import main
from interlock.domain import Agent, Interlock
from interlock.domain.chat.state import ToolCall
from interlock.domain.errors import ConfigurationError
from interlock.notify.messages import facts
from interlock.settings import Settings, env_name, load_settings

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEYS = {"key-ann": {"id": "ann", "tenant": "t", "roles": ["auditor"]}}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No INTERLOCK_* setting from the machine; an empty secrets directory of our own."""
    for name in Settings.model_fields:
        monkeypatch.delenv(env_name(name), raising=False)
    monkeypatch.delenv("INTERLOCK_KEYS", raising=False)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    monkeypatch.setenv("INTERLOCK_SECRETS_DIR", str(secrets))
    return secrets


def test_variables_are_read_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_STORE", "memory://")
    monkeypatch.setenv("INTERLOCK_PORT", "9001")
    monkeypatch.setenv("INTERLOCK_WORKERS", "3")
    settings = load_settings(port=9002, host=None)  # None: the flag was not given
    assert (settings.store, settings.port, settings.workers) == ("memory://", 9002, 3)
    assert settings.host == "127.0.0.1"


def test_secret_and_api_keys_come_from_the_secrets_directory(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean_env / "interlock_secret").write_text("from-a-file\n")
    (clean_env / "interlock_api_keys").write_text(json.dumps(KEYS))
    settings = load_settings()
    assert settings.secret_bytes() == b"from-a-file"
    assert auth_from(settings).authenticate("Bearer key-ann", None).id == "ann"
    assert "from-a-file" not in repr(settings)  # secrets do not leak into logs
    monkeypatch.setenv("INTERLOCK_SECRET", "from-the-environment")
    assert load_settings().secret_bytes() == b"from-the-environment"


def test_a_keys_file_wins_over_keys_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERLOCK_API_KEYS", json.dumps(KEYS))
    keys_file = tmp_path / "keys.toml"
    keys_file.write_text('[key-bo]\nid = "bo"\nroles = ["admin"]\n')
    keys_file.chmod(0o600)
    auth = auth_from(load_settings(api_keys_file=keys_file))
    assert auth.authenticate("Bearer key-bo", None).id == "bo"
    assert auth_from(load_settings()).authenticate("Bearer key-ann", None).id == "ann"


def test_settings_round_trip_through_the_environment_of_a_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    given = load_settings(store="memory://", secret="s", api_keys=json.dumps(KEYS), workers=2)
    for name, value in given.to_env().items():
        monkeypatch.setenv(name, value)
    assert load_settings() == given


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("INTERLOCK_PORT", "eighty", "INTERLOCK_PORT: Input should be a valid integer"),
        ("INTERLOCK_WORKERS", "0", "INTERLOCK_WORKERS: Input should be greater than or equal"),
        ("INTERLOCK_KEYS", "keys.json", "INTERLOCK_KEYS is no longer read: use "
                                        "INTERLOCK_API_KEYS_FILE"),
        ("INTERLOCK_SECRETS_DIR", "/nonexistent/dir", "is not a directory"),
        ("INTERLOCK_GC_THRESHOLD", "-1", "INTERLOCK_GC_THRESHOLD: Input should be greater"),
    ],
)
def test_bad_settings_are_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=says):
        load_settings()


def test_the_domain_reads_no_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INTERLOCK_STORE", f"sqlite:///{tmp_path / 'no.db'}")
    monkeypatch.setenv("INTERLOCK_SECRET", "ignored-by-the-domain")
    app = Interlock()
    assert isinstance(app.factory, POPOFactory)
    assert app.sealer.digest(None, {}) == Interlock(secret=None).sealer.digest(None, {})
    assert not (tmp_path / "no.db").exists()


def test_a_model_string_without_a_resolver_is_a_configuration_error() -> None:
    agent = Agent(name="a", system="", tools=[], model="openai:gpt-4.1-mini")
    with pytest.raises(ConfigurationError, match="no provider resolver"):
        Interlock([agent])


def test_a_store_without_a_secret_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="interlock"):
        build_service("memory://").close()
        build_service(f"sqlite:///{tmp_path / 'a.db'}", secret=b"k").close()
        assert caplog.records == []
        build_service(f"sqlite:///{tmp_path / 'b.db'}").close()
    assert [r.getMessage()[:28] for r in caplog.records] == ["INTERLOCK_SECRET is not set:"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--store", "bogus://x"], "interlock serve: unknown store 'bogus://x'"),
        (["--agents", "nowhere"], "interlock serve: agents must look like module:attribute"),
        (["--agents", "json:dumps"], "interlock serve: json:dumps is not an Agent"),
        (["--agents", "no_such_module:X"], "interlock serve: cannot load agents"),
        (["--host", "0.0.0.0"], "interlock serve: refusing to serve 0.0.0.0 without API keys"),
        (["--workers", "0"], "interlock serve: bad settings: INTERLOCK_WORKERS"),
    ],
)
def test_serve_refuses_bad_settings_in_one_line_before_starting(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    assert main(["serve", "--store", "memory://", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(says) and "\n" not in err


def test_serve_help_names_each_variable_and_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, variable, default in [
        ("--agents", "INTERLOCK_AGENTS", "interlock.examples.banking:AGENTS"),
        ("--store", "INTERLOCK_STORE", "sqlite:///interlock.db"),
        ("--host", "INTERLOCK_HOST", "127.0.0.1"),
        ("--port", "INTERLOCK_PORT", "8000"),
        ("--workers", "INTERLOCK_WORKERS", "1"),
        ("--keys", "INTERLOCK_API_KEYS_FILE", "none"),
    ]:
        assert flag in text and f"({variable}; default: {default})" in text
    assert "INTERLOCK_SECRETS_DIR" in text


def test_serve_refuses_a_model_no_provider_can_build(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "remote_agents.py").write_text(
        "from interlock import Agent\n"
        "AGENTS = [Agent(name='a', system='', tools=[], model='nosuch:model')]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["serve", "--store", "memory://", "--agents", "remote_agents:AGENTS"]) == 2
    assert capsys.readouterr().err.startswith(
        "interlock serve: unknown model provider 'nosuch' in 'nosuch:model'"
    )


def test_serve_refuses_api_keys_with_the_dev_secret(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(KEYS))
    keys.chmod(0o600)  # a file others can read is refused before the secret is looked at
    store = f"sqlite:///{tmp_path / 'a.db'}"
    assert main(["serve", "--store", store, "--keys", str(keys)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("interlock serve: refusing to serve with API keys and the public dev "
                          "secret") and "\n" not in err
    allowed = load_settings(store=store, api_keys_file=keys, allow_dev_secret=True)
    check_serving(allowed)  # the flag allows it (development)
    check_serving(load_settings(store=store, api_keys_file=keys, secret="s" * 32))
    check_serving(load_settings(store=store))  # dev mode, loopback: no keys, no users


@pytest.mark.parametrize(("secret", "says"), [
    ("interlock-dev-secret-change-me", "INTERLOCK_SECRET is the public dev secret"),
    ("x", "INTERLOCK_SECRET has 1 bytes, fewer than 32"),
    ("s" * 31, "INTERLOCK_SECRET has 31 bytes, fewer than 32"),
])
def test_serve_refuses_api_keys_with_a_public_or_short_secret(
    tmp_path: Path, secret: str, says: str
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(KEYS))
    keys.chmod(0o600)
    store = f"sqlite:///{tmp_path / 'a.db'}"
    with pytest.raises(ConfigurationError, match="refusing to serve with API keys") as refused:
        check_serving(load_settings(store=store, api_keys_file=keys, secret=secret))
    assert says in str(refused.value)
    check_serving(load_settings(store=store, secret=secret))  # dev mode: no users to protect


def test_allow_dev_secret_is_also_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_ALLOW_DEV_SECRET", "1")
    assert load_settings().allow_dev_secret is True


ROOT = Path(__file__).resolve().parents[1]
RETIRED_ONLY = {"INTERLOCK_KEYS"}  # refused with its replacements (the text below the table)


def test_every_variable_the_code_reads_is_in_the_configuration_table() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    table = set(re.findall(r"^\| `(INTERLOCK_[A-Z0-9_]+)` \|", doc, re.MULTILINE))
    fields = {env_name(name) for name in Settings.model_fields}
    sources = {name for folder in ("interlock", "domain", "api", "projections")
               for path in (ROOT / folder).rglob("*.py")
               for name in re.findall(r"INTERLOCK_[A-Z0-9_]+", path.read_text())}
    assert fields - table == set(), "Settings fields missing from docs/configuration.md"
    assert sources - table - RETIRED_ONLY == set(), "variables read but not in the table"
    assert table - fields - sources == set(), "rows for variables nothing reads"


@pytest.mark.parametrize("given", [
    "https://interlock.example.com", "https://interlock.example.com/",
    "https://interlock.example.com/ui", "https://interlock.example.com/ui/"])
def test_the_console_url_is_the_servers_base_with_or_without_ui(given: str) -> None:
    config = notify_config(load_settings(console_url=given))
    call = ToolCall(ref="r1", name="pay", input={}, turn=1, requested_at=NOW, requested_by="a")
    link = facts(call, "c1", "acme", config.console_url)["link"]
    assert link == "https://interlock.example.com/ui/chats/c1/interrupts/r1"


def test_the_console_url_follows_host_and_port_unless_given() -> None:
    assert notify_config(load_settings(port=9002)).console_url == "http://127.0.0.1:9002"
    assert load_settings(host="::1", port=9003).console_base() == "http://[::1]:9003"
    assert load_settings(host="0.0.0.0").console_base() == f"http://{socket.gethostname()}:8000"
    behind = load_settings(port=9002, console_url="https://approve.bank.example/interlock/ui")
    assert behind.console_base() == "https://approve.bank.example/interlock"
