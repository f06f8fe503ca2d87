"""The arena mode through the services and the views: items, serving, sides, refusals,
gold battles, the report against an independent fit, the export and the report API.

Studies and workers come from ``tests.factories.arena``.
"""

from __future__ import annotations

import csv
import itertools
import re
from collections import Counter
from datetime import timedelta

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Assignment, Item, Judgment, Participant
from annotation.modes.arena.protocol import BATTLE, CATCH, CRITERION_NAMES, OUTCOMES
from annotation.services.assignments import assignment_next
from annotation.services.exports import export_file
from annotation.services.judgments import judgment_submit
from annotation.services.participants import crowd_link_token
from annotation.services.reports import report_request
from annotation.services.runner import job_run
from annotation.services.simulation import crowd_simulate
from rubrics import arena_design
from tests.factories.arena import MODE, arena_study, judge, kept_battles, shown_left, worker

pytestmark = pytest.mark.django_db

# ------------------------------------------------------------------ settings and items


def test_defaults_and_bounds_of_the_settings():
    settings = MODE.clean_settings({})
    assert settings["battle_target"] == 1
    assert settings["adaptive"] is False
    assert settings["catch_rate"] == 0.1
    for bad in ({"min_seconds": -1}, {"bootstrap_rounds": 10}, {"cap_per_pair": 0}):
        with pytest.raises(ServiceError) as refused:
            MODE.clean_settings(bad)
        assert refused.value.field == next(iter(bad))


def test_each_image_gives_one_battle_per_pair_of_systems(researcher):
    study = arena_study(researcher, systems=("alpha", "beta", "gamma", "delta"), images=3)

    items = list(Item.objects.filter(study=study, kind=BATTLE))

    # C(4, 2) = 6 pairs on each of 3 images.
    assert len(items) == 18
    for item in items:
        assert item.spec["system_a"] < item.spec["system_b"]
    assert Counter((i.spec["system_a"], i.spec["system_b"]) for i in items) == {
        pair: 3
        for pair in [
            ("alpha", "beta"),
            ("alpha", "delta"),
            ("alpha", "gamma"),
            ("beta", "delta"),
            ("beta", "gamma"),
            ("delta", "gamma"),
        ]
    }


def test_an_unknown_anchor_is_refused_when_the_study_opens(researcher):
    with pytest.raises(ServiceError) as refused:
        arena_study(researcher, anchor_system="nobody")
    assert refused.value.field == "anchor_system"


# ------------------------------------------------------------------ serving and sides


def test_the_side_shown_left_is_stored_and_the_winner_is_restated_canonically(researcher):
    study = arena_study(researcher, images=12, catch_rate=0)
    person = worker(study)
    sides = Counter()
    for _ in range(12):
        lease, outcome = judge(person, "a")
        left = shown_left(lease)
        sides[left] += 1
        judgment = outcome.judgment
        assert judgment.payload["left"] == left
        # "A is better" names the left caption: model_a when the left one is canonical a.
        assert judgment.result["winner"] == ("model_a" if left == "a" else "model_b")
    # Sides are drawn per lease: both occur among 12 leases (seeded, so this is fixed).
    assert sides["a"] > 0 and sides["b"] > 0


def test_a_worker_never_sees_an_image_twice_and_is_capped_per_pair(researcher):
    study = arena_study(researcher, images=8, catch_rate=0, cap_per_pair=2, battle_target=3)
    person = worker(study)
    served = []
    while True:
        lease, _ = judge(person, "tie")
        if lease is None:
            break
        served.append(lease.item)

    # 3 pairs x cap 2 = 6 battles at most, every one on a different image.
    pairs = Counter((i.spec["system_a"], i.spec["system_b"]) for i in served)
    assert len(served) == 6
    assert set(pairs.values()) == {2}
    assert len({item.image_id for item in served}) == len(served)


def test_the_page_shows_both_captions_and_lists_a_key_per_outcome(client, researcher):
    study = arena_study(researcher, catch_rate=0)
    arrive(client, study, "page-worker")

    html = client.get(next_url(study)).content.decode()

    lease = Assignment.objects.get(participant__external_id="page-worker")
    texts = [c.text for c in lease.item.study.captions.filter(image_id=lease.item.image_id)]
    left = shown_left(lease)
    spec = lease.item.spec
    left_text = texts_by_id(lease)[spec["caption_a" if left == "a" else "caption_b"]]
    assert html.index("Caption A") < html.index(left_text) < html.index("Caption B")
    for key, label in (("1", "A is better"), ("2", "B is better")):
        assert f"<kbd>{key}</kbd> {label}" in html
    for value in OUTCOMES:
        assert f'id="outcome-{value}" value="{value}"' in html
    assert len(texts) == 3
    # The systems are never named on the page.
    for system in ("alpha", "beta", "gamma"):
        assert f">{system}<" not in html


# ------------------------------------------------------------------ attacks, through the views


def next_url(study):
    return reverse("participate_next", args=[study.public_id])


def arrive(client, study, pid):
    return client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "X"},
    )


