"""Evidence packs: one signed zip holding a review and the chained events it rests on.

    manifest.json   what the pack is (review, query and version, parameters, seed), each
                    item's receipt stream (null: never opened), the
                    SHA-256 of each other file, the signed checkpoint, all signed (Ed25519)
    events.jsonl    every stored record of the review's stream, of each item's chat and of
                    each item's call's view receipts (when its page was opened), up to the
                    version the checkpoint lists ({"chat_id", "version", "topic",
                    "state"}, `state` being the stored JSON the chain covers)
    proofs.jsonl    per stream: its head (version, link), its leaf's index among the
                    checkpoint's heads and the Merkle audit path to the signed root; with
                    retired keys, the same for its head in the rotation checkpoint
                    (`rotation`), whose statement the manifest carries
    findings.json   the items with their assessments and the sign-off, as the events say

tools/verify_export.py checks all of it with the checkpoint's public key alone.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from interlock.audit import reading
from interlock.audit.checkpoint_log import CheckpointLog, RetentionLog, take_checkpoint
from interlock.audit.checkpoints import Checkpoint, Head
from interlock.audit.integrity import decoder
from interlock.audit.signing import Signer
from interlock.domain import Interlock
from interlock.domain.chat.canonical import jcs
from interlock.domain.errors import ReviewStateError
from interlock.domain.receipts import receipts_id
from interlock.domain.review.aggregate import Review
from interlock.domain.review.service import Reviews

FORMAT = "interlock-evidence-1"
Progress = Callable[[str, int, int], None]


def levels(leaves: list[bytes]) -> list[list[bytes]]:
    """The Merkle tree level by level (RFC 6962: a lone last node goes up unchanged)."""
    tree = [leaves]
    while len(tree[-1]) > 1:
        below = tree[-1]
        above = [hashlib.sha256(b"\x01" + below[i] + below[i + 1]).digest()
                 for i in range(0, len(below) - 1, 2)]
        if len(below) % 2:
            above.append(below[-1])
        tree.append(above)
    return tree


def audit_path(tree: list[list[bytes]], index: int) -> list[str]:
    """The sibling hashes from leaf `index` up to the root."""
    path = []
    for level in tree[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            path.append(level[sibling].hex())
        index //= 2
    return path


def write(app: Interlock, review_id: UUID, signer: Signer, output: Path,
          progress: Progress | None = None) -> dict[str, Any]:
    """Write the pack of a signed-off review to `output`; its manifest."""
    review = Reviews(app).get(review_id)
    if review.state.status == "open":
        raise ReviewStateError(review_id, "an evidence pack needs the review signed off")
    checkpoint = _checkpoint(app, signer)
    rotated = CheckpointLog(app.factory.aggregate_recorder("checkpoints")).rotation_of(
        checkpoint)
    heads = {h.chat_id: (i, h) for i, h in enumerate(checkpoint.heads)}
    streams = [str(review.id), *sorted({i.chat_id for i in review.state.items}),
               *_receipt_streams(review, heads)]
    tree = levels([h.leaf() for h in checkpoint.heads])
    files = {"events.jsonl": b"".join(_events(app, streams, heads, progress)),
             "proofs.jsonl": b"".join(_proofs(streams, heads, tree, rotated)),
             "findings.json": _findings(review)}
    manifest = _manifest(review, checkpoint, files, signer, rotated, heads)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as pack:
        pack.writestr("manifest.json", json.dumps(manifest, indent=1, ensure_ascii=False))
        for name, data in files.items():
            pack.writestr(name, data)
    return manifest


def _receipt_streams(review: Review, heads: dict[str, tuple[int, Head]]) -> list[str]:
    """The items' calls' view receipt streams the checkpoint lists (a call whose page was
    never opened has none)."""
    ids = {str(receipts_id(UUID(i.chat_id), i.ref)) for i in review.state.items}
    return sorted(ids & heads.keys())


def _checkpoint(app: Interlock, signer: Signer) -> Checkpoint:
    """A fresh checkpoint, so that it covers the review's last step."""
    return take_checkpoint(CheckpointLog(app.factory.aggregate_recorder("checkpoints")),
                           reading.verifier(app, app.sealer.keys), key_id=signer.key_id,
                           sign=signer.sign, now=lambda: datetime.now(UTC).isoformat(),
                           retention=RetentionLog(app.factory.aggregate_recorder(
                               "retention")).all())


