"""`interlock verify` and `interlock audit keygen|checkpoint|rotate|checkpoints`: the audit
trail."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from interlock.audit import reading, retention, rotation
from interlock.audit.checkpoint_log import (
    ChainsBrokenError,
    CheckpointLog,
    RetentionLog,
    against_checkpoint,
    removed_chats,
    take_checkpoint,
)
from interlock.audit.checkpoints import Checkpoint, check_sequence
from interlock.audit.integrity import ChainBreak, Verifier
from interlock.audit.retention_policy import Entry, Policy, check_entries
from interlock.audit.signing import Signer, public_key
from interlock.audit.snapshots import snapshot_breaks
from interlock.bootstrap import service_from
from interlock.domain import Interlock
from interlock.domain.errors import InvalidRequestError
from interlock.settings import load_settings
from interlock.stores.erasure_keys import KeyStore
from interlock.stores.urls import check_exists

PUBLIC_ENV, PRIVATE_ENV = "INTERLOCK_CHECKPOINT_PUBLIC_KEY", "INTERLOCK_CHECKPOINT_KEY"


def add_verify_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--public-key", default=os.environ.get(PUBLIC_ENV),
                   help=f"file with the checkpoint public key, 64 hex digits (default: {PUBLIC_ENV}"
                        "); then a deleted chat or a cut tail is detected")
    p.add_argument("--no-secret", action="store_true",
                   help="check hashes and checkpoints only (no HMAC secret needed)")


def register_audit(sub: Any, add_store: Any) -> None:
    keygen = sub.add_parser("keygen", help="make an Ed25519 key pair for checkpoints",
                            description="Write a private key (PEM) and print its public key.")
    keygen.add_argument("--private", required=True, help="file to write the private key to")
    keygen.add_argument("--public", help="file to write the public key (hex) to")
    keygen.set_defaults(run=_keygen)
    cp = sub.add_parser("checkpoint", help="sign every chat's head now (or every N seconds)",
                        description="Verify the events since the last checkpoint, then sign a "
                                    "Merkle root over every chat's last version and link.")
    cp.add_argument("--key", default=os.environ.get(PRIVATE_ENV),
                    help=f"the private key file (default: {PRIVATE_ENV})")
    cp.add_argument("--every", type=float, help="repeat every this many seconds")
    add_store(cp)
    cp.set_defaults(run=_checkpoint)
    rot = sub.add_parser("rotate", help="seal a key rotation with a signed checkpoint",
                         description="With the new settings (INTERLOCK_SECRET the new key, "
                                     "INTERLOCK_OLD_SECRETS the old one as SECRET@RETIRED-AT, "
                                     "its time past), verify the events since the last "
                                     "checkpoint and sign the rotation checkpoint: past each "
                                     "chat's head there, only the new key seals. Servers with "
                                     "a retired key refuse to start until this has run.")
    rot.add_argument("--key", default=os.environ.get(PRIVATE_ENV),
                     help=f"the checkpoint private key file (default: {PRIVATE_ENV})")
    add_store(rot)
    rot.set_defaults(run=_rotate)
    ex = sub.add_parser("checkpoints", help="export the signed checkpoints as JSON Lines",
                        description="Write every checkpoint, oldest first, one per line.")
    ex.add_argument("--output", "-o", help="file to write (default: stdout)")
    add_store(ex)
    ex.set_defaults(run=_export_checkpoints)
    rt = sub.add_parser("retention", help="remove whole chats past their tenant's retention",
                        description="Verify every chain, record the chats the policy expires "
                                    "in the signed retention log, delete them, and checkpoint. "
                                    "A chat younger than its tenant's keep_months never goes.")
    rt.add_argument("--policy", required=True,
                    help='JSON file: {"default": RULE, "tenants": {"name": RULE}}, RULE being '
                         '{"keep_months": N, "delete_after_years": M}')
    rt.add_argument("--key", default=os.environ.get(PRIVATE_ENV),
                    help=f"the checkpoint private key file (default: {PRIVATE_ENV})")
    rt.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    add_store(rt)
    rt.set_defaults(run=_retention)


def plain_app(store: str) -> Interlock:
    """The store's service without agents, keyed as the settings say (secret, old secrets)."""
    return service_from(load_settings(store=store), with_agents=False)


