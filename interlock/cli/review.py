"""`interlock review ...`: run review queries and keep reviews from the command line.

The same desk as the API (interlock/reviewing.py): a query means the same in both. The
actor of each step is `--actor`; `--keys` names the keys file that says who holds a key
now (what `revoked_actor` compares against).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from interlock.api.auth import load_auth
from interlock.audit import evidence
from interlock.cli import audit_trail
from interlock.cli.audit_trail import PRIVATE_ENV
from interlock.domain.errors import InvalidRequestError
from interlock.domain.review.queries import CUSTOM, SHIPPED, resolve
from interlock.domain.review.sampling import STRATA
from interlock.domain.review.service import Reviews
from interlock.projections import open_views
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk
from interlock.settings import flag_help, load_settings


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("review", help="compliance review: queries, samples, findings",
                              description="Run review queries over the decision log and keep "
                                          "reviews of seeded samples (docs/review.md).")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("queries", help="list the shipped queries")
    # Taken as every review command takes it (it was refused as an unknown argument); the
    # shipped queries are the same in every store, so none is opened.
    listing.add_argument("--store", help="not needed: the shipped queries are the same in "
                                         "every store")
    listing.set_defaults(run=_queries)
    q = _with_query(sub.add_parser("query", help="run a query; one JSON line per decision"))
    q.add_argument("--limit", type=int, default=100, help="decisions at most (100)")
    q.set_defaults(run=_query)
    o = _with_query(sub.add_parser("open", help="open a review of a seeded sample"))
    o.add_argument("--actor", required=True, help="who opens it")
    o.add_argument("--size", type=int, required=True, help="items to draw")
    o.add_argument("--strata", default="", help=f"comma-separated, among {', '.join(STRATA)}")
    o.add_argument("--seed", help="the sample's seed (made and recorded if not given)")
    o.set_defaults(run=_open)
    a = _with_review(sub.add_parser("assess", help="assess one item: ok or a finding"))
    a.add_argument("item", type=int, help="the item's number")
    a.add_argument("--verdict", choices=("ok", "finding"), required=True)
    a.add_argument("--severity", choices=("low", "medium", "high", "critical"))
    a.add_argument("--note", default="")
    a.set_defaults(run=_assess)
    s = _with_review(sub.add_parser("sign-off", help="sign off once every item is assessed"))
    s.add_argument("--note", default="")
    s.set_defaults(run=_sign_off)
    _with_review(sub.add_parser("close", help="close a signed-off review")).set_defaults(
        run=_close)
    pop = sub.add_parser("population", help="write the population a review was drawn from",
                         description="Run the review's recorded query again and write its "
                                     "answer, one JSON line per candidate (chat_id, version, "
                                     "strata): tools/verify_export.py --population draws the "
                                     "sample again from it. The same answer as at the draw "
                                     "while no decision it selects was added since.")
    pop.add_argument("review_id", type=UUID)
    pop.add_argument("--output", "-o", required=True, help="the JSON Lines file to write")
    _add_store(pop)
    pop.set_defaults(run=_population)
    show = sub.add_parser("show", help="print a review as JSON")
    show.add_argument("review_id", type=UUID)
    _add_store(show)
    show.set_defaults(run=_show)


def _add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help=flag_help("memory://, sqlite:///path.db or postgresql://...",
                                             "store"))


def _with_query(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("name", help=f"one of {', '.join(SHIPPED)}, or custom (with --filter)")
    p.add_argument("--tenant", required=True, help="whose decisions")
    p.add_argument("--filter", help="a custom query's filter (docs/review.md)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter; VALUE is read as JSON when it parses (10, \"x\")")
    p.add_argument("--keys", type=Path, help="the server's API keys file (for revoked_actor)")
    _add_store(p)
    return p


def _with_review(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("review_id", type=UUID)
    p.add_argument("--actor", required=True, help="who takes this step")
    _add_store(p)
    return p


def params(pairs: list[str]) -> dict[str, Any]:
    """`name=value` pairs; a value that parses as JSON is taken as such, else as text."""
    found: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise InvalidRequestError(f"--param takes NAME=VALUE, not {pair!r}")
        try:
            found[name] = json.loads(value)
        except ValueError:
            found[name] = value
    return found


@contextmanager
def desk(args: argparse.Namespace) -> Iterator[ReviewDesk]:
    """A desk over the store, its views caught up first."""
    app = audit_trail.open_app(args.store)
    models = open_views(app)
    try:
        models.catch_up()
        keys = getattr(args, "keys", None)
        auth = load_auth(keys) if keys is not None else None
        principals = None if auth is None or auth.keys is None else {
            p.id for p in auth.keys.values() if p.tenant == getattr(args, "tenant", None)}
        second = load_settings(store=args.store).second_signer_tenants()
        yield ReviewDesk(Reviews(app), models.view(ReviewsView), principals, second)
    finally:
        models.close()
        app.close()


def _print(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, default=str))


def _queries(args: argparse.Namespace) -> int:
    for q in SHIPPED.values():
        _print(q.model_dump(mode="json"))
    return 0


def _query(args: argparse.Namespace) -> int:
    with desk(args) as d:
        bound, page = d.run(args.tenant, args.name, params(args.param), args.filter,
                            max(1, min(args.limit, 10_000)))
        for fact in page.items:
            _print(fact.model_dump(mode="json"))
    more = " (more: raise --limit)" if page.next_cursor else ""
    print(f"{bound.name} v{bound.version}: {len(page.items)} decision(s){more}", file=sys.stderr)
    return 0


def _open(args: argparse.Namespace) -> int:
    strata = [s for s in args.strata.split(",") if s]
    with desk(args) as d:
        review = d.open(args.tenant, args.actor, args.name, params=params(args.param),
                        custom=args.filter, size=args.size, strata=strata, seed=args.seed)
    _print({"review_id": str(review.id), "seed": review.state.sample.seed,
            "population": review.state.sample.population, "items": len(review.state.items)})
    return 0


def _reviews(args: argparse.Namespace) -> Iterator[Reviews]:
    app = audit_trail.open_app(args.store)
    try:
        yield Reviews(app)
    finally:
        app.close()


def _step(args: argparse.Namespace, what: str) -> int:
    for reviews in _reviews(args):
        if what == "assess":
            reviews.assess(args.review_id, args.item, actor=args.actor, verdict=args.verdict,
                           note=args.note, severity=args.severity)
        elif what == "sign-off":
            reviews.sign_off(args.review_id, actor=args.actor, note=args.note)
        else:
            reviews.close(args.review_id, actor=args.actor)
    print(f"review {args.review_id}: {what} recorded")
    return 0


def _assess(args: argparse.Namespace) -> int:
    return _step(args, "assess")


def _sign_off(args: argparse.Namespace) -> int:
    return _step(args, "sign-off")


def _close(args: argparse.Namespace) -> int:
    return _step(args, "close")


def _show(args: argparse.Namespace) -> int:
    for reviews in _reviews(args):
        review = reviews.get(args.review_id)
        _print({"id": str(review.id), "version": review.version,
                **review.state.model_dump(mode="json", exclude={"chain_tip"})})
    return 0


def _population(args: argparse.Namespace) -> int:
    with desk(args) as d:
        state = d.reviews.get(args.review_id).state
        q = state.query
        bound = resolve(q.name, q.params, q.filter if q.name == CUSTOM else None)
        found = d.view.population(state.tenant, bound.node, state.sample.strata)
    with open(args.output, "w", encoding="utf-8") as out:
        for c in sorted(found, key=lambda c: (c.chat_id, c.version)):
            out.write(json.dumps({"chat_id": c.chat_id, "version": c.version,
                                  "strata": list(c.strata)}, ensure_ascii=False) + "\n")
    print(f"{args.output}: {len(found)} candidate(s); the review recorded "
          f"{state.sample.population}")
    return 0


# -- interlock audit evidence ------------------------------------------------------------------


def register_evidence(sub: Any, add_store: Any) -> None:
    """`interlock audit evidence`: registered among the audit commands (cli/audit.py)."""
    ev = sub.add_parser("evidence", help="write a review's signed evidence pack",
                        description="Take a checkpoint, then write one zip with the review "
                                    "(query, version, parameters, seed, findings, sign-off), "
                                    "the events of every item's chat and their proofs against "
                                    "the signed checkpoint; tools/verify_export.py checks it.")
    ev.add_argument("--review", required=True, type=UUID, help="the review's id")
    ev.add_argument("--key", default=os.environ.get(PRIVATE_ENV),
                    help=f"the checkpoint private key file (default: {PRIVATE_ENV})")
    ev.add_argument("--output", "-o", required=True, help="the zip to write")
    add_store(ev)
    ev.set_defaults(run=_evidence)


def _evidence(args: argparse.Namespace) -> int:
    signer = audit_trail.signer_of(args)
    app = audit_trail.open_app(args.store)
    try:
        manifest = evidence.write(app, args.review, signer, Path(args.output),
                                  progress if sys.stderr.isatty() else None)
    finally:
        app.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"evidence pack {args.output}: review {args.review}, checkpoint "
          f"{manifest['checkpoint']['statement']['seq']}")
    return 0


def progress(what: str, done: int, total: int) -> None:
    """One line redrawn in place on a terminal."""
    print(f"\r{what}: {done}/{total}", end="", file=sys.stderr, flush=True)
