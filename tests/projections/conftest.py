"""Fixtures of the read-side tests: an application and its read models per store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels, open_read_models, open_views
from tests.projections.flows import app_for


@pytest.fixture
def app(store: str) -> Iterator[Interlock]:
    application = app_for(store)
    yield application
    application.close()


@pytest.fixture
def models(app: Interlock, store: str) -> Iterator[SqlReadModels]:
    read = open_read_models(app)
    yield read
    read.close()


@pytest.fixture
def views(app: Interlock) -> Iterator[SqlReadModels]:
    """The views, kept current only when a test catches them up."""
    read = open_views(app)
    yield read
    read.close()


def dumps(models: SqlReadModels) -> list[list[dict[str, object]]]:
    return [r.view.dump() for r in models.runners]


def rebuilt(app: Interlock) -> list[list[dict[str, object]]]:
    """What every view holds when rebuilt from the whole log, in tables of their own (the
    live views' runner, if any, is left alone: rebuilding its tables raced it)."""
    fresh = open_views(app, prefix=f"rebuilt_{uuid.uuid4().hex[:8]}")
    try:
        for runner in fresh.runners:
            runner.rebuild()
        return dumps(fresh)
    finally:
        fresh.close()
