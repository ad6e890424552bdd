"""Evidence packs: written by `interlock audit evidence`, checked offline with the public key
alone by tools/verify_export.py; any edit to a pack fails the check."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from interlock.audit.checkpoints import merkle_root
from interlock.audit.evidence import audit_path, levels
from interlock.cli.main import main
from interlock.domain.review.service import Reviews
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk
from tests.review.history import ACTIVE, TENANT, History

TOOL = Path(__file__).parents[2] / "tools" / "verify_export.py"


def verifier(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-I", str(TOOL), *args], capture_output=True,
                          text=True, timeout=120, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def keys(tmp_path: Path) -> tuple[str, str]:
    private, public = tmp_path / "cp.pem", tmp_path / "cp.pub"
    assert main(["audit", "keygen", "--private", str(private), "--public", str(public)]) == 0
    return str(private), str(public)


@pytest.fixture
def pack(history: History, view: ReviewsView, keys: tuple[str, str], tmp_path: Path) -> Path:
    desk = ReviewDesk(Reviews(history.app), view, ACTIVE)
    review = desk.open(TENANT, "rita", "custom", custom="kind != 'expire'", size=4, seed="e")
    for n in range(1, 5):
        desk.reviews.assess(review.id, n, actor="rita", verdict="finding" if n == 2 else "ok",
                            severity="high" if n == 2 else None, note=f"item {n}")
    desk.reviews.sign_off(review.id, actor="head", note="done")
    path = tmp_path / "evidence.zip"
    assert main(["audit", "evidence", "--review", str(review.id), "--key", keys[0],
                 "--output", str(path), "--store", history.store]) == 0
    return path


def test_a_pack_verifies_offline_with_the_public_key_alone(
    pack: Path, keys: tuple[str, str], tmp_path: Path,
) -> None:
    code, out = verifier(str(pack), "--public-key", keys[1])
    assert (code, out.strip().splitlines()[-1]) == (0, "evidence pack verifies")
    with zipfile.ZipFile(pack) as z:
        manifest = json.loads(z.read("manifest.json"))
        findings = json.loads(z.read("findings.json"))
        streams = {json.loads(line)["chat_id"] for line in z.read("events.jsonl").splitlines()}
    assert (manifest["query"]["name"], manifest["sample"]["seed"]) == ("custom", "e")
    assert findings["findings"] == 1 and findings["signed_off_by"] == "head"
    assert streams == {manifest["review_id"], *(i["chat_id"] for i in findings["items"])}
    assert len(findings["items"]) == 4
    other = tmp_path / "other.pub"
    main(["audit", "keygen", "--private", str(tmp_path / "o.pem"), "--public", str(other)])
    assert verifier(str(pack), "--public-key", str(other))[0] == 1


def _rewrite(pack: Path, name: str, edit: object) -> None:
    with zipfile.ZipFile(pack) as z:
        files = {n: z.read(n) for n in z.namelist()}
    files[name] = edit(files[name])  # type: ignore[operator]
    with zipfile.ZipFile(pack, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)


@pytest.mark.parametrize(("name", "edit", "says"), [
    ("findings.json", lambda b: b.replace(b'"high"', b'"low"'), "findings.json: missing, or"),
    ("events.jsonl", lambda b: b.replace(b"amount", b"amounT", 1), "events.jsonl: missing, or"),
    ("manifest.json", lambda b: b.replace(b'"seed": "e"', b'"seed": "f"'), "manifest: signature"),
    ("proofs.jsonl", lambda b: b"\n".join(b.splitlines()[1:]), "proofs.jsonl: missing, or"),
])
def test_a_tampered_pack_fails_the_offline_verifier(
    pack: Path, keys: tuple[str, str], name: str, edit: object, says: str,
) -> None:
    _rewrite(pack, name, edit)
    code, out = verifier(str(pack), "--public-key", keys[1])
    assert code == 1 and says in out


def test_an_edit_with_rehashed_files_still_fails_on_the_chain_or_proof(
    pack: Path, keys: tuple[str, str], tmp_path: Path,
) -> None:
    """Whoever can rewrite the pack and re-sign its manifest with their own key is caught by
    the key; even with this key, an edited event breaks its chain (checked here by calling
    the checks below the manifest directly)."""
    sys.path.insert(0, str(TOOL.parent))
    try:
        import verify_export  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    with zipfile.ZipFile(pack) as z:
        lines = z.read("events.jsonl").decode().splitlines()
    edited = [line.replace('\\"amount\\":', '\\"amounT\\":', 1) for line in lines]
    assert edited != lines
    _, problems = verify_export._chains(edited)
    assert any("chain does not match the event" in p for p in problems)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 8, 13, 64, 100])
def test_audit_paths_lead_to_the_checkpoints_merkle_root(n: int) -> None:
    sys.path.insert(0, str(TOOL.parent))
    try:
        import verify_export
    finally:
        sys.path.pop(0)
    leaves = [bytes([i]) * 32 for i in range(n)]
    tree = levels(leaves)
    assert tree[-1][0] == merkle_root(leaves)
    for i in range(n):
        assert verify_export.root_from_path(i, n, leaves[i], audit_path(tree, i)) == tree[-1][0]
    assert verify_export.root_from_path(0, n, leaves[-1], audit_path(tree, 0)) != tree[-1][0] \
        or n == 1


def test_an_open_review_has_no_pack(history: History, view: ReviewsView, keys: tuple[str, str],
                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    review = ReviewDesk(Reviews(history.app), view, ACTIVE).open(
        TENANT, "rita", "fast_approval", size=1, seed="x")
    assert main(["audit", "evidence", "--review", str(review.id), "--key", keys[0],
                 "--output", str(tmp_path / "p.zip"), "--store", history.store]) == 2
    assert "needs the review signed off" in capsys.readouterr().err
