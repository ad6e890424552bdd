"""Enforce a retention policy: verify, log the removal (signed), delete, checkpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder
from psycopg.sql import SQL, Identifier

from interlock.audit import reading
from interlock.audit.checkpoint_log import (
    ChainsBrokenError,
    CheckpointLog,
    RetentionLog,
    take_checkpoint,
)
from interlock.audit.integrity import Verifier, decoder
from interlock.audit.retention_policy import Entry, Policy, Removal, make_entry
from interlock.audit.signing import Signer
from interlock.domain import Interlock
from interlock.domain.chat.events import ChatStarted
from interlock.domain.errors import InvalidRequestError


def chat_facts(app: Interlock) -> dict[str, tuple[str, datetime]]:
    """Each chat's tenant and the time of its last event, read from the log. Streams that
    are no chat (webhook subscriptions, notification channels, reviews: settings and
    evidence, not a conversation) are not chats' to expire."""
    decode, tenants, last = decoder(app.mapper), {}, {}
    for n in Verifier(app.recorder, app.mapper, None).notifications():
        key = str(n.originator_id)
        if n.originator_version == 1 and n.topic == ChatStarted.TOPIC:
            tenants[key] = str(json.loads(decode(n.state)).get("tenant"))
        if key in tenants:
            last[key] = n.state
    return {k: (tenants[k], datetime.fromisoformat(
        json.loads(decode(state))["timestamp"])) for k, state in last.items()}


def expired(app: Interlock, policy: Policy, now: datetime) -> list[Removal]:
    """The chats the policy removes now; every chain must verify first."""
    verifier = reading.verifier(app, app.sealer.keys)
    breaks = verifier.verify_all()
    if breaks:
        raise ChainsBrokenError(breaks)
    heads = verifier.heads()
    found = []
    for chat_id, (tenant, last) in chat_facts(app).items():
        rule = policy.rule(tenant)
        if rule is not None and rule.expired(last, now):
            found.append(Removal(chat_id, tenant, *heads[chat_id], last.isoformat()))
    return found


def enforce(app: Interlock, policy: Policy, signer: Signer, now: Callable[[], datetime],
            *, dry_run: bool = False) -> list[Removal]:
    """Remove expired chats: log them (signed) first, delete, then sign a checkpoint.

    A policy under the minimum retention (its `override` given) is logged even when it
    removes nothing: the override itself is on record."""
    removals = expired(app, policy, now())
    if dry_run or not (removals or policy.override):  # an override is recorded, even idle
        return removals
    log = RetentionLog(app.factory.aggregate_recorder("retention"))
    entries = log.all()
    entry = make_entry(removals, prev=entries[-1] if entries else None, policy=policy,
                       at=now().isoformat(), key_id=signer.key_id, sign=signer.sign)
    log.append(entry)
    removed = [UUID(r.chat_id) for r in removals]
    if app.snapshot_store is not None:  # first: a snapshot is only a copy of the log
        app.snapshot_store.delete(removed)
    delete_chats(app.recorder, removed)
    checkpoint(app, signer, [*entries, entry], now)
    return removals


def checkpoint(app: Interlock, signer: Signer, entries: list[Entry],
               now: Callable[[], datetime]) -> None:
    take_checkpoint(CheckpointLog(app.factory.aggregate_recorder("checkpoints")),
                    reading.verifier(app, app.sealer.keys), key_id=signer.key_id,
                    sign=signer.sign, now=lambda: now().isoformat(), retention=entries)


def delete_chats(recorder: ApplicationRecorder, chat_ids: list[UUID]) -> None:
    """Delete every event of these chats, in one transaction."""
    if isinstance(recorder, PostgresApplicationRecorder):
        statement = SQL("DELETE FROM {}.{} WHERE originator_id = ANY(%s)").format(
            Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name))
        with recorder.datastore.transaction(commit=True) as curs:
            curs.execute(statement, (chat_ids,))
    elif isinstance(recorder, SQLiteApplicationRecorder):
        with recorder.datastore.transaction(commit=True) as curs:
            for chat_id in chat_ids:  # the table name is the library's own, not input
                curs.execute(f"DELETE FROM {recorder.events_table_name} "
                             "WHERE originator_id = ?", (chat_id.hex,))
    else:
        raise InvalidRequestError("retention needs a SQLite or PostgreSQL store")
