"""Every error class answers its own status and code, the client knows it, and the docs list it.

Adding an InterlockError anywhere in the package without a status, a client class or a row
in docs/http.md fails here.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import interlock
from interlock.api import errors as api_errors
from interlock.client import _errors as client_errors
from interlock.domain.errors import (
    ChatNotFoundError,
    ConfigurationError,
    InterlockError,
    InvalidRequestError,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "http.md"
_ROW = re.compile(r"^\| (\d{3}) \| `([a-z_]+)` \|", re.M)


def _import_everything() -> None:
    """Errors may be defined in any module: import them all before walking the tree."""
    for module in pkgutil.walk_packages(interlock.__path__, "interlock."):
        importlib.import_module(module.name)


def _subclasses(cls: type[InterlockError]) -> list[type[InterlockError]]:
    return [s for c in cls.__subclasses__() for s in (c, *_subclasses(c))]


def error_classes() -> list[type[InterlockError]]:
    """Every InterlockError of the package (test modules' samples excluded)."""
    _import_everything()
    found = {c for c in _subclasses(InterlockError) if c.__module__.startswith("interlock.")}
    return sorted(found, key=lambda c: (c.__module__, c.__name__))


def answering(classes: Iterable[type[InterlockError]]) -> list[type[InterlockError]]:
    """The classes that answer a code of their own: a leaf, or one that introduces a code.

    A subclass keeping its parent's code (a finer type for the same answer) is not one.
    """
    chosen = []
    for cls in classes:
        parent_code = getattr(cls.__mro__[1], "code", None)
        introduces = "code" in vars(cls) and cls.code != parent_code
        if introduces or (not cls.__subclasses__() and getattr(cls, "code", None) is None):
            chosen.append(cls)
    return chosen


def doc_table() -> dict[str, int]:
    return {code: int(status) for status, code in _ROW.findall(DOCS.read_text())}


def problems(classes: Iterable[type[InterlockError]], docs: dict[str, int]) -> list[str]:
    """What is missing for each answering class: code, status, uniqueness, client, docs."""
    found: list[str] = []
    owners: dict[str, str] = {}
    for cls in answering(classes):
        code, status = getattr(cls, "code", None), getattr(cls, "status", None)
        if code is None or not isinstance(status, int) or not 400 <= status <= 599:
            found.append(f"{cls.__name__}: code {code!r}, status {status!r}")
            continue
        if code in owners:
            found.append(f"{cls.__name__}: code {code} is already {owners[code]}'s")
        owners[code] = cls.__name__
        client = client_errors.BY_CODE.get(code)
        if client is None or client.__name__ != cls.__name__:
            found.append(f"{cls.__name__}: the client maps {code} to {client}")
        if docs.get(code) != status:
            found.append(f"{cls.__name__}: docs/http.md says {docs.get(code)} for {code}")
    return found


def _instance(cls: type[InterlockError]) -> InterlockError:
    """An instance without calling the class's own constructor (each takes other arguments)."""
    exc = cls.__new__(cls)
    InterlockError.__init__(exc, f"a {cls.__name__}", sample=True)
    return exc


def test_every_error_has_a_unique_code_a_status_a_client_class_and_a_docs_row() -> None:
    classes = error_classes()
    assert len(answering(classes)) >= 24
    assert problems(classes, doc_table()) == []


def test_the_docs_table_lists_no_code_the_server_cannot_send() -> None:
    codes = {c.code for c in answering(error_classes())}
    assert set(doc_table()) == codes


def test_the_client_has_no_class_for_a_code_the_server_cannot_send() -> None:
    codes = {c.code for c in answering(error_classes())}
    assert set(client_errors.BY_CODE) == codes


def test_the_http_handler_answers_each_class_with_its_status_and_code() -> None:
    app = FastAPI()
    api_errors.install(app)
    classes = {c.__name__: c for c in answering(error_classes())}

    @app.get("/raise/{name}")
    async def _raise(name: str) -> None:
        raise _instance(classes[name])

    with TestClient(app, raise_server_exceptions=False) as http:
        for name, cls in classes.items():
            answer = http.get(f"/raise/{name}")
            assert (answer.status_code, answer.json()["error"]["code"]) == (cls.status, cls.code)
            typed = client_errors.from_body(answer.status_code, answer.json())
            assert (type(typed).__name__, typed.status) == (name, cls.status)


def test_a_configuration_error_never_reaches_a_client_as_a_4xx() -> None:
    assert not issubclass(ConfigurationError, InterlockError)
    app = FastAPI()
    api_errors.install(app)

    @app.get("/misconfigured")
    async def _misconfigured() -> None:
        raise ConfigurationError("no resolver for model 'x:y'")

    with TestClient(app, raise_server_exceptions=False) as http:
        answer = http.get("/misconfigured")
    assert (answer.status_code, answer.json()["error"]["code"]) == (500, "internal_error")


@pytest.fixture
def sample_errors() -> Iterable[list[type[InterlockError]]]:
    """Errors someone might add without their answer; gone from the tree afterwards."""

    class WithoutStatusError(InterlockError):
        code = "without_status"

    class WithoutClientError(InvalidRequestError):
        code = "without_client"

    class SameCodeError(InterlockError):
        code = "chat_not_found"
        status = 404

    samples: list[type[InterlockError]] = [WithoutStatusError, WithoutClientError, SameCodeError]
    yield samples
    samples.clear()
    del WithoutStatusError, WithoutClientError, SameCodeError
    gc.collect()  # classes sit in reference cycles: collect them out of __subclasses__()


def test_the_check_catches_an_error_added_without_its_answer(
    sample_errors: list[type[InterlockError]],
) -> None:
    assert problems([ChatNotFoundError, *sample_errors], doc_table()) == [
        "WithoutStatusError: code 'without_status', status None",
        "WithoutClientError: the client maps without_client to None",
        "WithoutClientError: docs/http.md says None for without_client",
        "SameCodeError: code chat_not_found is already ChatNotFoundError's",
        "SameCodeError: the client maps chat_not_found to "
        "<class 'interlock.client._errors.ChatNotFoundError'>",
    ]
