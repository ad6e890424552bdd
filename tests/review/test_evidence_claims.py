"""Every claim an evidence pack makes is checked against the signed events: a pack whose
files are rewritten and whose manifest is signed again with the pack's own key (a buggy
writer, or an insider holding the key) still fails tools/verify_export.py when findings.json
or the manifest says anything the review's events and the items' streams do not."""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from interlock.audit.signing import Signer
from interlock.cli.main import main
from interlock.domain.chat.canonical import jcs
from interlock.domain.receipts import Receipts, receipts_id
from interlock.domain.review.service import Reviews
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk
from tests.review.history import ACTIVE, TENANT, History
from tests.review.test_evidence import TOOL, keys, verifier

__all__ = ["keys"]  # the fixture, shared
Files = dict[str, Any]


def _review(history: History, view: ReviewsView, seed: str, viewed: bool = False) -> UUID:
    desk = ReviewDesk(Reviews(history.app), view, ACTIVE)
    review = desk.open(TENANT, "rita", "custom", custom="kind != 'expire'", size=4, seed=seed)
    if viewed:  # item 1's page was opened: its receipt stream belongs in the pack
        item = review.state.items[0]
        Receipts(history.app).viewed(tenant=TENANT, chat_id=UUID(item.chat_id), ref=item.ref,
                                     principal="bob", session="s", input_sha256="0" * 64)
    for n in range(1, 5):
        desk.reviews.assess(review.id, n, actor="rita", verdict="finding" if n == 2 else "ok",
                            severity="high" if n == 2 else None, note=f"item {n}")
    desk.reviews.sign_off(review.id, actor="head", note="done")
    return review.id


def _pack(history: History, review_id: UUID, private: str, path: Path) -> Path:
    assert main(["audit", "evidence", "--review", str(review_id), "--key", private,
                 "--output", str(path), "--store", history.store]) == 0
    return path


@pytest.fixture
def packs(history: History, view: ReviewsView, keys: tuple[str, str],
          tmp_path: Path) -> dict[str, Path]:
    """This review's pack (item 1's page opened) and another review's."""
    mine = _review(history, view, "e", viewed=True)
    other = _review(history, view, "f")
    return {"mine": _pack(history, mine, keys[0], tmp_path / "mine.zip"),
            "other": _pack(history, other, keys[0], tmp_path / "other.zip")}