def texts_by_id(lease):
    return dict(lease.item.study.captions.values_list("pk", "text"))


def token_on(html: str) -> str:
    return re.search(r'action="[^"]*/submit/([^/"]+)/', html).group(1)


def test_an_outcome_outside_the_four_is_a_400_naming_the_field(client, researcher):
    study = arena_study(researcher, catch_rate=0)
    arrive(client, study, "odd-outcome")
    html = client.get(next_url(study)).content.decode()
    submit = reverse("participate_submit", args=[study.public_id, token_on(html)])

    for bad in ("left", "A", "model_a", "", "tie (bothbad)"):
        page = client.post(submit, {"part": "0", "outcome": bad})
        assert page.status_code == 400
        assert page.context["error_fields"] == ["outcome"]
        body = page.content.decode()
        assert 'aria-describedby="arena-error"' in body
        assert "Choose one of: A is better, B is better" in body
    missing = client.post(submit, {"part": "0"})
    assert missing.status_code == 400
    assert missing.context["error_fields"] == ["outcome"]
    assert Judgment.objects.filter(study=study).count() == 0


def test_a_worker_cannot_answer_a_battle_served_to_someone_else(researcher):
    study = arena_study(researcher, catch_rate=0, battle_target=2)
    first, second = Client(REMOTE_ADDR="10.0.0.1"), Client(REMOTE_ADDR="10.0.0.2")
    arrive(first, study, "first")
    arrive(second, study, "second")
    token_first = token_on(first.get(next_url(study)).content.decode())
    token_second = token_on(second.get(next_url(study)).content.decode())

    # The second worker posts the first worker's lease token: refused, nothing stored.
    stolen = second.post(
        reverse("participate_submit", args=[study.public_id, token_first]),
        {"part": "0", "outcome": "a"},
    )
    # A made-up token, as if choosing an item of their own.
    invented = second.post(
        reverse("participate_submit", args=[study.public_id, "not-a-token"]),
        {"part": "0", "outcome": "a"},
    )
    # Asking for an item or a pair in the query changes nothing: the server serves.
    again = second.get(next_url(study), {"item": "1", "pair": "alpha,beta"}).content.decode()

    assert stolen.status_code in (400, 404, 409)
    assert invented.status_code in (400, 404, 409)
    assert token_on(again) == token_second
    assert Judgment.objects.filter(study=study).count() == 0


def test_a_worker_cannot_choose_the_pair_the_item_or_the_side_by_posting_them(researcher):
    """Fields a worker might add to the answer (another item, another pair, the side shown
    left) are ignored: the judgment is of the served battle, with the server's side."""
    study = arena_study(researcher, catch_rate=0, images=4)
    client = Client(REMOTE_ADDR="10.0.0.7")
    arrive(client, study, "chooser")
    html = client.get(next_url(study)).content.decode()
    token = token_on(html)
    lease = Assignment.objects.get(token=token)
    other = (
        Item.objects.filter(study=study, kind=BATTLE)
        .exclude(
            spec__system_a=lease.item.spec["system_a"], spec__system_b=lease.item.spec["system_b"]
        )
        .first()
    )
    page = client.post(
        reverse("participate_submit", args=[study.public_id, token]),
        {
            "part": "0",
            "outcome": "a",
            "item": str(other.pk),
            "system_a": other.spec["system_a"],
            "system_b": other.spec["system_b"],
            "left": "b" if shown_left(lease) == "a" else "a",
        },
    )
    assert page.status_code == 302
    judgment = Judgment.objects.get(study=study)
    assert judgment.item_id == lease.item_id
    assert judgment.payload["left"] == shown_left(lease)
    assert judgment.result["winner"] == ("model_a" if shown_left(lease) == "a" else "model_b")


def test_an_always_a_worker_is_caught_by_gold_battles_and_position_bias(researcher):
    # The gold rule waits for 10 gold battles, all placed before the code's count of 20
    # answers, where the answer-pattern rules apply: whichever flags them first, a flagged
    # worker is served nothing more.
    study = arena_study(
        researcher,
        images=40,
        catch_rate=0.5,
        catch_min_seen=10,
        bootstrap_rounds=20,
    )
    client = Client(REMOTE_ADDR="10.0.0.9")
    arrive(client, study, "always-a")
    for _ in range(60):
        html = client.get(next_url(study)).content.decode()
        if "action=" not in html or "/submit/" not in html:
            break
        page = client.post(
            reverse("participate_submit", args=[study.public_id, token_on(html)]),
            {"part": "0", "outcome": "a"},
        )
        assert page.status_code in (200, 302), page.content[:300]
    person = Participant.objects.get(study=study, external_id="always-a")
    gold = Judgment.objects.filter(participant=person, item__kind=CATCH)

    # Gold sides are random: an always-"A" worker misses some of the 10 (all 10 caught:
    # 1 in 1,024), and answering "A" on every battle breaks both answer-pattern rules.
    missed = sum(not j.result["catch"]["caught"] for j in gold)
    assert gold.count() >= 10 and missed > 0
    kinds = {flag["kind"] for flag in person.flags}
    assert kinds & {"catch_failed", "answer_pattern"}
    assert person.completed_at is None
    assert not Judgment.objects.filter(participant=person, excluded=False).exists()
    # The report's position-bias check flags them too (all decisive answers on the left).
    report = run_report(study, researcher)
    row = next(
        w for w in report["position_bias"]["workers"] if w["participant"] == person.pseudonym
    )
    assert row["left_share"] == 1.0 and row["position"] and row["flagged"]


