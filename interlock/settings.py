"""Interlock's configuration, read once at the edge: INTERLOCK_* variables and secret files."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from interlock.domain.application import DEV_SECRET
from interlock.domain.errors import ConfigurationError
from interlock.domain.limits import Limits
from interlock.domain.storage.keys import Keyring
from interlock.process import DEFAULT_GC_THRESHOLD

PREFIX = "INTERLOCK_"
SECRETS_DIR_ENV = "INTERLOCK_SECRETS_DIR"
DEFAULT_SECRETS_DIR = "/run/secrets"
RETIRED = {"INTERLOCK_KEYS": "INTERLOCK_API_KEYS_FILE (a file) or INTERLOCK_API_KEYS (JSON)"}


class Settings(BaseSettings):
    """Every setting of the service; each field is also the variable INTERLOCK_<NAME>.

    `secret` and `api_keys` may instead be files named interlock_secret and
    interlock_api_keys in the secrets directory (INTERLOCK_SECRETS_DIR, else /run/secrets).
    """

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_ignore_empty=True, extra="forbid", frozen=True
    )

    store: str = Field("sqlite:///interlock.db", description="where events and views live")
    agents: str = Field("interlock.examples.banking:AGENTS",
                        description="module:attribute holding an Agent or a list of them")
    secret: SecretStr | None = Field(None, description="HMAC key of the event chain")
    old_secrets: SecretStr | None = Field(
        None, description="older chain keys, comma-separated, each SECRET@RETIRED-AT (ISO-8601"
                          " with zone): they verify only what they sealed until then"
    )
    api_keys: SecretStr | None = Field(None, description="API keys as JSON text")
    api_keys_file: Path | None = Field(None, description="API keys file, JSON or TOML")
    dev_principals: str | None = Field(
        None, max_length=2000, description="dev mode's named principals to act as, e.g. "
        "alice,tina:treasury,tom:treasury (loopback only; not with API keys)")
    host: str = Field("127.0.0.1", description="bind address")
    port: int = Field(8000, ge=0, le=65535, description="port; 0 picks a free one")
    workers: int = Field(1, ge=1, le=64, description="server processes on the one store")
    log_format: Literal["text", "json"] = Field("text", description="text, or json (a line each)")
    tracing: bool = Field(False, description="OpenTelemetry traces (the otel extra)")
    allow_dev_secret: bool = Field(
        False, description="serve with API keys but the public dev HMAC secret (development)")
    read_timeout: float = Field(
        30.0, gt=0, le=3600, description="seconds a client has to send a whole request")
    keep_alive_timeout: float = Field(
        5.0, gt=0, le=3600, description="seconds an idle connection stays open")
    limit_concurrency: int = Field(
        1000, ge=1, description="connections and tasks per worker before answering 503")
    store_deadline: float = Field(
        3.0, gt=0, le=60,
        description="seconds a request's store work may wait for PostgreSQL before a 503")
    read_replicas: str = Field(
        "", description="libpq URLs of hot standbys of the PostgreSQL store, space-separated:"
                        " the read side's queries read there once current (docs/ha.md)")
    read_replica_wait: float = Field(
        1.0, ge=0, le=30, description="seconds a read waits for a replica to show the"
                                      " request's position before it reads on the primary")
    gc_threshold: int = Field(
        DEFAULT_GC_THRESHOLD, ge=0,
        description="allocations between garbage-collector passes; 0: Python's default (700)")
    webhook_allow_hosts: str = Field(
        "", description="comma-separated addresses, CIDRs and host names webhooks may be sent"
                        " to although not public (e.g. 127.0.0.1 or 10.0.0.0/8)")
    review_second_signer: str = Field(
        "", description="tenants whose reviews need a second, distinct auditor's sign-off before"
                        " close: comma-separated names, or * for every tenant")
    webhook_retention_days: float = Field(
        30.0, gt=0, description="days delivered and failed webhook deliveries are kept")
    mcp_headers: SecretStr | None = Field(
        None, description='HTTP headers per MCP server URL as JSON: {"<url>": {"<name>": "<v>"}}')
    mcp_timeout: float = Field(
        30.0, gt=0, le=3600, description="seconds an MCP tool call may take")
    mcp_connect_timeout: float = Field(
        30.0, gt=0, le=3600, description="seconds connecting to an MCP server may take")
    mcp_max_answer_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="bytes one message from an MCP server may hold;"
                                              " a larger answer fails its call, unread")
    mcp_pins: str = Field(
        "mcp-pins.json", description="the file of pinned MCP servers (interlock mcp pin)")
    smtp_host: str | None = Field(None, description="SMTP server that mails held calls")
    smtp_port: int = Field(587, ge=1, le=65535, description="SMTP port")
    smtp_starttls: bool = Field(True, description="upgrade the SMTP connection with STARTTLS")
    smtp_user: str | None = Field(None, description="SMTP user (with smtp_password)")
    smtp_password: SecretStr | None = Field(None, description="SMTP password")
    mail_from: str = Field("interlock@localhost", description="the From of notification mail")
    slack_token: SecretStr | None = Field(None, description="Slack bot token (xoxb-...)")
    slack_base_url: str = Field("https://slack.com/api/", description="Slack's Web API URL")
    slack_signing_secret: SecretStr | None = Field(
        None, description="verifies Slack's interactive callbacks (from the Slack app)")
    cors_origins: str = Field(
        "", description="comma-separated origins browsers may call the API from (e.g. "
                        "http://localhost:3000 for agent-chat-ui); default none")
    console_url: str | None = Field(
        None, description="the server's base URL as its users reach it, for links in messages"
                          " (a trailing /ui is dropped; default: http://host:port served on)")
    forks_per_minute: int = Field(
        30, ge=0, description="forks of one chat a minute, per server process (0: no limit)")
    max_metadata_bytes: int = Field(
        65536, ge=0, description="bytes of JSON a chat's or thread's metadata may hold (0: any)")
    max_metadata_keys: int = Field(
        1000, ge=0, description="keys, at any depth, a chat's or thread's metadata may hold"
                                " (0: any)")
    history_bytes: int = Field(
        4 << 20, ge=65536, description="bytes of states one Agent Protocol history page may"
                                       " answer")
    checkpoint_key: Path | None = Field(
        None, description="the checkpoint private key file (interlock audit keygen): the "
                          "server signs reviews' evidence packs with it")

    @model_validator(mode="after")
    def _no_retired_variables(self) -> Settings:
        for name, instead in RETIRED.items():
            if os.environ.get(name):
                raise ValueError(f"{name} is no longer read: use {instead}")
        return self

    def limits(self) -> Limits:
        """The bounds on what one request may make the service keep, copy or read."""
        return Limits(forks_per_minute=self.forks_per_minute,
                      metadata_bytes=self.max_metadata_bytes,
                      metadata_keys=self.max_metadata_keys, history_bytes=self.history_bytes)

    def cors_origin_list(self) -> list[str]:
        """The origins browsers may call the API from (none by default)."""
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]

    def second_signer_tenants(self) -> frozenset[str]:
        """The tenants whose reviews two distinct auditors sign off (`*`: every tenant)."""
        return frozenset(t.strip() for t in self.review_second_signer.split(",") if t.strip())

    @field_validator("console_url")
    @classmethod
    def _base_url(cls, url: str | None) -> str | None:
        """The server's base: links add /ui/..., so the console's own address is taken too."""
        if url is None:
            return None
        base = url.strip().rstrip("/")
        return base.removesuffix("/ui").rstrip("/")

    def console_base(self) -> str:
        """The base URL links in messages start with: the configured one, else where this
        server listens (a wildcard address is named by this machine's host name)."""
        if self.console_url:
            return self.console_url
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    def secret_bytes(self) -> bytes | None:
        """The event-chain key, if one is configured."""
        return self.secret.get_secret_value().encode() if self.secret else None

    def keyring(self) -> Keyring | None:
        """The active chain key and the older ones that still verify; None if none is set."""
        if self.secret is None and self.old_secrets is None:
            return None
        old = self.old_secrets.get_secret_value() if self.old_secrets else ""
        ring = Keyring.parse(self.secret_bytes() or DEV_SECRET, old)
        if ring.untimed():
            raise ConfigurationError(
                f"{env_name('old_secrets')}: key {ring.untimed()[0]} has no retirement time: "
                "write it as SECRET@TIME, TIME being when it stopped sealing (ISO-8601 with "
                "zone, e.g. 2026-12-02T14:00:00Z); it then verifies only what it sealed before")
        return ring

    def to_env(self) -> dict[str, str]:
        """These settings as INTERLOCK_* variables, for worker processes to read back."""
        env: dict[str, str] = {}
        for name, value in self.model_dump().items():
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            if value is not None:
                env[PREFIX + name.upper()] = str(value)
        return env


def env_name(field: str) -> str:
    """The variable a setting is read from."""
    return PREFIX + field.upper()


def flag_help(text: str, field: str) -> str:
    """A command-line flag's help: what it is, the variable it overrides, the default."""
    shown = Settings.model_fields[field].default
    return f"{text} ({env_name(field)}; default: {'none' if shown is None else shown})"


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment and the secrets directory; `overrides` (flags) win.

    A `None` override means "not given". Bad values raise ConfigurationError in one line.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given, **_secrets_dir())
    except ValidationError as exc:
        raise ConfigurationError(f"bad settings: {_one_line(exc)}") from None


def _secrets_dir() -> dict[str, Any]:
    chosen = os.environ.get(SECRETS_DIR_ENV)
    if chosen and not Path(chosen).is_dir():
        raise ConfigurationError(f"{SECRETS_DIR_ENV}={chosen!r} is not a directory")
    path = chosen or DEFAULT_SECRETS_DIR
    return {"_secrets_dir": path} if Path(path).is_dir() else {}


def _one_line(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{env_name(where)}: {message}" if where else message)
    return "; ".join(parts)
