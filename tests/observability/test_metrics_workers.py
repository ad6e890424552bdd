"""HTTP request counts under `interlock serve --workers 2` with a shared multiprocess directory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from tests.api.server import ServeProcess

NO_KEYS = {"INTERLOCK_API_KEYS": "", "INTERLOCK_API_KEYS_FILE": ""}
ROUTE = {"method": "GET", "route": "/v1/agents", "status": "200"}


def per_worker(directory: Path) -> dict[str, float]:
    """Each worker's own count of ROUTE, read from its file (counter_<pid>.db)."""
    counts: dict[str, float] = {}
    for path in directory.glob("counter_*.db"):
        for key, value, _, _ in MmapedDict.read_all_values_from_file(str(path)):
            _, sample, labels, _ = json.loads(key)
            if sample == "interlock_http_requests_total" and labels == ROUTE:
                counts[path.name] = value
    return counts


def settled(directory: Path, sent: int) -> dict[str, float]:
    """`per_worker` once it counts `sent` (or after 10 s): a request is counted after its
    answer is sent, so the last one may still be on its way to its worker's file."""
    deadline = time.monotonic() + 10
    while sum((counts := per_worker(directory)).values()) < sent and time.monotonic() < deadline:
        time.sleep(0.01)
    return counts


def scraped(url: str) -> float:
    """ROUTE's count in one scrape, on a fresh connection (any worker may answer it)."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return sum(s.value for family in text_string_to_metric_families(text)
               for s in family.samples
               if s.name == "interlock_http_requests_total" and s.labels == ROUTE)


def test_every_worker_answers_the_count_of_all(sqlite_store: str, tmp_path: Path) -> None:
    shared = tmp_path / "prometheus"
    shared.mkdir()
    server = ServeProcess("--workers", "2", "--store", sqlite_store, workers=2,
                          env={**NO_KEYS, "PROMETHEUS_MULTIPROC_DIR": str(shared)})
    try:
        sent = 0
        while sent < 400 and len(per_worker(shared)) < 2:  # until both workers served some
            for _ in range(10):
                assert httpx.get(server.url + "/v1/agents", timeout=30).status_code == 200
            sent += 10
        counts = settled(shared, sent)
        assert len(counts) == 2 and sum(counts.values()) == sent
        assert [scraped(server.url) for _ in range(6)] == [sent] * 6
    finally:
        server.stop()
