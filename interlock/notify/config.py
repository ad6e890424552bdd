"""How this process reaches mail and Slack (from the settings; tests build one directly)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NotifyConfig:
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_starttls: bool = True
    smtp_user: str | None = None
    smtp_password: str | None = None
    mail_from: str = "interlock@localhost"
    slack_token: str | None = None
    slack_base_url: str = "https://slack.com/api/"
    slack_signing_secret: str | None = None
    console_url: str = "http://127.0.0.1:8000"
    poll_interval: float = 1.0
    max_attempts: int = 8
