"""The "people + judge" page (issue 40, section 4): who may read it, that its table shows
the numbers the latest report stored (read, not recomputed), and its forms: the judge and
score choice saved through ``study_update_settings`` then a new report, refusals shown
under their field, never a traceback."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import Caption, Item, Job, Judge
from annotation.services.judges import judge_import
from annotation.views.people_judges import _ticks, intervals_svg
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db


def interval(estimate, low, high, se, **extra):
    return {"estimate": estimate, "low": low, "high": high, "se": se, **extra}


#: The spec's shape (docs: /tmp/ppi-spec.md section 2), numbers chosen by hand, none on a
#: rounding tie at three decimals.
STORED = {
    "judge": {"id": 1, "name": "toy-vlm"},
    "judges": [{"id": 1, "name": "toy-vlm"}],
    "score": "rating",
    "scores": ["rating"],
    "estimate": "mean",
    "alpha": 0.05,
    "design": {"kind": "all", "share": 1.0, "floor": 0.1},
    "systems": [
        {
            "system": "GoodBot",
            "n_people": 40,
            "n_judge": 200,
            "n_labeled": 37,
            "people": interval(3.91234, 3.61871, 4.20597, 0.14983),
            "judge": interval(4.30112, 4.20041, 4.40183, 0.05138),
            "combined": interval(3.88765, 3.67302, 4.10228, 0.10951),
            "lam": 0.83217,
            "rectifier": interval(-0.38878, -0.61262, -0.16494, 0.11421),
            "effective_n": 74.8712,
            "bootstrap": {"low": 3.66917, "high": 4.10839},
        },
        {
            "system": "BadBot <b>",  # escaped, never markup
            "n_people": 38,
            "n_judge": 200,
            "n_labeled": 36,
            "people": interval(2.10377, 1.80212, 2.40542, 0.15391),
            "judge": interval(2.05191, 1.94922, 2.15461, 0.05239),
            "combined": interval(2.11648, 1.90113, 2.33183, 0.10987),
            "lam": 0.41933,
            "rectifier": interval(0.05186, -0.21877, 0.32249, 0.13808),
            "effective_n": 59.2381,
            "bootstrap": {"low": 1.89781, "high": 2.33912},
        },
    ],
    "valid_when": "Valid when the units people answered are a random subset of the "
    "judged units, or drawn with known probabilities.",
}


def store_report(study, user, section):
    return Job.objects.create(
        kind=Job.Kind.REPORT,
        study=study,
        created_by=user,
        status=Job.Status.DONE,
        progress=100,
        result={"people_judge": section},
        finished_at=timezone.now(),
    )


class Cells(HTMLParser):
    """Text of each body row of the estimates table: {system: {data-estimate: text}}."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.in_table = self.in_body = False
        self.current: dict[str, str] | None = None
        self.cell: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and "ppi-table" in (attrs.get("class") or ""):
            self.in_table = True
        elif self.in_table and tag == "tbody":
            self.in_body = True
        elif self.in_body and tag == "tr":
            self.current = {}
        elif self.current is not None and tag == "th":
            self.cell, self.text = "system", []
        elif self.current is not None and tag == "td":
            self.cell, self.text = attrs.get("data-estimate") or f"col{len(self.current)}", []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell:
            self.current[self.cell] = " ".join("".join(self.text).split())
            self.cell = None
        elif tag == "tr" and self.current is not None:
            self.rows[self.current["system"]] = self.current
            self.current = None
        elif tag == "table":
            self.in_table = self.in_body = False

    def handle_data(self, data):
        if self.cell:
            self.text.append(data)


def table(html: str) -> dict[str, dict[str, str]]:
    parser = Cells()
    parser.feed(html)
    return parser.rows


def url(study) -> str:
    return reverse("study_people_judge", args=[study.pk])


# ------------------------------------------------------------------------------ access


def test_anonymous_is_sent_to_log_in(client, make_study):
    study = make_study("vicr")
    response = client.get(url(study))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_another_researcher_gets_nothing(client, make_study, other_researcher):
    study = make_study("vicr")
    client.force_login(other_researcher)
    assert client.get(url(study)).status_code == 404
    assert client.post(url(study), {"action": "report"}).status_code == 404
    assert not Job.objects.filter(study=study).exists()


def test_an_annotator_gets_nothing(client, make_study, annotator):
    study = make_study("vicr")
    client.force_login(annotator)
    assert client.get(url(study)).status_code == 404


def test_a_member_reads_the_stored_estimates(client, make_study, researcher, other_researcher):
    study = make_study("vicr")
    study.members.add(other_researcher)
    store_report(study, researcher, STORED)
    client.force_login(other_researcher)
    response = client.get(url(study))
    assert response.status_code == 200
    assert set(table(response.content.decode())) == {"GoodBot", "BadBot <b>"}
    assert "Only the study's owner applies the design." in response.content.decode()


# ------------------------------------------------------------------------------ the table


def fmt(value: float, places: int = 3) -> str:
    return f"{value:.{places}f}"


