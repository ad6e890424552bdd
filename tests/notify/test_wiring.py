"""The wiring opens the notifier and each channel's callbacks from the settings alone: the
channel registry, not a branch per channel, decides what runs."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from interlock.bootstrap import build_app, notify_config
from interlock.settings import load_settings


def test_every_channel_setting_reaches_the_notifier(tmp_path: Path) -> None:
    settings = load_settings(store=f"sqlite:///{tmp_path / 'i.db'}", smtp_host="mail.test",
                             smtp_password="pw", slack_token="xoxb-1",
                             slack_signing_secret="signing", console_url="https://i.test/ui")
    config = notify_config(settings)
    assert (config.smtp_host, config.smtp_password, config.slack_token) == (
        "mail.test", "pw", "xoxb-1")
    assert (config.slack_signing_secret, config.console_url) == ("signing", "https://i.test")


def test_slack_callbacks_are_taken_only_with_a_signing_secret(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'i.db'}"
    with TestClient(build_app(load_settings(store=store, slack_token="xoxb-1"))) as http:
        assert http.app.state.notifier is not None  # type: ignore[attr-defined]
        unsigned = http.post("/v1/integrations/slack/actions", content=b"payload=%7B%7D")
        assert unsigned.status_code == 404  # no secret to check a callback by
    with TestClient(build_app(load_settings(store=store, slack_token="xoxb-1",
                                            slack_signing_secret="signing"))) as http:
        unsigned = http.post("/v1/integrations/slack/actions", content=b"payload=%7B%7D")
        assert unsigned.status_code == 401


def test_no_channel_configured_runs_no_notifier(tmp_path: Path) -> None:
    with TestClient(build_app(load_settings(store=f"sqlite:///{tmp_path / 'i.db'}"))) as http:
        assert getattr(http.app.state, "notifier", None) is None  # type: ignore[attr-defined]
        assert http.app.state.callbacks == {}  # type: ignore[attr-defined]
