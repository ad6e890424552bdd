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
from interlock.notify import slack_actions
from interlock.notify.channels import slack as slack_channel
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
    used = Path(slack_channel.__file__).read_text() + Path(slack_actions.__file__).read_text()
    for method in ("chat_postMessage", "chat_update", "views_open"):  # what the scopes cover
        assert f".{method}(" in used
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # where the DMs land


def test_every_route_and_setting_the_page_names_exists(tmp_path: Path) -> None:
    text = DOC.read_text()
    routes = _routes(tmp_path)
    named = set(re.findall(r"`(?:(GET|PUT|POST|DELETE) )?(/v1/[^` ]+)`", text))
    assert named

    def served(method: str | None, path: str) -> bool:
        """A route answers `path` (its parameters filled in), with `method` if named."""
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        return any((method is None or m == method) and re.fullmatch(
            re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(p)), concrete) for m, p in routes)

    for method, path in named:  # a channel's kind in braces stands for each channel
        for kind in ("email", "slack"):
            assert served(method or None, path.replace("{email|slack}", kind).replace(
                "{kind}", kind)), (method, path)
    assert ("POST", ACTIONS) in routes
    settings = {env_name(f) for f in Settings.model_fields}
    for name in set(re.findall(r"INTERLOCK_[A-Z_]+", text)):
        assert name in settings, name