def open_app(store: str) -> Interlock:
    """An application that can read (and erase) the store's protected personal data."""
    return plain_app(store)  # service_from attaches the key store


def keys_of(app: Interlock) -> KeyStore:
    keys = getattr(app.mapper, "personal", None)
    assert isinstance(keys, KeyStore), "open the app with open_app()"
    return keys


def checkpoint_log(app: Interlock) -> CheckpointLog:
    return CheckpointLog(app.factory.aggregate_recorder("checkpoints"))


def retention_log(app: Interlock) -> RetentionLog:
    return RetentionLog(app.factory.aggregate_recorder("retention"))


# -- verify ----------------------------------------------------------------------------------


def verify(args: argparse.Namespace) -> int:
    check_exists(args.store)  # verifying must never make an empty store and pass on it
    app = plain_app(args.store)
    try:
        entries = retention_log(app).all()
        latest, problem = _checkpoints(args, checkpoint_log(app).all(), entries)
        if problem is not None:
            print(problem)
            return 1
        keys = None if args.no_secret else app.sealer.keys
        verifier = reading.verifier(app, keys)
        breaks = _breaks(args, verifier, latest, removed_chats(entries))
        breaks += snapshot_breaks(app, keys, None if args.all else args.chat_id)
    finally:
        app.close()
    for b in breaks:
        print(describe(b))
    print(f"checked {verifier.checked} events: "
          + (f"{len(breaks)} chat(s) broken" if breaks else "all chains verify"))
    if latest is not None:
        print(f"checkpoint {latest.seq} of {latest.statement['created_at']}: "
              f"{latest.statement['chats']} chats, {latest.statement['events']} events")
    return 1 if breaks else 0


def _checkpoints(args: argparse.Namespace, checkpoints: list[Checkpoint],
                 entries: list[Entry]) -> tuple[Checkpoint | None, str | None]:
    if args.public_key is None:
        if checkpoints:
            print("note: checkpoints not checked (give --public-key): a deleted chat or a cut "
                  "tail goes unnoticed")
        return None, None
    kid, check = public_key(_read(args.public_key))
    if not checkpoints:
        return None, _none_found(entries)
    latest = checkpoints[-1]
    return latest, (check_sequence(checkpoints, kid, check)
                    or check_entries(entries, kid, check) or _names_retention(latest, entries))


def _none_found(entries: list[Entry]) -> str:
    """A public key asks for checkpoints: none at all means they were deleted (or never
    taken), and a deleted chat or a cut tail would go unnoticed: a failure, not a note."""
    why = (f"the retention log has {len(entries)} signed entr{'y' if len(entries) == 1 else 'ies'}"
           ", each made with one" if entries else "take one with `interlock audit checkpoint`")
    return ("no checkpoint found, yet --public-key asks to check them: they were deleted or "
            f"never taken ({why}); a deleted chat or a cut tail cannot be ruled out")


def _names_retention(checkpoint: Checkpoint, entries: list[Entry]) -> str | None:
    named = checkpoint.statement.get("retention")
    if named is None or any([e.seq, e.digest()] == named for e in entries):
        return None
    return f"checkpoint {checkpoint.seq}: names retention entry {named[0]}, which is missing"


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InvalidRequestError(f"cannot read {path}: {exc.strerror}", path=path) from None


def _breaks(args: argparse.Namespace, verifier: Verifier, latest: Checkpoint | None,
            removed: dict[str, int]) -> list[ChainBreak]:
    marks = {h.chat_id: h.version for h in latest.heads} if latest else {}
    if latest is not None:
        verifier.checkpointed_at(latest.statement["created_at"])
    if args.all:
        breaks = verifier.verify_all(marks)
        return breaks + (against_checkpoint(latest, verifier, removed=removed) if latest else [])
    chat = str(args.chat_id)
    found = verifier.verify_chat(args.chat_id, mark=marks.get(chat))
    if chat in removed and found is not None and found.version == 0:
        found = ChainBreak(chat, 0, f"no such chat: removed by retention at version "
                                    f"{removed[chat]}")
    extra = against_checkpoint(latest, verifier, only=chat, removed=removed) if latest else []
    if extra and found is not None and found.version == 0:
        found = None  # "deleted since checkpoint N" says more than "no such chat"
    return ([found] if found else []) + extra


