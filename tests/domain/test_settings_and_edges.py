"""Store URLs, a model script that crashes, and the edges of reading a chat."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest

from interlock.domain import FunctionModel, ModelRequest
from interlock.domain.errors import (
    ChatNotFoundError,
    ConfigurationError,
    InvalidRequestError,
    ModelError,
)
from interlock.stores.urls import store_env
from tests.kit import make_app, run, say


def test_store_urls_map_to_eventsourcing_settings() -> None:
    assert store_env("memory://") == {"PERSISTENCE_MODULE": "eventsourcing.popo"}
    assert store_env("sqlite:///var/x%20y.db")["SQLITE_DBNAME"] == "var/x y.db"
    pg = store_env("postgresql://app:s%40cret@db.local:6543/interlock?schema=tenant_a")
    assert (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_HOST"]) == (
        "app",
        "s@cret",
        "db.local",
    )
    assert (pg["POSTGRES_PORT"], pg["POSTGRES_DBNAME"], pg["POSTGRES_SCHEMA"]) == (
        "6543",
        "interlock",
        "tenant_a",
    )
    for bad in ("sqlite://", "redis://x", "interlock.db"):
        with pytest.raises(ConfigurationError):
            store_env(bad)


def test_a_crashing_model_script_is_a_model_error() -> None:
    def script(request: ModelRequest) -> None:
        raise KeyError("missing")

    model = FunctionModel(script, name="broken")  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="broken failed: 'missing'"):
        asyncio.run(model.generate(ModelRequest(messages=[])))


def test_reading_a_chat_refuses_unknown_ids_other_tenants_and_blank_messages() -> None:
    app, _, _ = make_app("memory://", [say("hi")])
    chat = app.start_chat("ops", actor="alice", tenant="acme")
    for reader in (
        lambda: app.chat_events(uuid4()),
        lambda: app.chat_events(chat.id, tenant="globex"),
        lambda: app.get_chat(chat.id, tenant="globex"),
    ):
        with pytest.raises(ChatNotFoundError):
            reader()
    assert len(app.chat_events(chat.id, tenant="acme")) == 1
    with pytest.raises(InvalidRequestError, match="empty"):
        run(app.send(chat.id, "  \n", actor="alice"))
    assert app.get_chat(chat.id).version == 1
