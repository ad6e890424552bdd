"""`interlock projections|replay|verify|audit`: the read side and the audit tools."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
import unicodedata
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO
from uuid import UUID

from eventsourcing.domain import OriginatorVersionError
from eventsourcing.postgres import PostgresApplicationRecorder

from interlock.audit import reading
from interlock.bootstrap import service_from
from interlock.cli import audit_export, audit_parquet, audit_trail, review
from interlock.domain import Interlock
from interlock.domain.chat.events import ChatEvent
from interlock.domain.errors import ChatNotFoundError, InternalError
from interlock.domain.runtime.subagents import children_of
from interlock.domain.storage.erasure import ERASED
from interlock.notify import store as notify_store
from interlock.process import tune_gc
from interlock.projections import READ_MODELS, open_views
from interlock.projections.backends.postgres import AppendWaker
from interlock.projections.interface import DecisionFilter
from interlock.projections.readmodels import SqlReadModels
from interlock.projections.views.webhooks import WebhooksView
from interlock.settings import flag_help as _help
from interlock.settings import load_settings
from interlock.stores import erasure_keys as erasure
from interlock.stores.urls import check_exists
from interlock.sweeper import Sweeper

_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})  # controls, format (bidi), line separators
if TYPE_CHECKING:
    from interlock.projections.backends.postgres import AppendWaker

VIEWS = tuple(m.name for m in READ_MODELS)
_ESSENTIALS = ("text", "ref", "name", "input", "metadata", "output", "error", "reason",
               "replace_input", "resumed_metadata", "agent", "tenant")


def _add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help=_help("memory://, sqlite:///path.db or postgresql://...",
                                         "store"))


def _service(args: argparse.Namespace) -> Interlock:
    """The store's service without agents: these tools only read and verify the log."""
    return service_from(load_settings(store=args.store), with_agents=False)


def register(subparsers: Any) -> None:
    _register_projections(subparsers)
    _register_replay(subparsers)
    _register_verify(subparsers)
    _register_audit(subparsers)


def _register_projections(subparsers: Any) -> None:
    p = subparsers.add_parser("projections", help="run or rebuild the read models",
                              description="Keep the read models (views) current, or rebuild one.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="apply new events to every view, as a worker process",
                         description="Catch every view up with the event log, then follow it. "
                                     "Resumes from each view's tracking position.")
    _add_store(run)
    run.add_argument("--once", action="store_true", help="exit once the views are current")
    run.add_argument("--poll", type=float, default=0.5,
                     help="seconds between polls of the log (0.5); on PostgreSQL "
                          "appends wake the runner at once (LISTEN/NOTIFY)")
    run.add_argument("--batch", type=int, default=1000, help="events per transaction (1000)")
    run.set_defaults(run=_run_projections)
    rebuild = sub.add_parser("rebuild", help="drop a view and replay it from the event log",
                             description="Drop the view's tables and tracking, then replay "
                                         "the whole log into it, printing progress.")
    rebuild.add_argument("name", choices=(*VIEWS, "all"), help="the view to rebuild")
    _add_store(rebuild)
    rebuild.add_argument("--batch", type=int, default=1000, help="events per transaction (1000)")
    rebuild.set_defaults(run=_rebuild)


def _register_replay(subparsers: Any) -> None:
    p = subparsers.add_parser("replay", help="print a chat's timeline and its state",
                              description="Print a chat's events (version, time, actor, event, "
                                          "essentials) and its state at that version.")
    p.add_argument("chat_id", type=UUID, help="the chat's id")
    p.add_argument("--version", type=int, default=None, help="stop at this version (default: all)")
    _add_store(p)
    p.set_defaults(run=_replay)


def _register_verify(subparsers: Any) -> None:
    p = subparsers.add_parser("verify", help="check the tamper-evident event chains",
                              description="Recompute each chat's chain with the server "
                                          "secrets (INTERLOCK_SECRET, INTERLOCK_OLD_SECRETS), "
                                          "compare with the latest signed checkpoint, and name "
                                          "the first broken version of each bad chat. Exits 1 "
                                          "if any is broken or missing.")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("chat_id", nargs="?", type=UUID, help="one chat's id")
    target.add_argument("--all", action="store_true", help="every chat in the store")
    _add_store(p)
    audit_trail.add_verify_options(p)
    p.set_defaults(run=audit_trail.verify)