def describe(b: ChainBreak) -> str:
    if b.version == 0:
        return f"chat {b.chat_id}: {b.reason}"
    return f"chat {b.chat_id}: broken at version {b.version}: {b.reason}"


# -- checkpoints -----------------------------------------------------------------------------


def _keygen(args: argparse.Namespace) -> int:
    signer = Signer.generate()
    path = Path(args.private)
    path.touch(mode=0o600, exist_ok=False)
    path.write_bytes(signer.pem())
    if args.public:
        Path(args.public).write_text(signer.public.hex() + "\n")
    print(f"key {signer.key_id}: public key {signer.public.hex()}")
    return 0


def signer_of(args: argparse.Namespace) -> Signer:
    """The checkpoint key `--key` (or INTERLOCK_CHECKPOINT_KEY) names; refused if none."""
    if not args.key:
        raise InvalidRequestError(f"give --key or set {PRIVATE_ENV}")
    return Signer.load(args.key)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _checkpoint(args: argparse.Namespace) -> int:
    signer = signer_of(args)
    app = plain_app(args.store)
    try:
        log = checkpoint_log(app)
        while True:
            verifier = reading.verifier(app, app.sealer.keys)
            try:
                cp = take_checkpoint(log, verifier, key_id=signer.key_id, sign=signer.sign,
                                     now=_now, retention=retention_log(app).all())
            except ChainsBrokenError as exc:
                return _broken(exc)
            s = cp.statement
            print(f"checkpoint {cp.seq}: {s['chats']} chats, {s['events']} events, "
                  f"root {s['root']}, position {s['position']}", flush=True)
            if not args.every:
                return 0
            time.sleep(args.every)
    except KeyboardInterrupt:
        return 0
    finally:
        app.close()


def _rotate(args: argparse.Namespace) -> int:
    signer = signer_of(args)
    app = plain_app(args.store)
    try:
        cp = rotation.rotate(app, key_id=signer.key_id, sign=signer.sign, now=_now)
    except ChainsBrokenError as exc:
        return _broken(exc)
    finally:
        app.close()
    keys = cp.statement["keys"]
    print(f"rotation checkpoint {cp.seq}: {cp.statement['chats']} chats; key {keys['active']} "
          f"seals from now on, retired: {', '.join(keys['retired'])}", flush=True)
    return 0


def _broken(exc: ChainsBrokenError) -> int:
    """What broke, then why nothing was signed; exit 1."""
    for b in exc.breaks:
        print(describe(b))
    print(exc.message, file=sys.stderr)
    return 1


def _export_checkpoints(args: argparse.Namespace) -> int:
    app = plain_app(args.store)
    try:
        lines = [cp.to_json() + b"\n" for cp in checkpoint_log(app).all()]
    finally:
        app.close()
    if args.output:
        Path(args.output).write_bytes(b"".join(lines))
    else:
        sys.stdout.buffer.writelines(lines)
        sys.stdout.flush()
    return 0


def _retention(args: argparse.Namespace) -> int:
    if not args.key:
        raise InvalidRequestError(f"give --key or set {PRIVATE_ENV}")
    try:
        policy = Policy.parse(json.loads(_read(args.policy)))
    except ValueError as exc:
        raise InvalidRequestError(f"{args.policy} is not JSON: {exc}") from None
    signer = Signer.load(args.key)
    app = plain_app(args.store)
    try:
        removals = retention.enforce(app, policy, signer, lambda: datetime.now(UTC),
                                     dry_run=args.dry_run)
    except ChainsBrokenError as exc:
        return _broken(exc)
    finally:
        app.close()
    verb = "would remove" if args.dry_run else "removed"
    for r in removals:
        print(f"{verb} chat {r.chat_id} (tenant {r.tenant}, {r.version} events, "
              f"last activity {r.last_activity})")
    print(f"{verb} {len(removals)} chat(s)")
    return 0