def test_the_table_shows_the_stored_numbers(client, make_study, researcher):
    study = make_study("vicr")
    store_report(study, researcher, STORED)
    client.force_login(researcher)
    html = client.get(url(study)).content.decode()
    rows = table(html)
    for system in STORED["systems"]:
        row = rows[system["system"]]
        for key in ("people", "judge", "combined", "rectifier"):
            i = system[key]
            assert row[key] == f"{fmt(i['estimate'])} [{fmt(i['low'])}, {fmt(i['high'])}]", key
        boot = system["bootstrap"]
        assert row["bootstrap"] == f"[{fmt(boot['low'])}, {fmt(boot['high'])}]"
        assert row["lambda"] == fmt(system["lam"])
        assert row["effective_n"] == fmt(system["effective_n"], 1)
        assert row["n_people"] == str(system["n_people"])
        assert row["n_judge"] == str(system["n_judge"])
        assert row["n_labeled"] == str(system["n_labeled"])
    assert STORED["valid_when"] in html
    assert "<b>" not in html.split("ppi-table")[1].split("</table>")[0]
    # The figure: three intervals per system, each with its estimate's dot.
    assert html.count("<circle ") == 3 * len(STORED["systems"])
    assert '<title id="ppi-title">95% intervals' in html


def test_a_ranking_shows_rank_intervals(client, make_study, researcher):
    study = make_study("vicr")
    ranked = {**STORED, "estimate": "bradley_terry"}
    ranked["systems"] = [
        {**s, **{k: {**s[k], "rank_low": r, "rank_high": r + 1} for k in ("people", "combined")}}
        for r, s in enumerate(STORED["systems"], start=1)
    ]
    store_report(study, researcher, ranked)
    client.force_login(researcher)
    rows = table(client.get(url(study)).content.decode())
    assert rows["GoodBot"]["combined"].endswith("rank 1–2")
    assert rows["BadBot <b>"]["people"].endswith("rank 2–3")
    assert "rank" not in rows["GoodBot"]["judge"]


def test_no_report_yet_offers_the_report(client, make_study, researcher):
    study = make_study("vicr")
    client.force_login(researcher)
    html = client.get(url(study)).content.decode()
    assert "No report has been computed yet." in html
    assert "Compute the report" in html
    assert "<svg" not in html


def test_an_undefined_estimate_says_why(client, make_study, researcher):
    study = make_study("vicr")
    store_report(study, researcher, {**STORED, "systems": [], "error": "no judge has answered"})
    client.force_login(researcher)
    html = client.get(url(study)).content.decode()
    assert "Not computed: no judge has answered" in html
    assert "ppi-table" not in html


def test_a_system_not_combined_says_why(client, make_study, researcher):
    study = make_study("vicr")
    lone = {"system": "LoneBot", "n_people": 1, "n_judge": 9, "n_labeled": 1, "people": None,
            "judge": interval(3.0, 2.5, 3.5, 0.25), "combined": None, "lam": None,
            "rectifier": None, "effective_n": None, "bootstrap": None,
            "error": "fewer than 2 units that both people and the judge answered"}  # fmt: skip
    store_report(study, researcher, {**STORED, "systems": [*STORED["systems"], lone]})
    client.force_login(researcher)
    rows = table(client.get(url(study)).content.decode())
    (name,) = [name for name in rows if name.startswith("LoneBot")]
    assert name.endswith("Not combined: fewer than 2 units that both people and the judge answered")
    row = rows[name]
    assert row["combined"] == row["people"] == row["lambda"] == "–"
    assert row["judge"] == "3.000 [2.500, 3.500]"


def test_the_page_does_not_recompute(client, make_study, researcher, django_assert_max_num_queries):
    study = make_study("vicr")
    store_report(study, researcher, STORED)
    client.force_login(researcher)
    # Session, user, study, latest and pending report, judges: a handful, whatever the data.
    with django_assert_max_num_queries(12):
        assert client.get(url(study)).status_code == 200


def test_the_report_button_starts_a_report(client, make_study, researcher):
    study = make_study("vicr")
    client.force_login(researcher)
    response = client.post(url(study), {"action": "report"})
    assert response.status_code == 302
    assert Job.objects.filter(study=study, kind=Job.Kind.REPORT).count() == 1


# ------------------------------------------------------------------------------ the forms


def test_an_unknown_judge_is_refused_under_its_field(client, make_study, researcher):
    study = make_study("vicr")
    client.force_login(researcher)
    response = client.post(url(study), {"action": "choice", "judge": "999999", "score": ""})
    assert response.status_code == 400
    html = response.content.decode()
    assert re.search(r'id="choice_judge_error".*?role="alert"', html, re.S)
    assert "Traceback" not in html
    assert not Job.objects.filter(study=study).exists()


def test_the_choice_is_saved_and_a_report_started(client, researcher):
    study = judged_vicr(researcher)
    judge = Judge.objects.get(study=study)
    client.force_login(researcher)
    data = {"action": "choice", "judge": str(judge.pk), "score": ""}
    response = client.post(url(study), data, follow=True)
    assert response.redirect_chain[-1][0] == url(study)
    assert "Judge and score saved. A new report is being computed." in response.content.decode()
    study.refresh_from_db()
    assert study.settings["people_judge"] == judge.pk
    assert study.settings["people_judge_score"] == ""
    assert Job.objects.filter(study=study, kind=Job.Kind.REPORT).count() == 1


