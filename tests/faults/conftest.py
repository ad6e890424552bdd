"""Fault tests: a PostgreSQL cluster of their own, stopped, restarted and cut under load."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.faults.cluster import Cluster, available


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if not available():
        pytest.skip("initdb and pg_ctl are not installed")
    made = Cluster()
    try:
        yield made
    finally:
        made.remove()


@pytest.fixture
def fault_store(cluster: Cluster) -> str:
    """A store URL in a fresh schema of the throwaway cluster."""
    return cluster.schema(f"f_{uuid.uuid4().hex[:12]}")