def _register_audit(subparsers: Any) -> None:
    p = subparsers.add_parser("audit", help="compliance exports, keys and checkpoints",
                              description="Exports of the decision log for reviewers, and the "
                                          "signed checkpoints of the event chains.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    audit_trail.register_audit(sub, _add_store)
    review.register_evidence(sub, _add_store)
    ex = sub.add_parser("export", help="write decisions (CSV, JSON Lines, Parquet) or events",
                        description="Stream every decision in [since, until), or the stored "
                                    "events (--format events), to stdout or a file; with --key, "
                                    "take a checkpoint and sign a manifest beside the file. "
                                    "--format parquet writes decisions, calls and reviews "
                                    "into the --output directory (docs/analytics.md).")
    ex.add_argument("--since", type=datetime.fromisoformat, help="ISO-8601, inclusive")
    ex.add_argument("--until", type=datetime.fromisoformat, help="ISO-8601, exclusive")
    ex.add_argument("--format", choices=("csv", "jsonl", "events", "parquet"), default="csv",
                    help="(csv)")
    ex.add_argument("--key", help="checkpoint private key: sign a manifest (needs --output)")
    for name in ("tenant", "tool", "actor", "chat-id"):
        ex.add_argument(f"--{name}", help=f"only decisions with this {name.replace('-', ' ')}")
    ex.add_argument("--output", "-o", help="file to write (default: stdout)")
    _add_store(ex)
    ex.set_defaults(run=_export)
    er = sub.add_parser("erase", help="erase a chat's personal data (destroy its key)",
                        description="Withdraw the chat's pending calls (nothing can decide "
                                    "them once erased), then destroy its personal-data key: its "
                                    "events stay and still verify, their text, inputs, outputs "
                                    "and metadata read as erased; then rebuild the views "
                                    "without them.")
    er.add_argument("chat_id", type=UUID, help="the chat's id")
    er.add_argument("--no-rebuild", action="store_true",
                    help="leave the views as they are (rebuild them later)")
    _add_store(er)
    er.set_defaults(run=_erase)


# -- commands ------------------------------------------------------------------------------

ERASURE = "interlock:erasure"  # the actor of the withdrawals an erasure records
ERASURE_REASON = "the chat's personal data is being erased"


def _models(store: str, batch: int = 1000) -> SqlReadModels:
    models = open_views(audit_trail.open_app(store))
    for runner in models.runners:
        runner.batch_size = batch
    return models


def _progress(name: str, position: int, head: int) -> None:
    print(f"{name}: {position}/{head}", flush=True)


def _run_projections(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    models = _models(args.store, args.batch)
    sweeper = Sweeper(models.app, models)  # type: ignore[arg-type]
    tune_gc(load_settings(store=args.store).gc_threshold)
    waker = None if args.once else _append_waker(models)
    try:
        while True:
            models.catch_up(_progress)
            sweeper.sweep()  # due approvals expire here too (see docs/approvals.md)
            if args.once:
                return 1 if models.stuck() else 0
            if waker is not None:
                waker.wait(args.poll)  # woken by the append's NOTIFY, at the latest on poll
            else:
                time.sleep(args.poll)  # SQLite has no LISTEN/NOTIFY: poll the log
    except KeyboardInterrupt:
        return 0
    finally:
        if waker is not None:
            waker.close()
        models.close()


def _append_waker(models: SqlReadModels) -> AppendWaker | None:
    """LISTEN/NOTIFY on PostgreSQL; None where appends notify no one (SQLite)."""
    recorder = models.app.recorder
    if not isinstance(recorder, PostgresApplicationRecorder):
        return None
    return AppendWaker(recorder)


def _rebuild(args: argparse.Namespace) -> int:
    _rebuild_views(args.store, args.name, args.batch)
    return 0


def _rebuild_views(store: str, name: str, batch: int = 1000) -> None:
    models = _models(store, batch)
    try:
        for runner in models.runners:
            if name in ("all", runner.name):
                started = time.perf_counter()
                position = runner.rebuild(_progress)
                print(f"{runner.name}: rebuilt to {position} in "
                      f"{time.perf_counter() - started:.1f}s", flush=True)
    finally:
        models.close()


def _essentials(event: ChatEvent) -> str:
    data = event.model_dump(mode="json", include=set(_ESSENTIALS))
    if "message" in type(event).model_fields:
        data["text"] = getattr(event, "message").text  # noqa: B009
    shown = {k: v for k, v in data.items() if v not in (None, {}, "")}
    return json.dumps(shown, ensure_ascii=False)[:160]


def _replay(args: argparse.Namespace) -> int:
    """The timeline and state; 1 when the chat's chain does not verify (it says where)."""
    app = audit_trail.open_app(args.store)
    broken = reading.verifier(app, app.sealer.keys).verify_chat(args.chat_id)
    try:
        shown = _show(app, args)
    except ChatNotFoundError:
        print(f"chat {args.chat_id} not found", file=sys.stderr)
        return 2
    except OriginatorVersionError:  # a version is missing: the log refuses to load
        print(f"chat {args.chat_id}: cannot be replayed: its versions skip", file=sys.stderr)
        shown = 1
    except InternalError as exc:  # a record that contradicts itself is refused on read
        print(f"chat {args.chat_id}: cannot be replayed: {exc}", file=sys.stderr)
        shown = 1
    if broken is not None:
        print(f"{audit_trail.describe(broken)} (the log was changed: nothing above from "
              "there on can be trusted; run interlock verify)", file=sys.stderr)
        return 1
    return shown


def _show(app: Interlock, args: argparse.Namespace) -> int:
    chat = app.get_chat(args.chat_id, version=args.version)
    erased = audit_trail.keys_of(app).erased_at(args.chat_id)
    if erased is not None:
        print(f"personal data of this chat was erased at {erased}: shown as {ERASED!r}")
    for event in app.events.get(args.chat_id, lte=chat.version):
        _print_event(event, sys.stdout)
    state = chat.state
    print()
    print(_shown(f"state at version {chat.version}: status={state.status} agent={state.agent} "
                 f"tenant={state.tenant} messages={len(state.messages)}"))
    for call in state.calls.values():
        print(_shown(f"  call {call.ref} {call.name} {call.status}" + (
            f" decided by {call.decided_by} ({call.decision})" if call.decided_by else "")))
    return 0


def _print_event(event: Any, out: TextIO) -> None:
    actor = _shown(getattr(event, "actor", None) or "-")
    out.write(f"{event.originator_version:>5}  {event.timestamp.isoformat()}  {actor:<12} "
              f"{type(event).__name__:<16} {_shown(_essentials(event))}\n")


def _shown(text: str) -> str:
    """Text from models and clients with control and format characters escaped.

    Raw, an ESC or CSI sequence would drive the reader's terminal (rewrite lines, retitle
    windows), bidi overrides would reorder what the auditor sees, a newline would forge
    a line.
    """
    return "".join(ch if unicodedata.category(ch) not in _HIDDEN
                   else f"\\u{ord(ch):04x}" for ch in text)


def _export(args: argparse.Namespace) -> int:
    if args.format == "parquet":
        return _export_parquet(args)
    if args.key and not args.output:
        print("interlock audit: a signed export needs --output", file=sys.stderr)
        return 2
    check_exists(args.store)  # an export of a store that is not there is an error, not empty
    signed = audit_export.checkpoint_now(args) if args.key else None
    if args.format == "events":
        with open(args.output, "w", encoding="utf-8") if args.output else _stdout() as out:
            audit_export.write_events(args, out)
    else:
        _export_decisions(args)
    if signed is not None:
        print(f"manifest: {audit_export.write_manifest(args, *signed)}")
    return 0


def _export_parquet(args: argparse.Namespace) -> int:
    problem = audit_parquet.problem(args)
    if problem is not None:
        print(f"interlock audit export: {problem}", file=sys.stderr)
        return 2
    check_exists(args.store)
    models = _models(args.store)
    try:
        models.catch_up()
        counts = audit_parquet.write(args, models)
    except OSError as exc:  # the disk, not the log: nothing of this export is left
        print(f"interlock audit export: cannot write {args.output}: {exc}", file=sys.stderr)
        return 1
    finally:
        models.close()
    print(", ".join(f"{args.output}/{name}.parquet: {n:,} rows" for name, n in counts.items()))
    return 0


def _stdout() -> Any:
    return contextlib.nullcontext(sys.stdout)


def _export_decisions(args: argparse.Namespace) -> None:
    f = DecisionFilter(since=args.since, until=args.until, tenant=args.tenant, tool=args.tool,
                       actor=args.actor, chat_id=args.chat_id)
    models = _models(args.store)
    try:
        models.catch_up()
        out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
        try:
            out.writelines(models.export_decisions(f, args.format))
        finally:
            if out is not sys.stdout:
                out.close()
    finally:
        models.close()


def _close_pending(app: Interlock, chat_id: UUID) -> list[str]:
    """Withdraw the chat's pending calls, if it can still be erased (it has its key).

    Once erased, the chat takes no vote and no model answer: what is pending would wait in
    the inbox for ever (issue 25, D31), so it is closed first, as recorded events."""
    chat = app.get_chat(chat_id)  # an unknown chat is an error, not a no-op
    if not audit_trail.keys_of(app).readable(chat_id):  # in plaintext, or erased already
        return []
    withdrawn = chat.close_pending(actor=ERASURE, reason=ERASURE_REASON)
    app.commit(chat)
    return withdrawn


def _erase_with_copies(
    app: Interlock, chat_id: UUID,
) -> list[tuple[UUID, list[str], str, str]]:
    """Erase the chat, every fork of it and every sub-agent chat its calls started, and
    theirs too (their history is the same person's data): (chat, calls withdrawn, when
    erased, what it is to the chat asked for) each, the chat first.

    Each is recorded as erasing before its key goes, so no fork of it is made from then
    on (`Interlock.begin_erasure`); the forks it names are all made before that."""
    erased: list[tuple[UUID, list[str], str, str]] = []
    todo, seen = [(chat_id, "")], set()
    while todo:
        current, what = todo.pop(0)
        if current in seen:
            continue
        seen.add(current)
        # A fork's copied calls are gone with its key (an erased ChatForked holds no call),
        # so an event deciding one could not be read back: its pending calls are left, and
        # leave the inbox when the views are rebuilt. (An unknown chat is refused here.)
        withdrawn = _close_pending(app, current) if current == chat_id else []
        # Nothing is recorded of an erasure that cannot happen: a chat in plaintext would
        # be left refusing every command (`ErasureBegun`) with its data still there.
        audit_trail.keys_of(app).check_erasable(current)
        children = _subagent_chats(app, current)
        forks = app.begin_erasure(current, actor=ERASURE)
        todo.extend((fork, f"a fork of {chat_id}'s history") for fork in forks)
        todo.extend((child, f"a sub-agent chat of {chat_id}'s") for child in children)
        erased.append((current, withdrawn, audit_trail.keys_of(app).erase(current), what))
    return erased


def _subagent_chats(app: Interlock, chat_id: UUID) -> list[UUID]:
    """The sub-agent chats the chat's calls started: what its model sent them is its data.
    Asked one by one, not read together (`get_chats`), which leaves out a chat whose log
    does not load: erase must stop on it, not pass it by."""
    found = []
    for child in children_of(app.get_chat(chat_id)):
        try:
            app.chat_events(child, limit=1)
        except ChatNotFoundError:
            continue  # the call was no sub-agent's, or its chat was never started
        found.append(child)
    return found


def _erase(args: argparse.Namespace) -> int:
    app = audit_trail.open_app(args.store)
    try:
        erased = _erase_with_copies(app, args.chat_id)
    finally:
        app.close()
    for chat_id, withdrawn, when, what in erased:
        if withdrawn:
            print(f"withdrew its pending calls as {ERASURE}: {', '.join(withdrawn)}")
        print(f"chat {chat_id}{f' ({what})' if what else ''}: personal data erased at {when}")
        _forget_notifications(args.store, chat_id)
    if not args.no_rebuild:
        # Other processes (a server's view runner) read with keys cached for up to TTL:
        # a rebuild before they expire could be raced by one writing the plaintext back.
        print(f"rebuilding the views in {erasure.TTL:g}s, once no process holds the key",
              flush=True)
        time.sleep(erasure.TTL + 0.5)
        for chat_id, *_ in erased:  # rows such a process wrote meanwhile
            _forget_notifications(args.store, chat_id)
        _rebuild_views(args.store, "all")
    return 0


def _forget_notifications(store: str, chat_id: UUID) -> None:
    """The chat's webhook notifications lose the text its events no longer show (the
    outbox outlives rebuilds, so a rebuild would not remove it), and what the notifier
    queued for it is never sent."""
    models = _models(store)
    assert isinstance(models.app, Interlock), "_models opens the service"
    try:
        count = models.view(WebhooksView).forget_chat(str(chat_id))
        unsent = notify_store.forget_chat(models.app, str(chat_id))
    finally:
        models.close()
    if count:
        print(f"chat {chat_id}: {count} webhook notifications redacted", flush=True)
    if unsent:
        print(f"chat {chat_id}: {unsent} approver notifications not sent", flush=True)
