"""docs/ha.md's read-replica settings as written: the service reads them as the page says
(no cluster needed)."""

from __future__ import annotations

import re
import shlex

import pytest

from interlock.projections.backends.replicas import open_replicas
from interlock.settings import load_settings
from tests.ha.cluster import DOC


def test_the_replica_settings_name_two_standbys_of_the_store(
        monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = re.findall(r"```env\n(.*?)```", DOC.read_text(), re.DOTALL)
    for line in block.splitlines():
        name, _, value = line.partition("=")
        (value,) = shlex.split(value)
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.read_replica_wait == 1.0
    replicas = open_replicas(settings.read_replicas, settings.store, settings.read_replica_wait)
    assert [r.name for r in replicas.replicas] == [
        "postgresql://interlock@pg2:5432/interlock", "postgresql://interlock@pg3:5432/interlock"]
    assert replicas.wait == 1.0
