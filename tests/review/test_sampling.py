"""Seeded samples: each method's rule (domain/review/sampling.py), the store drawing what the
rule draws (SQLite and PostgreSQL), and the reviews recording the method that drew them."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from interlock import reviewing
from interlock.cli.main import main
from interlock.domain.review.events import SampleRecord
from interlock.domain.review.queries import resolve
from interlock.domain.review.sampling import (
    METHOD,
    METHODS,
    Candidate,
    Method,
    allot,
    draw,
    key_word,
    lookup3,
    rank,
    ranking,
)
from interlock.domain.review.service import Reviews
from interlock.projections.views import reviews as reviews_module
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk
from tests.review.history import ACTIVE, TENANT, History
from tests.review.test_evidence import keys, verifier  # noqa: F401 - keys: the fixture

EVERYTHING = "kind != 'expire'"
TOOL = Path(__file__).parents[2] / "tools" / "verify_export.py"


def _people(n: int, strata: int = 1) -> list[Candidate]:
    return [Candidate(f"c{i:05}", i, "r", strata=(f"s{i % strata}",)) for i in range(n)]


@pytest.mark.parametrize("method", METHODS)
def test_a_sample_does_not_depend_on_the_order_the_population_was_read(method: Method) -> None:
    people = [Candidate(f"c{i}", i, "r", strata=(("bob", "dave")[i % 2],)) for i in range(100)]
    drawn = draw(people, 10, "seed", method)
    assert draw(list(reversed(people)), 10, "seed", method) == drawn
    assert sorted(c.strata for c in drawn) == [("bob",)] * 5 + [("dave",)] * 5  # stratified
    assert draw(people, 1000, "seed", method) == sorted(
        people, key=lambda c: (c.strata, ranking("seed", method)(c)))


def test_sha256_v1_ranks_as_it_always_did() -> None:
    people = _people(50)
    assert draw(people, 5, "q3", "sha256-v1") == sorted(
        people, key=lambda c: rank("q3", c.key))[:5]
    assert rank("q3", "c#1").hex().startswith("085df44f")  # SHA-256("q3\nc#1")


@pytest.mark.parametrize("method", METHODS)
def test_the_same_seed_draws_the_same_and_seeds_draw_independent_samples(method: Method) -> None:
    """100 of 1,000 under 40 seeds: two samples share 10 items on average, as two simple
    random samples do; a weak mix (the seed's word xor'd with the key's) shares far more
    for some pairs of seeds."""
    people = _people(1000)
    samples = [frozenset(c.key for c in draw(people, 100, f"seed{i}", method))
               for i in range(40)]
    assert draw(people, 100, "seed0", method) == draw(people, 100, "seed0", method)
    overlaps = [len(a & b) for a, b in itertools.combinations(samples, 2)]
    assert 8 < sum(overlaps) / len(overlaps) < 12
    assert max(overlaps) < 30
    drawn = [c for s in samples for c in s]
    assert max(drawn.count(c.key) for c in people) < 16  # each is drawn 4 times in 40


def test_strata_get_seats_in_proportion_to_their_size() -> None:
    people = _people(600, 1) + [Candidate(f"d{i}", i, "r", strata=("s1",)) for i in range(300)] \
        + [Candidate(f"e{i}", i, "r", strata=("s2",)) for i in range(100)]
    for method in METHODS:
        drawn = draw(people, 10, "x", method)
        # one seat each first, then 7 by size (4.2, 2.1, 0.7) and the largest remainders
        assert [c.strata[0] for c in drawn] == ["s0"] * 5 + ["s1"] * 3 + ["s2"] * 2
    assert allot({("a",): 1, ("b",): 999}, 2) == {("a",): 1, ("b",): 1}  # one each first


def test_lookup3_is_postgresql_hashint4extended() -> None:
    # Values printed by PostgreSQL 15: SELECT hashint4extended(1, 12345), ...
    assert lookup3(1, 0) == -3670598878359251130
    assert lookup3(1, 12345) == 7674959907070967340
    assert lookup3(-7 & 0xFFFFFFFF, -99999999999) == 5474148781857984764
    assert key_word("c#1") == int.from_bytes(bytes.fromhex("e82df9db569b7728"), "big", signed=True)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("strata", [(), ("actor",), ("tool", "kind")])
@pytest.mark.parametrize("size", [1, 3, 9])
def test_the_store_draws_what_the_rule_draws_over_the_whole_population(
    view: ReviewsView, strata: tuple[str, ...], size: int, method: Method,
) -> None:
    node = resolve("custom", custom=EVERYTHING).node
    for seed in ("a", "b", "c"):
        drawn, sizes = view.sample(TENANT, node, strata, size, seed, method)
        everyone = view.population(TENANT, node, strata)
        assert drawn == draw(everyone, size, seed, method)
        assert sum(sizes.values()) == len(everyone) == 9


@pytest.mark.parametrize("strata", [(), ("actor",), ("tool", "kind")])
def test_a_stratum_short_of_its_seats_below_its_threshold_is_ranked_again_whole(
    view: ReviewsView, strata: tuple[str, ...], monkeypatch: pytest.MonkeyPatch,
) -> None:
    node = resolve("custom", custom=EVERYTHING).node
    monkeypatch.setattr(reviews_module, "_threshold", lambda expected, size: -(2**63))
    for seed in ("a", "b"):
        drawn, _ = view.sample(TENANT, node, strata, 5, seed, "mix64-v2")
        assert drawn == draw(view.population(TENANT, node, strata), 5, seed, "mix64-v2")


def test_a_review_records_the_method_and_older_reviews_keep_theirs(
    history: History, view: ReviewsView,
) -> None:
    desk = ReviewDesk(Reviews(history.app), view, ACTIVE)
    review = desk.open(TENANT, "rita", "custom", custom=EVERYTHING, size=4, seed="m")
    assert review.state.sample.method == METHOD == "mix64-v2"
    node = resolve("custom", custom=EVERYTHING).node
    assert [(i.chat_id, i.version) for i in review.state.items] == [
        (c.chat_id, c.version) for c in draw(view.population(TENANT, node, ()), 4, "m", METHOD)]
    old = SampleRecord.model_validate({"size": 1, "strata": [], "seed": "s", "population": 1,
                                       "strata_sizes": {"": 1}})
    assert old.method == "sha256-v1"  # recorded before methods were named


def _verifier() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_export", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["verify_export"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("method", METHODS)
def test_the_verifier_draws_what_the_rule_draws(method: Method) -> None:
    verifier = _verifier()
    people = _people(300, 7)
    population = [(c.chat_id, c.version, c.strata) for c in people]
    for seed in ("a", "q3", "ü"):
        assert verifier.draw(population, 20, seed, method) == [
            (c.chat_id, c.version) for c in draw(people, 20, seed, method)]


def _population_lines() -> list[str]:
    """docs/review.md's two lines: write a review's population, verify a pack with it."""
    text = (Path(__file__).parents[2] / "docs" / "review.md").read_text()
    return [line for line in text.splitlines() if "population.jsonl" in line
            and line.startswith(("interlock review population", "python tools/verify_export"))]


@pytest.mark.parametrize("method", METHODS)
def test_the_verifier_draws_a_packs_sample_again_from_its_population(
    history: History, view: ReviewsView, keys: tuple[str, str], tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch, method: Method,
) -> None:
    monkeypatch.setattr(reviewing, "METHOD", method)  # sha256-v1: a review drawn before v2
    desk = ReviewDesk(Reviews(history.app), view, ACTIVE)
    review = desk.open(TENANT, "rita", "custom", custom=EVERYTHING, size=4, strata=("actor",),
                       seed="v")
    assert review.state.sample.method == method
    for item in review.state.items:
        desk.reviews.assess(review.id, item.n, actor="rita", verdict="ok", note="")
    desk.reviews.sign_off(review.id, actor="head")
    monkeypatch.chdir(tmp_path)  # docs/review.md's lines, run as written: cp.pub is here
    pack, population = tmp_path / "evidence.zip", tmp_path / "population.jsonl"
    assert main(["audit", "evidence", "--review", str(review.id), "--key", keys[0],
                 "--output", str(pack), "--store", history.store]) == 0
    write, check = _population_lines()
    assert main([*write.replace("REVIEW", str(review.id)).split()[1:],
                 "--store", history.store]) == 0
    code, out = verifier(*check.split()[2:])
    assert (code, out.splitlines()[-1]) == (0, "evidence pack verifies")

    rows = [json.loads(line) for line in population.read_text().splitlines()]
    drawn = {(i.chat_id, i.version) for i in review.state.items}
    left = next(r for r in rows if (r["chat_id"], r["version"]) not in drawn)
    order = ranking("v", method)
    lowest = min(order(Candidate(r["chat_id"], r["version"], "")) for r in rows
                 if r["strata"] == left["strata"])
    planted = next(f"planted-{i}" for i in itertools.count()
                   if order(Candidate(f"planted-{i}", 1, "")) < lowest)
    rows[rows.index(left)] = {**left, "chat_id": planted, "version": 1}  # same sizes
    population.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out = verifier(str(pack), "--public-key", keys[1], "--population", str(population))
    assert code == 1 and "draws other items from this population" in out
    population.write_text("".join(json.dumps(r) + "\n" for r in rows[1:]))
    code, out = verifier(str(pack), "--public-key", keys[1], "--population", str(population))
    assert code == 1 and "the review recorded 9" in out


@pytest.mark.parametrize("strata", [("actor",), ("tool", "kind")])
def test_with_more_strata_than_limits_every_row_is_ranked(
    view: ReviewsView, strata: tuple[str, ...], monkeypatch: pytest.MonkeyPatch,
) -> None:
    node = resolve("custom", custom=EVERYTHING).node
    monkeypatch.setattr(reviews_module, "_MAX_LIMITS", 1)
    for seed in ("a", "b"):
        drawn, _ = view.sample(TENANT, node, strata, 5, seed, "mix64-v2")
        assert drawn == draw(view.population(TENANT, node, strata), 5, seed, "mix64-v2")


def test_a_review_recorded_without_a_method_is_checked_as_sha256_v1() -> None:
    """An evidence pack of a review opened before methods were named: its ReviewOpened holds
    no method, its manifest (written now) says sha256-v1."""
    verifier = _verifier()
    query = {"name": "custom", "version": 1, "filter": "kind != 'expire'", "params": {}}
    sample = {"size": 0, "strata": [], "seed": "s", "population": 0, "strata_sizes": {}}
    events = [{"topic": "interlock:ReviewOpened",
               "state": json.dumps({"query": query, "sample": sample, "items": []})},
              {"topic": "interlock:ReviewSignedOff", "state": json.dumps({"actor": "head"})}]
    streams = {"r": (None, events)}
    findings = {"review_id": "r", "items": [], "signed_off_by": "head", "findings": 0}
    for method, problems in (("sha256-v1", []), ("mix64-v2", [
            "the manifest's query or sample is not the one the review recorded"])):
        manifest = {"review_id": "r", "query": query, "sample": {**sample, "method": method},
                    "receipts": {}}
        assert verifier._review(manifest, streams, findings) == problems