def test_gold_battles_always_alter_the_caption_even_with_human_captions(researcher):
    # The rating protocols' catch trials alternate with controls (a human caption shown
    # untouched); in a battle that would be a caption against itself, with no right answer.
    study = arena_study(
        researcher,
        systems=("Human", "beta", "gamma"),
        images=30,
        catch_rate=0.5,
        catch_min_seen=100,
        completion_battles=200,
    )
    person = worker(study)
    for _ in range(25):
        judge(person, "tie")
    gold = list(Item.objects.filter(study=study, kind=CATCH))
    assert len(gold) >= 4
    texts = dict(study.captions.values_list("pk", "text"))
    for item in gold:
        assert item.spec["catch"]["kind"] in ("T_RC", "T_WP", "T_RW")
        assert item.spec["catch"]["text"] != texts[item.spec["caption_id"]]


# ------------------------------------------------------------------ the report


def run_report(study, user):
    """Run a report job as the worker does (the runner stores the result on the job)."""
    job = report_request(study=study, user=user)
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.message
    return job.result


def mm_bradley_terry(pairs, systems, weights=None):
    """Hunter's (2004) MM algorithm, ties as half a win to each side, each battle counted
    ``weight`` times; LMArena's scale with mean 1000. Written here, independent of choix
    and of rubrics.arena."""
    k = len(systems)
    index = {s: i for i, s in enumerate(systems)}
    wins = np.zeros((k, k))
    for (a, b, winner), weight in zip(pairs, weights or [1.0] * len(pairs), strict=True):
        i, j = index[a], index[b]
        score = {"model_a": 1.0, "model_b": 0.0}.get(winner, 0.5)
        wins[i, j] += weight * score
        wins[j, i] += weight * (1.0 - score)
    n = wins + wins.T
    p = np.ones(k)
    for _ in range(200_000):
        new = wins.sum(axis=1) / (n / (p[:, None] + p[None, :])).sum(axis=1)
        new /= np.exp(np.log(new).mean())
        if np.max(np.abs(new - p)) < 1e-14:
            p = new
            break
        p = new
    scores = 400 * np.log10(p)
    return dict(zip(systems, scores - scores.mean() + 1000, strict=True))


def test_the_leaderboard_equals_an_independent_fit(researcher):
    systems = ("alpha", "beta", "gamma")
    strength = {"alpha": 2, "beta": 1, "gamma": 0}
    study = arena_study(
        researcher, systems=systems, images=30, catch_rate=0, battle_target=2, bootstrap_rounds=50
    )
    rng = np.random.default_rng(3)
    people = [worker(study) for _ in range(3)]

    def answer(lease):
        # A noisy crowd favouring the stronger system, answering in the page's terms.
        spec = lease.item.spec
        gap = strength[spec["system_a"]] - strength[spec["system_b"]]
        draw = rng.random()
        canonical = "model_a" if draw < 1 / (1 + np.exp(-gap)) - 0.1 else "model_b"
        if draw > 0.9:
            return "tie" if draw > 0.95 else "bothbad"
        a_won = canonical == "model_a"
        return "a" if a_won == (shown_left(lease) == "a") else "b"

    for person in people:
        while judge(person, answer)[0] is not None:
            pass
    report = run_report(study, researcher)

    kept = Judgment.objects.filter(study=study, item__kind=BATTLE, excluded=False)
    pairs = [(j.item.spec["system_a"], j.item.spec["system_b"], j.result["winner"]) for j in kept]
    expected = mm_bradley_terry(pairs, sorted(systems))
    board = {row["system"]: row for row in report["leaderboard"]}
    assert report["battles"] == len(pairs) > 60
    for system in systems:
        assert board[system]["score"] == pytest.approx(expected[system], abs=1e-6)
        assert board[system]["ci_low"] <= board[system]["score"] <= board[system]["ci_high"]
        assert board[system]["battles"] == sum(system in (a, b) for a, b, _ in pairs)
    # Ranked by the independent fit's scores (which system the noisy crowd put first
    # depends on which battles the lease ids drew, not on the code under test).
    by_fit = sorted(systems, key=lambda system: -expected[system])
    assert [row["system"] for row in report["leaderboard"]] == by_fit
    # The count matrix counted independently.
    names = report["matrices"]["systems"]
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            assert report["matrices"]["battles"][i][j] == sum(
                {x, y} == {a, b} for x, y, _ in pairs
            ) * (a != b)
    # Position bias: share of decisive answers won by the left caption, counted here.
    shown = Counter(j.payload["outcome"] for j in kept)
    overall = report["position_bias"]["overall"]
    assert overall["decisive"] == shown["a"] + shown["b"]
    assert overall["left_share"] == pytest.approx(shown["a"] / (shown["a"] + shown["b"]))
    # Agreement on shared battles, counted here.
    by_item = {}
    for j in kept:
        by_item.setdefault(j.item_id, []).append(j.result["winner"])
    shared = [w for w in by_item.values() if len(w) == 2]
    assert report["agreement"]["shared_battles"] == len(shared)
    assert report["agreement"]["percent_agreement"] == pytest.approx(
        sum(x == y for x, y in shared) / len(shared)
    )
    assert report["reliability"]["method"].startswith("Dawid-Skene")
    assert report["length_leaderboard"] and report["length_coefficient"] is not None


