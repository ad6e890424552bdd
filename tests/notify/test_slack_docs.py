"""docs/notifications.md sets Slack up from the page alone: its manifest, routes, scopes and
settings are the ones the code uses, so a renamed route or setting fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from interlock.api.app import make_app
from interlock.bootstrap import build_service
from interlock.examples.banking import AGENTS
from interlock.notify import notifier, slack_actions
from interlock.projections import open_read_models
from interlock.settings import Settings, env_name

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "notifications.md"
ACTIONS = "/v1/integrations/slack/actions"


def _manifest() -> dict[str, Any]:
    text = DOC.read_text()
    after = text.split("<!-- run: tests/notify/test_slack_docs.py -->", 1)[1]
    body = re.search(r"```yaml\n(.*?)\n\s*```", after, re.S)
    assert body is not None
    found: dict[str, Any] = yaml.safe_load(body[1])
    return found


def _routes(tmp_path: Path) -> set[tuple[str, str]]:
    service = build_service(f"sqlite:///{tmp_path / 'i.db'}", AGENTS)
    views = open_read_models(service)
    try:
        paths: dict[str, dict[str, Any]] = make_app(service, views).openapi()["paths"]
        return {(m.upper(), p) for p, ops in paths.items() for m in ops}
    finally:
        views.close()
        service.close()


def test_the_manifest_names_our_callback_command_and_only_the_scopes_we_use() -> None:
    m = _manifest()
    [command] = m["features"]["slash_commands"]
    assert command["command"] == slack_actions.COMMAND
    for url in (command["url"], m["settings"]["interactivity"]["request_url"]):
        assert url.startswith("https://") and url.endswith(ACTIONS)
    assert m["settings"]["interactivity"]["is_enabled"] is True
    assert sorted(m["oauth_config"]["scopes"]["bot"]) == ["chat:write", "commands"]
    used = Path(notifier.__file__).read_text() + Path(slack_actions.__file__).read_text()
    for method in ("chat_postMessage", "chat_update", "views_open"):  # what the scopes cover
        assert f".{method}(" in used
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # where the DMs land


def test_every_route_and_setting_the_page_names_exists(tmp_path: Path) -> None:
    text = DOC.read_text()
    routes = _routes(tmp_path)
    paths = {p for _, p in routes}
    named = set(re.findall(r"`(?:(GET|PUT|POST|DELETE) )?(/v1/[^` ]+)`", text))
    assert named
    for method, path in named:
        shape = re.sub(r"\{[^}]+\}", "{}", path)
        if "{email|slack}" in path:
            shape = path.replace("{email|slack}", "{}")
        known = {re.sub(r"\{[^}]+\}", "{}", p) for p in paths}
        assert shape in known, path
        if method:
            assert any(m == method and re.sub(r"\{[^}]+\}", "{}", p) == shape
                       for m, p in routes), (method, path)
    assert ("POST", ACTIONS) in routes
    settings = {env_name(f) for f in Settings.model_fields}
    for name in set(re.findall(r"INTERLOCK_[A-Z_]+", text)):
        assert name in settings, name
