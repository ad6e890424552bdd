"""Key rotation: a signed checkpoint fixes what the retired keys sealed.

`interlock audit rotate` verifies the events since the last checkpoint (with the keys'
retirement times), signs a checkpoint of every chat's head, and appends a rotation record
naming it, sealed with the active HMAC key (a retired key's holder cannot make one; a
server checks it without the checkpoint key). Every process reads the latest record at
start (`attach`): past a chat's version in that checkpoint only the active key seals
(Keyring.uncovered), on every load, checkpoint and `verify`. docs/audit.md, "Keys and
rotation", is the reference.

    record = {"format": "interlock-rotation-1", "seq": n, "checkpoint": checkpoint seq,
              "digest": the checkpoint's digest, "active": kid, "keys": {kid: retired at}}
    seal   = HMAC-SHA256(key[active], "interlock-rotation-seal-v1\\n" JCS(record))
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.persistence import AggregateRecorder, IntegrityError, StoredEvent

from interlock.audit import reading
from interlock.audit.checkpoint_log import CheckpointLog, RetentionLog, take_checkpoint
from interlock.audit.checkpoints import Checkpoint, Sign
from interlock.domain import Interlock
from interlock.domain.chat.canonical import jcs
from interlock.domain.errors import ConcurrencyError, InvalidRequestError
from interlock.domain.storage.keys import Keyring, Rotation

FORMAT = "interlock-rotation-1"
ROTATION_ID = uuid5(NAMESPACE_URL, "interlock:rotations")
TOPIC = "interlock:Rotation"
log = logging.getLogger("interlock.audit")


def _seal(keys: Keyring, record: dict[str, Any]) -> str:
    message = b"interlock-rotation-seal-v1\n" + jcs(record).encode()
    return hmac.new(keys.secret(keys.active), message, "sha256").hexdigest()


def recorder_of(app: Interlock) -> AggregateRecorder:
    """The checkpoints' table: rotation records are a stream of their own in it."""
    return app.factory.aggregate_recorder("checkpoints")


def latest(recorder: AggregateRecorder, keys: Keyring) -> Rotation | None:
    """The latest rotation record, if the active key sealed it and the checkpoint it names
    is there unchanged; None otherwise (then nothing a retired key sealed is covered)."""
    rows = recorder.select_events(ROTATION_ID, desc=True, limit=1)
    if not rows:
        return None
    record = json.loads(rows[0].state)
    seal = record.pop("seal", "")
    if record.get("format") != FORMAT or record.get("active") != keys.active \
            or not hmac.compare_digest(_seal(keys, record), str(seal)):
        log.warning("rotation record %s is not sealed by the active key %s: ignored",
                    record.get("seq"), keys.active)
        return None
    seq = int(record["checkpoint"])
    checkpoint = CheckpointLog(recorder).get(seq)
    if checkpoint is None or checkpoint.digest() != record["digest"]:
        log.warning("rotation record %s: its checkpoint %d is missing or changed: ignored",
                    record["seq"], seq)
        return None
    return Rotation(seq, frozenset(record["keys"]),
                    {UUID(h.chat_id): h.version for h in checkpoint.heads})


def attach(app: Interlock) -> Keyring:
    """Read the latest rotation into the app's keyring (its sealer's and mapper's): with a
    retired key, loads refuse what no rotation checkpoint covers."""
    keys = app.sealer.keys
    if keys.retired:
        keys = replace(keys, rotation=latest(recorder_of(app), keys))
        app.sealer.keys = app.mapper.keys = keys
    return keys


def not_rotated(keys: Keyring) -> str | None:
    """Why a server may not start with these keys (a retired key no rotation covers)."""
    if keys.covers():
        return None
    covered = keys.rotation.keys if keys.rotation is not None else frozenset()
    missing = sorted(set(keys.retired) - covered)
    return (f"retired key(s) {', '.join(missing)} are not covered by a rotation checkpoint: "
            "nothing would tell their holder's new events from old ones; run `interlock "
            "audit rotate --key FILE` with these settings first (docs/audit.md, \"Keys and "
            "rotation\")")


def rotate(app: Interlock, *, key_id: str, sign: Sign, now: Callable[[], str]) -> Checkpoint:
    """Verify, sign the rotation checkpoint and record it; the app's keyring then uses it."""
    keys = attach(app)
    at = datetime.fromisoformat(now())
    covered = keys.rotation.keys if keys.rotation is not None else frozenset()
    if not keys.retired:
        raise InvalidRequestError("nothing to rotate: no key is retired (move the old secret "
                                  "to INTERLOCK_OLD_SECRETS as SECRET@RETIRED-AT)")
    early = sorted(k for k, when in keys.retired.items() if when > at)
    if early:
        raise InvalidRequestError(f"key(s) {', '.join(early)} retire in the future: rotate "
                                  "once no process seals with them", keys=early)
    if set(keys.retired) <= covered:
        raise InvalidRequestError(f"every retired key is covered by rotation checkpoint "
                                  f"{keys.rotation.seq if keys.rotation else 0}: nothing to "
                                  "rotate")
    checkpoints = CheckpointLog(recorder_of(app))
    checkpoint = take_checkpoint(
        checkpoints, reading.verifier(app, replace(keys, rotating=True)), key_id=key_id,
        sign=sign, now=now, retention=RetentionLog(app.factory.aggregate_recorder(
            "retention")).all(), rotating=True)
    previous = checkpoints.recorder.select_events(ROTATION_ID, desc=True, limit=1)
    record: dict[str, Any] = {
        "format": FORMAT, "seq": previous[0].originator_version + 1 if previous else 1,
        "checkpoint": checkpoint.seq, "digest": checkpoint.digest(), "active": keys.active,
        "keys": {k: when.isoformat() for k, when in sorted(keys.retired.items())}}
    record["seal"] = _seal(keys, record)
    try:
        checkpoints.recorder.insert_events([StoredEvent(ROTATION_ID, record["seq"], TOPIC,
                                                        jcs(record).encode())])
    except IntegrityError:
        raise ConcurrencyError(ROTATION_ID) from None
    attach(app)
    return checkpoint