def test_adaptive_pairing_stores_its_probabilities_and_the_report_balances_the_pairs(
    researcher,
):
    systems = ("alpha", "beta", "gamma", "delta")
    strength = {"alpha": 1.5, "beta": 0.5, "gamma": 0.0, "delta": -1.0}
    study = arena_study(
        researcher,
        systems=systems,
        images=40,
        catch_rate=0,
        adaptive=True,
        battle_target=5,
        bootstrap_rounds=20,
        cap_per_pair=1000,
    )
    rng = np.random.default_rng(8)

    def answer(lease):
        spec = lease.item.spec
        gap = strength[spec["system_a"]] - strength[spec["system_b"]]
        a_won = rng.random() < 1 / (1 + np.exp(-gap))
        return "a" if a_won == (shown_left(lease) == "a") else "b"

    # Named, not numbered by the factory: sides and draws follow the worker's crowd id, and
    # for some numbers (which shift whenever another test makes a worker) the first two
    # workers' battles left a system unbeaten, so no fit existed to adapt from.
    people = [worker(study, f"adaptive-{k}") for k in range(4)]
    for person in people[:2]:
        while judge(person, answer)[0] is not None:
            pass
    # No report yet: the uniform design, 1/6 for each of the 6 pairs.
    first = Judgment.objects.filter(study=study)
    assert all(j.result["pair_probability"] == pytest.approx(1 / 6) for j in first)
    first_report = run_report(study, researcher)
    fitted, fitted_battles = first_report["adaptive"], first_report["battles"]
    names = fitted["systems"]
    every = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    held = kept_battles(study, names, every)  # what the report held, before the next phase
    for person in people[2:]:
        while judge(person, answer)[0] is not None:
            pass

    # The stored fit fed to the pure rule (tested by hand in tests/rubrics/test_arena.py).
    # The study's default goal (the whole order) for the plain fit, its leaderboard.
    pairs, probs = arena_design.adaptive_pair_probabilities(
        np.array(fitted["scores"]),
        np.array(fitted["covariance"]),
        explore=0.2,
        fit="plain",
        pairs=every,
        # What the first report held, and as many battles again to come.
        served=held,
        coming=fitted_battles,
    )
    design = {(names[i], names[j]): p for (i, j), p in zip(pairs, probs, strict=True)}
    later = Judgment.objects.filter(study=study).exclude(pk__in=[j.pk for j in first])
    assert later.exists()
    for j in later:
        pair = (j.item.spec["system_a"], j.item.spec["system_b"])
        assert j.result["pair_probability"] == pytest.approx(design[pair])
    assert len({round(j.result["pair_probability"], 9) for j in later}) > 1

    report = run_report(study, researcher)
    kept = list(Judgment.objects.filter(study=study))
    pairs = [(j.item.spec["system_a"], j.item.spec["system_b"], j.result["winner"]) for j in kept]
    # Each pair weighted by the inverse of its share of the battles (counted here, apart
    # from the module): every pair carries the same total weight, as under uniform pairing.
    per_pair = {}
    for a, b, _ in pairs:
        per_pair[(a, b)] = per_pair.get((a, b), 0) + 1
    weights = [1 / per_pair[(a, b)] for a, b, _ in pairs]
    expected = mm_bradley_terry(pairs, sorted(systems), weights)
    assert report["weighted"] is True
    assert report["weighted_interval_method"] == "union of bootstrap percentile and sandwich"
    for row in report["weighted_leaderboard"]:
        assert row["score"] == pytest.approx(expected[row["system"]], abs=1e-6)
    # The leaderboard itself is the plain fit (issue 47): no weights.
    plain = mm_bradley_terry(pairs, sorted(systems))
    for row in report["leaderboard"]:
        assert row["score"] == pytest.approx(plain[row["system"]], abs=1e-6)
    assert report["fits_disagree"] == []  # Bradley-Terry holds in this crowd


