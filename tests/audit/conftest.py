"""Fixtures of the audit tests: an application per store, seeded with the banking flows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from interlock.domain import Interlock
from tests.projections.flows import app_for


@pytest.fixture
def app(store: str) -> Iterator[Interlock]:
    application = app_for(store)
    yield application
    application.close()
