"""A serving process tunes Python's garbage collector once its code is loaded."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from interlock import process
from interlock.bootstrap import build_app
from interlock.process import tune_gc
from interlock.settings import load_settings


@pytest.fixture(autouse=True)
def _restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    before = gc.get_threshold()
    monkeypatch.setattr(process, "_frozen", False)
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_tuning_freezes_what_is_loaded_and_collects_less_often() -> None:
    gc.set_threshold(700, 10, 10)
    tune_gc(5000)
    assert gc.get_threshold() == (5000, 10, 10)
    assert gc.get_freeze_count() > 1000  # modules, classes, validators: out of the collector's way


def test_a_second_tuning_freezes_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    # Counted by calls, not by gc.get_freeze_count(): that count also falls whenever another
    # thread (a server left by an earlier test) frees an object that was frozen.
    freezes: list[None] = []
    real_freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (freezes.append(None), real_freeze())[1])
    tune_gc(5000)
    tune_gc(6000)
    assert len(freezes) == 1 and gc.get_threshold()[0] == 6000


def test_zero_leaves_pythons_defaults() -> None:
    gc.set_threshold(700, 10, 10)
    frozen = gc.get_freeze_count()
    tune_gc(0)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == frozen


def test_the_app_a_worker_builds_applies_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_GC_THRESHOLD", "12345")
    with TestClient(build_app(load_settings(store="memory://"))) as client:
        assert gc.get_threshold()[0] == 12345
        assert client.get("/healthz").status_code == 200