def test_length_control_undoes_a_planted_preference_for_longer_captions(researcher):
    # True order alpha > beta > gamma, but gamma writes the longest captions and the crowd
    # strongly prefers the longer caption. Lengths also vary within each system, so the
    # length effect and the systems can be told apart.
    base = {"alpha": 100, "beta": 170, "gamma": 300}
    strength = {"alpha": 0.7, "beta": 0.0, "gamma": -0.7}

    def words(system, index):
        draw = np.random.default_rng([index, ord(system[0])]).uniform(0.3, 1.7)
        return int(base[system] * draw)

    study = arena_study(
        researcher,
        images=60,
        words=words,
        catch_rate=0,
        battle_target=3,
        bootstrap_rounds=20,
        cap_per_pair=1000,
    )
    rng = np.random.default_rng(11)
    length = {c.pk: len(c.text.split()) for c in study.captions.all()}

    def prefers_longer(lease):
        spec = lease.item.spec
        la, lb = length[spec["caption_a"]], length[spec["caption_b"]]
        logit = strength[spec["system_a"]] - strength[spec["system_b"]] + 5 * (la - lb) / (la + lb)
        a_wins = rng.random() < 1 / (1 + np.exp(-logit))
        return "a" if a_wins == (shown_left(lease) == "a") else "b"

    for person in [worker(study) for _ in range(3)]:
        while judge(person, prefers_longer)[0] is not None:
            pass
    report = run_report(study, researcher)

    raw = [row["system"] for row in report["leaderboard"]]
    controlled = [row["system"] for row in report["length_leaderboard"]]
    assert raw.index("gamma") < controlled.index("gamma"), raw  # length moved gamma up
    assert controlled == ["alpha", "beta", "gamma"]
    assert report["length_coefficient"]["ci_low"] > 0


def test_a_simulated_crowd_answers_through_the_services_and_ranks_by_quality(researcher):
    # No gold battles here: the simulated crowd often misses a gold battle built on the
    # weakest system (its caption is barely better than the alteration), so with 4 workers
    # the catch rule could exclude all of them, depending on the lease ids (CI on PostgreSQL
    # once found every worker flagged and an empty leaderboard). Gold battles and the catch
    # rule have their own tests above.
    study = arena_study(
        researcher,
        systems=("good-one", "mid-one", "bad-one"),
        images=30,
        battle_target=2,
        bootstrap_rounds=20,
        min_seconds=2,
        criteria=True,
        catch_rate=0,
    )

    summary = crowd_simulate(study=study, workers=4, seed=1)

    assert summary.refusals == {}
    assert summary.judgments == Judgment.objects.filter(study=study).count() > 60
    report = run_report(study, researcher)
    assert [r["system"] for r in report["leaderboard"]] == ["good-one", "mid-one", "bad-one"]
    assert {c["criterion"] for c in report["criteria"]} == set(CRITERION_NAMES)


def test_the_report_page_and_figures_render(client, researcher):
    study = arena_study(researcher, catch_rate=0, bootstrap_rounds=20, battle_target=2)
    # Named workers and answers by count, not by lease id: the figures exist only while every
    # system both won and lost, and ids (and default worker names) move with whatever ran
    # before in the database, which once left a system unbeaten.
    answers = itertools.count()
    for person in [worker(study, name) for name in ("w-fig-1", "w-fig-2")]:
        while judge(person, lambda lease: "a" if next(answers) % 3 else "b")[0] is not None:
            pass
    run_report(study, researcher)
    client.force_login(researcher)

    page = client.get(reverse("study_report", args=[study.pk]))
    figure = client.get(reverse("report_figure", args=[study.pk, "win-rate", "svg"]))

    assert page.status_code == 200
    assert "Length-controlled leaderboard" in page.content.decode()
    assert figure.status_code == 200 and b"<svg" in figure.content


@pytest.mark.parametrize(
    "page",
    [
        "study_detail",
        "study_dashboard",
        "study_settings",
        "study_metrics",
        "study_plan",
    ],
)
def test_the_researcher_pages_of_an_arena_study_render(client, researcher, page):
    study = arena_study(researcher, catch_rate=0.5, catch_min_seen=50, completion_battles=100)
    for person in [worker(study) for _ in range(2)]:
        for _ in range(4):
            judge(person, "a")
    client.force_login(researcher)

    answer = client.get(reverse(page, args=[study.pk]))

    assert answer.status_code == 200
    if page == "study_dashboard":
        html = answer.content.decode()
        assert "Battles" in html and "gold battles" in html
        # The mode's words (mode.dashboard): its gold battles are its check of the worker,
        # so the table has no second column of the same catch trials.
        assert "An answer is one participant finishing one battle" in html
        assert "Catch-trial failures" not in html


def test_the_new_study_page_offers_the_arena(client, researcher):
    client.force_login(researcher)
    html = client.get(reverse("study_new")).content.decode()
    assert 'value="arena"' in html and "Arena (caption battles)" in html


# ------------------------------------------------------------------ export and API


