"""Fixtures of the review tests: the seeded history and its views, per store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from interlock.projections import SqlReadModels, open_views
from interlock.projections.views.reviews import ReviewsView
from tests.review.history import History, seed


@pytest.fixture
def history(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[History]:
    h = seed(store, monkeypatch)
    yield h
    h.app.close()


@pytest.fixture
def models(history: History) -> Iterator[SqlReadModels]:
    read = open_views(history.app)
    read.catch_up()
    yield read
    read.close()


@pytest.fixture
def view(models: SqlReadModels) -> ReviewsView:
    return models.view(ReviewsView)
