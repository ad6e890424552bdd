"""`interlock audit export --format events` and the signed manifest of any export.

The events export is one JSON object per line: the stored record as the chain covers
it ({"chat_id", "version", "topic", "state"}, `state` being the stored JSON text). The
manifest names the export's SHA-256 and the checkpoint it covers, signed with the
checkpoint key; tools/verify_export.py checks both with the public key alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from interlock.audit import reading
from interlock.audit.checkpoint_log import take_checkpoint
from interlock.audit.checkpoints import Checkpoint
from interlock.audit.integrity import Verifier, decoder
from interlock.audit.signing import Signer
from interlock.cli.audit_trail import checkpoint_log, plain_app, retention_log
from interlock.domain import Interlock
from interlock.domain.chat.canonical import jcs

MANIFEST = "interlock-export-manifest-1"


def event_lines(app: Interlock, chat_id: str | None, tenant: str | None) -> Iterator[str]:
    """Each stored event of the chosen chats, in log order, as one JSON line."""
    decode, chosen = decoder(app.mapper), set[str]()
    for n in Verifier(app.recorder, app.mapper, None).notifications():
        key, state = str(n.originator_id), decode(n.state).decode()
        if n.originator_version == 1 and _wanted(key, state, chat_id, tenant):
            chosen.add(key)
        if key in chosen:
            yield json.dumps({"chat_id": key, "version": n.originator_version,
                              "topic": n.topic, "state": state}, ensure_ascii=False) + "\n"


def _wanted(key: str, state: str, chat_id: str | None, tenant: str | None) -> bool:
    if chat_id is not None and key != chat_id:
        return False
    return tenant is None or json.loads(state).get("tenant") == tenant


def write_events(args: argparse.Namespace, out: TextIO) -> None:
    app = plain_app(args.store)
    try:
        out.writelines(event_lines(app, args.chat_id, args.tenant))
    finally:
        app.close()


def checkpoint_now(args: argparse.Namespace) -> tuple[Signer, Checkpoint, Checkpoint | None]:
    """A fresh checkpoint, taken before the export is written so that it covers it, and the
    rotation checkpoint it names (None: no key was retired)."""
    signer = Signer.load(args.key)
    app = plain_app(args.store)
    try:
        log = checkpoint_log(app)
        checkpoint = take_checkpoint(log, reading.verifier(app, app.sealer.keys),
                                     key_id=signer.key_id, sign=signer.sign, now=_now,
                                     retention=retention_log(app).all())
        rotated = log.rotation_of(checkpoint)
    finally:
        app.close()
    return signer, checkpoint, rotated


def write_manifest(args: argparse.Namespace, signer: Signer, checkpoint: Checkpoint,
                   rotated: Checkpoint | None = None) -> Path:
    """`<output>.manifest.json`: the export's hash and the checkpoint (and the rotation
    checkpoint, whose heads bound what retired keys sealed), signed."""
    data = Path(args.output).read_bytes()
    manifest: dict[str, Any] = {
        "format": MANIFEST, "file": Path(args.output).name, "kind": args.format,
        "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
        "filter": {"chat_id": args.chat_id, "tenant": args.tenant, "since": _iso(args.since),
                   "until": _iso(args.until), "tool": args.tool, "actor": args.actor},
        "created_at": _now(), "key_id": signer.key_id,
        "checkpoint": json.loads(checkpoint.to_json()),
    }
    if rotated is not None and rotated.seq != checkpoint.seq:
        manifest["rotation"] = json.loads(rotated.to_json())
    manifest["signature"] = signer.sign(jcs(manifest).encode()).hex()
    path = Path(f"{args.output}.manifest.json")
    path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return path


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _now() -> str:
    return datetime.now(UTC).isoformat()
