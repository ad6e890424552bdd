"""`GET /v1/reviews/{id}/evidence`: the pack `interlock audit evidence` writes, by the same
code, signed with the server's checkpoint key; verified offline, refused without a key."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.audit.signing import Signer
from interlock.bootstrap import checkpoint_signer
from interlock.domain.errors import ConfigurationError
from interlock.projections import open_read_models
from interlock.settings import load_settings
from tests.review.history import History
from tests.review.test_api import KEYS, _as
from tests.review.test_evidence import _rewrite, verifier


@pytest.fixture
def signer() -> Signer:
    return Signer.generate()


def _client(history: History, signer: Signer | None) -> Iterator[TestClient]:
    views = open_read_models(history.app, poll_interval=0.05)
    app = make_app(history.app, views, AuthConfig.from_mapping(KEYS), signer=signer)
    with TestClient(app) as client:
        yield client
    views.close()


@pytest.fixture
def http(history: History, signer: Signer) -> Iterator[TestClient]:
    yield from _client(history, signer)


def _signed_off(http: TestClient, size: int = 2) -> str:
    review = http.post("/v1/reviews", json={"query": "custom", "filter": "kind != 'expire'",
                                            "size": size, "seed": "h"},
                       headers=_as("rita")).json()
    for n in range(1, size + 1):
        verdict = {"verdict": "finding", "severity": "low", "note": "x"} if n == 1 else {
            "verdict": "ok"}
        http.post(f"/v1/reviews/{review['id']}/items/{n}/assessment", json=verdict,
                  headers=_as("rita")).raise_for_status()
    http.post(f"/v1/reviews/{review['id']}/sign-off", json={"note": "done"},
              headers=_as("rita")).raise_for_status()
    return str(review["id"])


def test_the_downloaded_pack_verifies_offline_and_a_tampered_one_fails(
    http: TestClient, signer: Signer, tmp_path: Path,
) -> None:
    review = _signed_off(http)
    answer = http.get(f"/v1/reviews/{review}/evidence", headers=_as("rita"))
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/zip"
    assert f'filename="evidence-{review}.zip"' in answer.headers["content-disposition"]
    pack, public = tmp_path / "pack.zip", tmp_path / "cp.pub"
    pack.write_bytes(answer.content)
    public.write_text(signer.public.hex())
    code, out = verifier(str(pack), "--public-key", str(public))
    assert (code, out.strip().splitlines()[-1]) == (0, "evidence pack verifies")
    with zipfile.ZipFile(pack) as z:
        assert sorted(z.namelist()) == ["events.jsonl", "findings.json", "manifest.json",
                                        "proofs.jsonl"]
    _rewrite(pack, "findings.json", lambda b: b.replace(b'"low"', b'"high"'))
    code, out = verifier(str(pack), "--public-key", str(public))
    assert code == 1 and "findings.json" in out


def test_refusals_name_the_problem_and_write_nothing(http: TestClient) -> None:
    opened = http.post("/v1/reviews", json={"query": "fast_approval", "size": 1},
                       headers=_as("rita")).json()
    answer = http.get(f"/v1/reviews/{opened['id']}/evidence", headers=_as("rita"))
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "review_state")
    assert "signed off" in answer.json()["error"]["message"]
    review = _signed_off(http, 1)
    other = http.get(f"/v1/reviews/{review}/evidence", headers=_as("eve"))
    assert (other.status_code, other.json()["error"]["code"]) == (404, "review_not_found")
    approver = http.get(f"/v1/reviews/{review}/evidence", headers=_as("bob"))
    assert (approver.status_code, approver.json()["error"]["code"]) == (403, "forbidden")


def test_a_server_without_a_key_says_so(history: History) -> None:
    for http in _client(history, None):
        review = _signed_off(http, 1)
        answer = http.get(f"/v1/reviews/{review}/evidence", headers=_as("rita"))
        assert (answer.status_code, answer.json()["error"]["code"]) == (409, "no_signing_key")
        assert "INTERLOCK_CHECKPOINT_KEY" in answer.json()["error"]["message"]


def test_the_server_reads_its_key_from_interlock_checkpoint_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    key, secrets = tmp_path / "cp.pem", tmp_path / "secrets"
    secrets.mkdir()
    monkeypatch.setenv("INTERLOCK_SECRETS_DIR", str(secrets))
    assert checkpoint_signer(load_settings()) is None
    made = Signer.generate()
    key.write_bytes(made.pem())
    monkeypatch.setenv("INTERLOCK_CHECKPOINT_KEY", str(key))
    found = checkpoint_signer(load_settings())
    assert found is not None and found.key_id == made.key_id
    key.write_text("not a key")
    with pytest.raises(ConfigurationError, match="INTERLOCK_CHECKPOINT_KEY: cannot read"):
        checkpoint_signer(load_settings())
