"""The OpenAPI document is usable by a generator and is committed as openapi.json."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from interlock.bootstrap import openapi_document as document
from tests.api.test_error_contract import error_classes

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.json"
REGENERATE = "python -m interlock.bootstrap > openapi.json"


@pytest.fixture(scope="module")
def text() -> str:
    return document()


@pytest.fixture(scope="module")
def schema(text: str) -> dict[str, Any]:
    return dict(json.loads(text))


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m.upper(), p, op) for p, ops in schema["paths"].items() for m, op in ops.items()]


def test_the_committed_schema_is_the_apps(text: str) -> None:
    assert COMMITTED.read_text() == text, f"openapi.json drifted; regenerate: {REGENERATE}"


def test_operation_ids_are_explicit_unique_and_tagged(schema: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in _operations(schema)]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z][A-Za-z0-9]*", i) for i in ids), ids
    assert {"createChat", "sendMessage", "listInterrupts"} <= set(ids)
    assert all(op.get("tags") for _, _, op in _operations(schema))


def test_the_error_code_is_an_enum_of_every_code(schema: dict[str, Any]) -> None:
    enum = schema["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["enum"]
    assert set(enum) == {c.code for c in error_classes() if hasattr(c, "code")}


def test_every_error_status_is_documented(schema: dict[str, Any]) -> None:
    for method, path, op in _operations(schema):
        statuses = set(op["responses"])
        assert "500" in statuses, (method, path)
        if "requestBody" in op:
            assert "413" in statuses, (method, path)
        if path.startswith("/v1/"):
            assert {"401", "403", "422"} <= statuses, (method, path)
    by_id = {op["operationId"]: op for _, _, op in _operations(schema)}
    assert "503" in by_id["listInterrupts"]["responses"]  # waits for the read models
    assert "503" not in by_id["getChat"]["responses"]  # reads the log itself
    assert "502" in by_id["sendMessage"]["responses"]


def test_the_api_version_is_the_packages(schema: dict[str, Any]) -> None:
    assert schema["info"]["version"] == version("interlock")