def test_a_refused_design_says_why_under_its_field(client, make_study, researcher):
    study = make_study("vicr")
    before = dict(study.settings)
    client.force_login(researcher)
    data = {"action": "design", "kind": "uniform", "share": "7", "floor": "0.1", "second": "0"}
    response = client.post(url(study), data)
    assert response.status_code == 400
    html = response.content.decode()
    error = re.search(r'id="design_share_error">(.*?)</div>', html, re.S)
    assert error and 'role="alert"' in error.group(1) and "people_share" in error.group(1)
    assert "Traceback" not in html
    study.refresh_from_db()
    assert study.settings == before


def judged_vicr(owner):
    """A live VICR study with no judgment yet, a uniform design set, and a judge's rating
    of every game caption (what a design is drawn from)."""
    study = vicr_study(owner, game=6, people_design="uniform", people_share=0.5)
    captions = Caption.objects.filter(study=study, purpose="study").order_by("text")
    lines = [
        f'{{"caption_id": {c.pk}, "answer": {{"rating": {1 + n % 4}}}}}'
        for n, c in enumerate(captions)
    ]
    judge_import(study=study, text="\n".join(lines), name="toy-judge")
    return study


DESIGN = {"kind": "uniform", "share": "0.5", "floor": "0.1", "second": "0"}


def test_the_owner_applies_the_design(client, researcher):
    study = judged_vicr(researcher)
    client.force_login(researcher)
    response = client.post(url(study), {"action": "apply", **DESIGN}, follow=True)
    html = response.content.decode()
    assert "Design applied:" in html
    game = Item.objects.filter(study=study, kind="game")
    assert game.count() == 6
    assert set(game.values_list("sampling_design", flat=True)) == {"uniform"}
    drawn = game.filter(target__gt=0).count()
    assert f"{drawn} of 6 items go to people" in html


def test_a_member_cannot_apply_the_design(client, researcher, other_researcher):
    study = judged_vicr(researcher)
    study.members.add(other_researcher)
    client.force_login(other_researcher)
    response = client.post(url(study), {"action": "apply", **DESIGN})
    assert response.status_code == 400
    html = response.content.decode()
    assert "not applied: Only the study&#x27;s owner applies its sampling design." in html
    assert not Item.objects.filter(study=study).exclude(sampling_design="").exists()


# ------------------------------------------------------------------------------ the figure


def test_ticks_are_round_and_inside():
    assert _ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert _ticks(2.3, 4.9) == [2.5, 3.0, 3.5, 4.0, 4.5]
    assert _ticks(1.0, 1.0) == [1.0]


def test_the_figure_places_intervals_on_one_axis():
    # Hand-worked: values from 1 to 3, padded by 5% of 2 = 0.1 each side, so 0.9 -> x=118
    # and 3.1 -> x=444 (the plot runs from 118 to 460 - 16).
    systems = [
        {"system": "A", "people": interval(2.0, 1.0, 3.0, 0.5)},
        {"system": "B", "combined": interval(2.0, 1.5, 2.5, 0.2)},
    ]
    figure = intervals_svg(systems)
    a, b = figure["systems"]
    assert [line["label"] for line in a["lines"]] == ["People only"]
    scale = 326 / 2.2
    assert a["lines"][0]["x1"] == pytest.approx(118 + 0.1 * scale, abs=0.1)
    assert a["lines"][0]["x2"] == pytest.approx(118 + 2.1 * scale, abs=0.1)
    assert b["lines"][0]["cx"] == pytest.approx(118 + 1.1 * scale, abs=0.1)
    assert b["lines"][0]["y"] > a["lines"][0]["y"]
    assert intervals_svg([{"system": "A", "people": {"estimate": None}}]) is None


def test_the_design_settings_are_saved_on_a_draft(client, make_study, researcher):
    study = make_study("vicr")
    client.force_login(researcher)
    data = {"action": "design", "kind": "uncertainty", "share": "0.3", "floor": "0.05"}
    response = client.post(url(study), {**data, "second": "0"})
    assert response.status_code == 302
    study.refresh_from_db()
    saved = {k: study.settings[k] for k in ("people_design", "people_share", "people_floor")}
    assert saved == {"people_design": "uncertainty", "people_share": 0.3, "people_floor": 0.05}
    assert not Job.objects.filter(study=study).exists()  # settings only: no report, no draw


def test_a_pending_report_is_shown_with_the_stored_one(client, make_study, researcher):
    study = make_study("vicr")
    store_report(study, researcher, STORED)
    Job.objects.create(kind=Job.Kind.REPORT, study=study, created_by=researcher)  # queued
    client.force_login(researcher)
    html = client.get(url(study)).content.decode()
    assert "reload this page for its estimates" in html
    assert set(table(html)) == {"GoodBot", "BadBot <b>"}  # the stored one meanwhile