def test_the_export_has_one_row_per_battle_with_sides_and_gold(researcher, tmp_path):
    study = arena_study(
        researcher, images=20, catch_rate=0.5, catch_min_seen=50, completion_battles=100
    )
    person = worker(study)
    for _ in range(12):
        judge(person, "b")

    summary = export_file(study=study, path=tmp_path / "out", export_format="csv")

    with open(summary.path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    judgments = {j.pk: j for j in Judgment.objects.filter(study=study)}
    assert len(rows) == len(judgments) >= 12
    assert any(row["gold"] == "true" for row in rows)
    for row in rows:
        judgment = judgments[int(row["judgment_id"])]
        assert row["left"] == judgment.payload["left"]
        assert row["outcome"] == "b"
        assert row["winner"] == judgment.result["winner"]
        assert row["gold"] == ("true" if judgment.item.kind == CATCH else "false")
        if row["gold"] == "true":
            assert row["caption_b"] == judgment.item.spec["catch"]["text"]
        else:
            assert row["system_a"] == judgment.item.spec["system_a"]
            assert int(row["caption_a_id"]) == judgment.item.spec["caption_a"]


def test_the_report_api_returns_the_latest_report_to_who_may_read_it(
    client, researcher, other_researcher
):
    study = arena_study(researcher, catch_rate=0, bootstrap_rounds=20, battle_target=2)
    url = reverse("api_study_report", args=[study.pk])
    client.force_login(researcher)
    assert client.get(url).status_code == 404  # no report yet
    for person in [worker(study) for _ in range(2)]:
        while judge(person, lambda lease: "a" if lease.pk % 2 else "tie")[0] is not None:
            pass
    stored = run_report(study, researcher)

    answer = client.get(url)
    client.force_login(other_researcher)
    stranger = client.get(url)

    assert answer.status_code == 200
    body = answer.json()
    assert body["mode"] == "arena"
    assert body["result"]["leaderboard"] == stored["leaderboard"]
    assert set(body["result"]["leaderboard"][0]) == {
        "system",
        "score",
        "ci_low",
        "ci_high",
        "rank_low",
        "rank_high",
        "battles",
    }
    assert "length_coefficient" in body["result"]
    assert stranger.status_code == 404
    client.force_login(researcher)
    schema = client.get(reverse("schema")).content.decode()
    assert "/api/studies/{study_id}/report/" in schema


# ------------------------------------------------------------------ serving cost


@pytest.mark.parametrize("adaptive", [False, True])
def test_serving_a_battle_costs_the_same_queries_whatever_the_history(researcher, adaptive):
    """The queries (and rows read) to serve a battle do not grow with the worker's history:
    serving reads per-worker state, not every past lease. Measured on the 3rd and the 25th
    battle of one worker (gold battles on, so their bookkeeping is included)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    study = arena_study(
        researcher,
        systems=("alpha", "beta", "gamma", "delta"),
        images=40,
        catch_rate=0.1,
        adaptive=adaptive,
        bootstrap_rounds=20,
        cap_per_pair=100,
        # An always-"a" worker misses gold battles; flagged, they would be served nothing
        # more (the catch rule): the rule stays off here, the gold bookkeeping stays on.
        catch_min_seen=1000,
        completion_battles=2000,
    )
    person = worker(study)
    for _ in range(3):
        judge(person, "a")
    if adaptive:
        run_report(study, researcher)
        # The first design asked for after a report reads that report (once per process:
        # the test below); this test is about the worker's history, not that.
        MODE.pair_probabilities(study)

    def serve_queries():
        """The queries to serve the worker's next system battle. A gold battle due first is
        judged on the way: its serve skips the pair draw, so its cost is a different (smaller)
        constant and comparing it with a battle's would test the gold schedule, not history."""
        for _ in range(10):
            person.refresh_from_db()
            with CaptureQueriesContext(connection) as queries:
                lease = assignment_next(participant=person)
            assert lease is not None
            judgment_submit(
                participant=person,
                token=lease.token,
                data={"outcome": "a"},
                part=0,
                now=timezone.now() + timedelta(seconds=30),
            )
            if lease.item.kind == BATTLE:
                # Rows the queries return would grow with history if serving read every
                # past lease's spec; the count of queries is what a grouped read keeps fixed.
                return len(queries)
        raise AssertionError("ten gold battles in a row: no system battle was served")

    early = serve_queries()
    while Judgment.objects.filter(participant=person).count() < 24:
        lease, _ = judge(person, "a")
        assert lease is not None, "the worker was served nothing more"
    late = serve_queries()
    assert early == late


def test_the_design_reads_each_report_once_per_process(researcher):
    """Serving and answering a battle each ask for the design. The latest report's id is
    read every time; its result (the whole report: matrices, bootstrap) only on the first
    ask after a report. Reading it on every ask was most of an adaptive battle's cost on
    SQLite (issue 47's bench, 3,006 reads of a 1,500-battle study)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    study = arena_study(
        researcher,
        systems=("alpha", "beta", "gamma", "delta"),
        images=30,
        catch_rate=0,
        adaptive=True,
        bootstrap_rounds=20,
    )
    rng = np.random.default_rng(3)
    people = [worker(study, f"once-{k}") for k in range(4)]
    for person in people[:3]:
        while judge(person, lambda lease: "ab"[rng.integers(2)])[0] is not None:
            pass
    run_report(study, researcher)

    def ask():
        with CaptureQueriesContext(connection) as queries:
            design = MODE.pair_probabilities(study)
        return design, [q["sql"] for q in queries]

    first, first_sql = ask()
    again, again_sql = ask()
    assert len(set(first.values())) > 1, "no fit to adapt from: the test needs one"
    assert again == first
    assert any('"result"' in sql for sql in first_sql)
    # The hit: one statement, the id alone.
    assert len(again_sql) == 1 and '"result"' not in again_sql[0]

    # A new report is read again, and its design served.
    while judge(people[3], lambda lease: "ab"[rng.integers(2)])[0] is not None:
        pass
    run_report(study, researcher)
    latest, latest_sql = ask()
    assert any('"result"' in sql for sql in latest_sql)
    assert latest != first


# ------------------------------------------------------------------ attack: constant answers
# Issue 45, row 4: a bot answering one outcome on every battle earned the completion code
# (at 20 battles) before the gold rule applied (3 gold battles seen, reached after 28-56),
# and the report's position-bias check never flags a constant tie. Each worker is a test
# client of its own, entering through the crowd link and answering through the pages.

CODE = "ARENA-PAID-45"


def constant(outcome):
    return lambda lease: outcome


def honest(lease):
    """An attentive worker: the real caption of a gold battle wins; a battle goes to the
    system of the better rank (not the name's order, so both canonical sides win), with a
    tie on some images, and the verdict given for the side the page shows it on."""
    item = lease.item
    if item.kind == CATCH:
        canonical = "a"
    elif item.image_id % 6 == 0:
        return "tie"
    else:
        rank = {"gamma": 0, "alpha": 1, "delta": 2, "beta": 3}
        canonical = "a" if rank[item.spec["system_a"]] < rank[item.spec["system_b"]] else "b"
    if shown_left(lease) == "a":
        return canonical
    return "b" if canonical == "a" else "a"


def crowd_play(study, pid, address, choose, *, limit=30):
    """Follow the crowd link as ``pid`` and answer with ``choose(lease)`` until nothing is
    left or ``limit`` answers; the number of answers after which the completion code was
    first on a page (None: never), and the pages' last HTML."""
    client = Client(REMOTE_ADDR=address)
    arrive(client, study, pid)
    answered = 0
    code_after = None
    html = ""
    for _ in range(limit + 1):
        html = client.get(next_url(study)).content.decode()
        if CODE in html and code_after is None:
            code_after = answered
        if "/submit/" not in html or answered == limit:
            break
        lease = Assignment.objects.get(token=token_on(html))
        page = client.post(
            reverse("participate_submit", args=[study.public_id, lease.token]),
            {"part": "0", "outcome": choose(lease)},
        )
        assert page.status_code == 302, page.content[:300]
        answered += 1
    if CODE in html and code_after is None:
        code_after = answered
    return code_after, html


def attack_study(researcher, **settings):
    # The arena's default checks (gold rate, rule, code after 20 battles); 36 images of
    # 4 systems, so nobody runs out of battles before 30 answers (one image each).
    return arena_study(
        researcher,
        systems=("alpha", "beta", "gamma", "delta"),
        images=36,
        completion_code=CODE,
        bootstrap_rounds=20,
        **settings,
    )


@pytest.mark.parametrize("outcome", ["a", "tie", "bothbad"])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_constant_outcome_bot_never_sees_the_completion_code(researcher, outcome, seed):
    study = attack_study(researcher, seed=seed)

    code_after, last = crowd_play(study, f"bot-{outcome}", "10.45.4.1", constant(outcome))

    person = Participant.objects.get(study=study, external_id=f"bot-{outcome}")
    assert code_after is None, f"the {outcome!r} bot saw the code after {code_after} answers"
    assert person.completed_at is None
    # Its answers are kept, flagged excluded, and the page says it earned no code.
    assert Judgment.objects.filter(participant=person).exists()
    assert not Judgment.objects.filter(participant=person, excluded=False).exists()
    assert "You have not earned this study's completion code" in last
    # It is told which check: the gold rule's, or the answer pattern's with its answer.
    kinds = {flag["kind"] for flag in person.flags}
    assert kinds & {"catch_failed", "answer_pattern"}
    if "answer_pattern" in kinds:
        label = {"a": "A is better", "tie": "Tie: both are good", "bothbad": "Tie: both are bad"}
        assert f"the same answer ({label[outcome]}) on 100% of" in last
    else:
        assert "did not pass this study&#x27;s attention checks" in last


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_honest_worker_beside_the_bots_earns_the_code_at_the_count(researcher, seed):
    study = attack_study(researcher, seed=seed)
    for n, outcome in enumerate(["a", "tie", "bothbad"]):
        crowd_play(study, f"bot-{outcome}", f"10.45.5.{n + 1}", constant(outcome))

    code_after, _ = crowd_play(study, "honest", "10.45.5.9", honest)

    person = Participant.objects.get(study=study, external_id="honest")
    gold = Judgment.objects.filter(participant=person, item__kind=CATCH)
    needed = MODE.settings(study).completion_battles
    # The code comes at the count (gold battles are part of it), after the gold rule had
    # enough gold battles to judge the worker: scheduled early, within the count.
    assert code_after == needed
    assert person.completed_at is not None
    assert gold.count() >= MODE.settings(study).catch_min_seen
    assert not Judgment.objects.filter(participant=person, excluded=True).exists()
    # The report names every bot beside the position bias; the honest worker is not flagged.
    report = run_report(study, researcher)
    rows = {row["participant"]: row for row in report["position_bias"]["workers"]}
    names = dict(Participant.objects.filter(study=study).values_list("external_id", "pseudonym"))
    for outcome in ("a", "tie", "bothbad"):
        row = rows[names[f"bot-{outcome}"]]
        assert row["flagged"] and row["outcome"] == outcome and row["share"] == 1.0
        assert row["constant"] and row["position"] == (outcome == "a")
    assert not rows[names["honest"]]["flagged"]
    # The report page shows the rule beside the position bias, naming each bot's answer.
    reader = Client()
    reader.force_login(researcher)
    html = reader.get(reverse("study_report", args=[study.pk])).content.decode()
    table = html[html.index('id="arena-worker-checks"') :]
    table = table[: table.index("</table>")]
    assert "more than 90% of at least 10 answers" in html
    for outcome, label in (("tie", "Tie: both are good"), ("bothbad", "Tie: both are bad")):
        cells = table[table.index(f"<td>{names[f'bot-{outcome}']}</td>") :].split("</tr>")[0]
        assert label in cells and "constant answer" in cells
    cells = table[table.index(f"<td>{names['bot-a']}</td>") :].split("</tr>")[0]
    assert "position bias, constant answer" in cells


def test_a_bot_in_a_study_that_pays_screen_outs_gets_the_screen_out_code(researcher):
    study = attack_study(researcher, screen_out_code="ARENA-SCREEN-45")

    code_after, last = crowd_play(study, "bot-screened", "10.45.6.1", constant("a"))

    person = Participant.objects.get(study=study, external_id="bot-screened")
    assert code_after is None and person.completed_at is None
    assert "ARENA-SCREEN-45" in last
    assert any(flag["kind"] == "screened_out" for flag in person.flags)


def test_the_checks_before_the_code_are_settings_with_bounds(researcher):
    defaults = MODE.clean_settings({})
    assert defaults["answer_max_share"] == 0.9
    assert defaults["catch_min_seen"] == 4 and defaults["completion_battles"] == 20
    for bad in ({"answer_max_share": 0.4}, {"answer_max_share": 1.01}):
        with pytest.raises(ServiceError) as refused:
            MODE.clean_settings(bad)
        assert refused.value.field == "answer_max_share"
    # The gold battles the rule needs must fit before the code's count, with a battle
    # before each: 5 gold battles need 10 answers.
    with pytest.raises(ServiceError) as refused:
        MODE.clean_settings({"catch_min_seen": 5, "completion_battles": 9})
    assert refused.value.field == "completion_battles"
    assert MODE.clean_settings({"catch_min_seen": 5, "completion_battles": 10})
    # Without gold battles there is nothing to fit.
    assert MODE.clean_settings({"catch_rate": 0, "catch_min_seen": 50})


def test_honest_simulated_workers_earn_the_code_under_the_default_checks(researcher):
    # The arena's defaults (gold battles at 10%, 4 before the rule, the code after 20
    # answers, one answer on at most 90%); the demo's systems, a human caption among them.
    study = arena_study(
        researcher,
        systems=("Human", "good-one", "mid-one", "bad-one"),
        images=40,
        battle_target=3,
        bootstrap_rounds=20,
        seed=3,
    )

    summary = crowd_simulate(study=study, workers=6, seed=3)

    assert summary.refusals == {}
    crowd = Participant.objects.filter(study=study)
    assert crowd.count() == 6
    # An honest simulated worker misses a gold battle one time in fifty (GOLD_LAPSE), so
    # the gold rule (at most one miss in four) may catch one of six on some lease ids
    # (about 1 in 400 workers); two would mean the rule, not the lapse, is at work.
    caught = [p.external_id for p in crowd if any(f["kind"] == "catch_failed" for f in p.flags)]
    assert len(caught) <= 1, caught
    for person in crowd:
        gold = Judgment.objects.filter(participant=person, item__kind=CATCH)
        assert gold.count() >= 4
        assert not any(flag["kind"] == "answer_pattern" for flag in person.flags)
        if person.external_id not in caught:
            assert person.completed_at is not None, (person.external_id, person.flags)
    report = run_report(study, researcher)
    # Human (4.6) and good-one (4.0) are close in the simulated crowd's eyes; bad-one
    # (1.6) is last whatever the lease ids.
    assert {row["system"] for row in report["leaderboard"][:2]} == {"Human", "good-one"}
    assert report["leaderboard"][-1]["system"] == "bad-one"
    assert not any(row["flagged"] for row in report["position_bias"]["workers"])
