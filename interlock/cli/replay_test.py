"""`interlock replay-test` and `interlock policy what-if`: a new agent version against the
recorded chats of a store, which it only reads (docs/replay.md)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from interlock.bootstrap import load_agents, model_resolver
from interlock.cli import policy as data_policies
from interlock.domain.application import Interlock
from interlock.domain.errors import ConfigurationError
from interlock.replay import (
    ReplayOptions,
    Report,
    Selection,
    load_allowed,
    open_recorded,
    replay_recorded,
)
from interlock.replay.source import started_chats
from interlock.replay.whatif import table, what_if
from interlock.settings import flag_help as _help
from interlock.settings import load_settings

BAR = 30  # characters of the progress bar


def register(subparsers: Any) -> None:
    _register_replay_test(subparsers)
    _register_policy(subparsers)


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agents", required=True,
                   help="module:attribute holding the new version's Agent or list of them")
    p.add_argument("--store", help=_help("the recorded store (only read)", "store"))
    p.add_argument("--since", type=datetime.fromisoformat,
                   help="only chats started at or after this ISO-8601 time")
    p.add_argument("--until", type=datetime.fromisoformat,
                   help="only chats started before this ISO-8601 time")
    p.add_argument("--agent", help="only chats of this (recorded) agent")
    p.add_argument("--limit", type=_positive, help="at most this many chats")


def _register_replay_test(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay-test", help="replay recorded chats on a new agent version",
        description="Feed each recorded chat's messages and decisions to the new agents with "
        "recorded model answers (keyed by the exact request) and recorded tool outputs (no "
        "tool runs); report each chat identical or its first difference by kind. Exits 1 on "
        "any difference --allow does not list, 2 on a mistake. Never writes to the store.")
    _add_selection(p)
    p.add_argument("--chats", nargs="+", type=UUID, metavar="ID", help="only these chats")
    p.add_argument("--baseline", help="module:attribute holding the agents the chats were "
                   "recorded with (default: INTERLOCK_AGENTS), to rebuild recorded requests")
    p.add_argument("--allow", type=Path, metavar="FILE",
                   help='JSON list of accepted differences: [{"kind", "chat_id"?, "agent"?, '
                   '"event"?, "why"?}]')
    p.add_argument("--report", type=Path, metavar="FILE", help="write the report as JSON")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML (one case a chat)")
    p.add_argument("--live-model", action="store_true",
                   help="call the new agents' own models (real ones cost money) instead of "
                   "answering from the recording; report how the answers differ")
    p.set_defaults(run=run_replay_test)


def _register_policy(subparsers: Any) -> None:
    p = subparsers.add_parser("policy", help="approval policies against the recorded calls",
                              description="Questions about approval policies, asked of the log.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    w = sub.add_parser(
        "what-if", help="which recorded calls new policies would hold, release or route",
        description="Judge every recorded tool call under the new agents' policies: held "
        "(was not), released (was held), routed (other roles or groups), quorum (another "
        "count), counted by agent and tool, with examples. Only reads the store.")
    _add_selection(w)
    w.add_argument("--report", type=Path, metavar="FILE", help="write the counts as JSON")
    w.set_defaults(run=run_what_if)
    data_policies.register(sub)  # `policy list`, `policy data-what-if`: a tenant's data policies


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _selection(args: argparse.Namespace) -> Selection:
    if args.since and args.until and args.since >= args.until:
        raise ConfigurationError(f"--since {args.since} is not before --until {args.until}")
    return Selection(chats=getattr(args, "chats", None) or (), agent=args.agent,
                     since=args.since, until=args.until, limit=args.limit)


def run_replay_test(args: argparse.Namespace) -> int:
    settings = load_settings(store=args.store)
    options = ReplayOptions(agents=load_agents(args.agents),
                            baselines=load_agents(args.baseline or settings.agents),
                            live_model=args.live_model, resolve_model=model_resolver())
    allowed = load_allowed(args.allow) if args.allow else []
    selection = _selection(args)
    recorded = open_recorded(settings.store, settings.keyring())
    try:
        report = replay_recorded(recorded, options, selection, allowed,
                                 progress=_progress(recorded, selection))
    finally:
        recorded.close()
    _write(args, report)
    return 0 if report.passed else 1


def _write(args: argparse.Namespace, report: Report) -> None:
    for result in report.chats:
        d = result.difference
        if d is not None:
            print(f"{result.chat_id} {result.agent}: {result.status} {d.kind} at version "
                  f"{d.version} ({d.event}) {d.detail}".rstrip())
            if d.diff and result.status == "different":
                print("    " + d.diff.replace("\n", "\n    "))
    print(report.summary())
    if args.report:
        args.report.write_text(report.to_json(), encoding="utf-8")
    if args.junit:
        args.junit.write_text(report.to_junit(), encoding="utf-8")


def _bar(total: int) -> Callable[[int], None]:
    """A progress bar on stderr: chats done of `total`, and the rate."""
    started = time.perf_counter()

    def show(done: int) -> None:
        filled = BAR * done // max(total, 1)
        rate = done / max(time.perf_counter() - started, 1e-6)
        sys.stderr.write(f"\rreplaying [{'#' * filled}{'.' * (BAR - filled)}] "
                         f"{done}/{total} chats, {rate:.0f}/s")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _progress(recorded: Interlock, selection: Selection) -> Callable[[int], None] | None:
    """A bar on a terminal only (the selection is counted first); nothing in CI logs."""
    if not sys.stderr.isatty():
        return None
    return _bar(sum(1 for _ in started_chats(recorded, selection)))


def run_what_if(args: argparse.Namespace) -> int:
    settings = load_settings(store=args.store)
    agents = load_agents(args.agents)
    recorded = open_recorded(settings.store, settings.keyring())
    try:
        result = what_if(recorded, agents, _selection(args))
    finally:
        recorded.close()
    for line in table(result):
        print(line)
    print(f"{result.calls} recorded calls, {result.changed()} judged otherwise")
    if args.report:
        args.report.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return 0
