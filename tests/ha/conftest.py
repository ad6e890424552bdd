"""HA tests: a Patroni cluster of their own (etcd and two PostgreSQL nodes), from nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.ha.cluster import PatroniCluster, missing


@pytest.fixture(scope="module")
def patroni() -> Iterator[PatroniCluster]:
    lacking = missing()
    if lacking is not None and os.environ.get("CI"):  # .ci/run installs both: never skip there
        pytest.fail(f"{lacking}: .ci/run should have installed it")
    if lacking is not None:
        pytest.skip(f"{lacking} (.ci/run installs it)")
    made = PatroniCluster()
    try:
        made.start()
        yield made
    finally:
        made.remove()