def _events(app: Interlock, streams: list[str], heads: dict[str, tuple[int, Head]],
            progress: Progress | None) -> Iterator[bytes]:
    decode = decoder(app.mapper)
    for done, stream in enumerate(streams, start=1):
        if stream not in heads:
            raise ReviewStateError(stream, "a stream of the review is not in the checkpoint")
        last = heads[stream][1].version
        for stored in app.recorder.select_events(UUID(stream), lte=last):
            yield json.dumps({"chat_id": stream, "version": stored.originator_version,
                              "topic": stored.topic, "state": decode(stored.state).decode()},
                             ensure_ascii=False).encode() + b"\n"
        if progress is not None:
            progress("streams", done, len(streams))


def _proofs(streams: list[str], heads: dict[str, tuple[int, Head]],
            tree: list[list[bytes]], rotated: Checkpoint | None) -> Iterator[bytes]:
    """Each stream's head and its audit path; with a rotation checkpoint, the same of the
    stream's head there (`rotation`: up to it, retired keys may have sealed)."""
    then = {h.chat_id: (i, h) for i, h in enumerate(rotated.heads)} if rotated else {}
    old = levels([h.leaf() for h in rotated.heads]) if rotated else []
    for stream in streams:
        index, head = heads[stream]
        proof: dict[str, object] = {"chat_id": stream, "version": head.version,
                                    "link": head.link, "index": index,
                                    "path": audit_path(tree, index)}
        if stream in then:
            at, was = then[stream]
            proof["rotation"] = {"version": was.version, "link": was.link, "index": at,
                                 "path": audit_path(old, at)}
        yield json.dumps(proof).encode() + b"\n"


def _findings(review: Review) -> bytes:
    s = review.state
    items = [{**i.model_dump(mode="json", include={"n", "chat_id", "version", "ref", "tool",
                                                   "kind", "actor"}),
              "assessment": (s.assessments[i.n].model_dump(mode="json")
                             if i.n in s.assessments else None)} for i in s.items]
    second = ({"signers": s.signers, "countersigned_by": s.countersigned_by,
               "countersign_note": s.countersign_note} if s.signers > 1 else {})
    return jcs({"review_id": str(review.id), "status": s.status, "items": items,
                "signed_off_by": s.signed_off_by, "sign_off_note": s.sign_off_note,
                "findings": sum(a.verdict == "finding" for a in s.assessments.values()),
                **second}).encode()


def _manifest(review: Review, checkpoint: Checkpoint, files: dict[str, bytes],
              signer: Signer, rotated: Checkpoint | None,
              heads: dict[str, tuple[int, Head]]) -> dict[str, Any]:
    s = review.state
    receipts = {str(i.n): str(receipts_id(UUID(i.chat_id), i.ref)) for i in s.items}
    manifest: dict[str, Any] = {
        "format": FORMAT, "review_id": str(review.id), "tenant": s.tenant,
        "query": s.query.model_dump(mode="json"), "sample": s.sample.model_dump(mode="json"),
        "files": {n: {"sha256": hashlib.sha256(d).hexdigest(), "bytes": len(d)}
                  for n, d in files.items()},
        "checkpoint": {"statement": checkpoint.statement, "signature": checkpoint.signature},
        "created_at": datetime.now(UTC).isoformat(), "key_id": signer.key_id,
        # each item's view receipt stream, null for a call whose page was never opened
        "receipts": {n: (r if r in heads else None) for n, r in receipts.items()},
    }
    if rotated is not None:  # the checkpoint the proofs' `rotation` members lead to
        manifest["rotation"] = {"statement": rotated.statement, "signature": rotated.signature}
    manifest["signature"] = signer.sign(jcs(manifest).encode()).hex()
    return manifest