def _files(pack: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(pack) as z:
        return {n: z.read(n) for n in z.namelist()}


def _resigned(pack: Path, private: str, edit: Callable[[Files, dict[str, Any]], None]) -> None:
    """Edit the pack's files (parsed) and manifest, rehash them and sign the manifest again."""
    raw = _files(pack)
    manifest = json.loads(raw.pop("manifest.json"))
    manifest.pop("signature")
    files: Files = {"findings.json": json.loads(raw["findings.json"]),
                    "events.jsonl": [json.loads(x) for x in raw["events.jsonl"].splitlines()],
                    "proofs.jsonl": [json.loads(x) for x in raw["proofs.jsonl"].splitlines()]}
    edit(files, manifest)
    out = {"findings.json": jcs(files["findings.json"]).encode(),
           **{n: b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in files[n])
              for n in ("events.jsonl", "proofs.jsonl")}}
    manifest["files"] = {n: {"sha256": hashlib.sha256(d).hexdigest(), "bytes": len(d)}
                         for n, d in out.items()}
    manifest["signature"] = Signer.load(private).sign(jcs(manifest).encode()).hex()
    with zipfile.ZipFile(pack, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        for n, d in out.items():
            z.writestr(n, d)


def _items(f: Files) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = f["findings.json"]["items"]
    return items


def _receipt_stream(m: dict[str, Any]) -> str:
    stream: str = m["receipts"]["1"]
    return stream


def _drop_receipts(f: Files, m: dict[str, Any]) -> None:
    gone = _receipt_stream(m)
    f["events.jsonl"] = [r for r in f["events.jsonl"] if r["chat_id"] != gone]
    f["proofs.jsonl"] = [r for r in f["proofs.jsonl"] if r["chat_id"] != gone]


EDITS: dict[str, tuple[Callable[[Files, dict[str, Any]], None], str]] = {
    "an item more": (lambda f, m: _items(f).append(_items(f)[-1]),
                     "findings.json lists 5 items; the review recorded 4"),
    "an item fewer": (lambda f, m: _items(f).pop(),
                      "findings.json lists 3 items; the review recorded 4"),
    "the findings count": (lambda f, m: f["findings.json"].update(findings=0),
                           "findings.json counts 0 findings; the review's events record 1"),
    "the review_id": (lambda f, m: f["findings.json"].update(review_id=str(uuid.uuid4())),
                      "findings.json is review"),
    "an item's version": (lambda f, m: _items(f)[0].update(version=_items(f)[0]["version"] + 1),
                          "item 1: findings.json names another call"),
    "an item's chat_id": (lambda f, m: _items(f)[2].update(chat_id=str(uuid.uuid4())),
                          "item 3: findings.json names another call"),
    "a receipt stream left out": (_drop_receipts, "item 1: its receipt stream"),
    "a receipt stream unnamed": (lambda f, m: m["receipts"].update({"1": None}),
                                 "item 1: its receipt stream is in the pack but the manifest"),
    "no receipt listing": (lambda f, m: m.pop("receipts"),
                           "the manifest names no item's view receipt stream"),
}


def test_the_pack_as_written_verifies_and_carries_the_receipt_stream(
    packs: dict[str, Path], keys: tuple[str, str]
) -> None:
    code, out = verifier(str(packs["mine"]), "--public-key", keys[1])
    assert (code, out.strip().splitlines()[-1]) == (0, "evidence pack verifies")
    manifest = json.loads(_files(packs["mine"])["manifest.json"])
    first = json.loads(_files(packs["mine"])["findings.json"])["items"][0]
    stream = str(receipts_id(UUID(first["chat_id"]), first["ref"]))
    assert _receipt_stream(manifest) == stream
    items = json.loads(_files(packs["mine"])["findings.json"])["items"]
    # two decisions of one call (a quorum's votes) share its one receipt stream
    assert manifest["receipts"] == {
        str(i["n"]): stream if (i["chat_id"], i["ref"]) == (first["chat_id"], first["ref"])
        else None for i in items}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_claim_the_events_do_not_make_fails_the_verifier(
    packs: dict[str, Path], keys: tuple[str, str], edit: str
) -> None:
    change, says = EDITS[edit]
    _resigned(packs["mine"], keys[0], change)
    code, out = verifier(str(packs["mine"]), "--public-key", keys[1])
    assert code == 1 and says in out, out[-600:]


def test_another_reviews_findings_inside_a_pack_fail(
    packs: dict[str, Path], keys: tuple[str, str]
) -> None:
    theirs = json.loads(_files(packs["other"])["findings.json"])
    _resigned(packs["mine"], keys[0], lambda f, m: f.update({"findings.json": theirs}))
    code, out = verifier(str(packs["mine"]), "--public-key", keys[1])
    assert code == 1 and "findings.json is review" in out, out[-600:]
    ours = json.loads(_files(packs["mine"])["manifest.json"])["review_id"]
    _resigned(packs["mine"], keys[0],  # even relabelled as this review's
              lambda f, m: f["findings.json"].update(review_id=ours))
    code, out = verifier(str(packs["mine"]), "--public-key", keys[1])
    assert code == 1 and "findings.json names another call" in out, out[-600:]


def test_seals_by_several_keys_need_the_checkpoints_retirement_times() -> None:
    """A checkpoint that names no keys (signed before keys were named, or by a careless
    signer) cannot say when a key was retired: a pack whose events two keys sealed fails."""
    sys.path.insert(0, str(TOOL.parent))
    try:
        import verify_export  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)

    def row(version: int, kid: str) -> dict[str, Any]:
        chain = f"2:{kid}:{'a' * 64}:{'b' * 64}"
        state = '{"timestamp":"2026-01-01T00:00:00+00:00","chain":"' + chain + '"}'
        return {"chat_id": "c", "version": version, "topic": "t", "state": state}

    cp: dict[str, Any] = {"statement": {"seq": 3}, "signature": ""}
    one = {"c": (None, [row(1, "k1"), row(2, "k1")])}
    two = {"c": (None, [row(1, "k1"), row(2, "k2")])}
    assert verify_export._sealed({}, cp, None, [], one) == []
    [problem] = verify_export._sealed({}, cp, None, [], two)
    assert "sealed with keys ['k1', 'k2'] but the checkpoint names no keys" in problem
