"""The live study dashboard, the per-worker table and the crowd setup panel (issue 11).

Through the real views (Django test client): what the dashboard counts, who sees raw crowd
ids, the sort whitelist, paging, releasing a lease, the stable crowd link and the MTurk
snippet, and a query count that does not grow with the study.
"""

import re
import xml.etree.ElementTree as ET
from datetime import timedelta
from html import unescape
from unittest import mock

import pytest
from django.core import signing
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Item, Job, Judgment, Participant, Study
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import LINK_SALT, crowd_link_token
from annotation.services.reports import report_request
from annotation.services.studies import study_close, study_reopen
from annotation.tasks import enqueue
from tests.factories.core import crowd_participant, vehicle_study
from tests.factories.humanr import careless, crowd, do_group, honest, humanr_study
from tests.factories.thumb import member, thumb_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

PROLIFIC = {"PROLIFIC_PID": "PID-NEW", "STUDY_ID": "S", "SESSION_ID": "X"}
MTURK_NS = "{http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd}"


def dashboard(client, study, **query):
    response = client.get(reverse("study_dashboard", args=[study.pk]), query)
    assert response.status_code == 200
    return response.content.decode()


def answer(participant, rating=3):
    """Lease the participant's next item and rate it (one part); return the judgment."""
    lease = assignment_next(participant=participant)
    assert lease is not None
    return judgment_submit(participant=participant, token=lease.token, data={"rating": rating})


def worker_rows(html):
    """The per-worker table's rows as {pseudonym: [cell texts]} in page order."""
    table = html.split('<table class="workers"', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S):
        cells = [
            " ".join(unescape(re.sub(r"<[^>]+>", " ", cell)).split())
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)
        ]
        rows[cells[0]] = cells[1:]
    return rows


def crowd_link_of(html):
    return unescape(re.search(r'id="crowd-link" type="text" readonly value="([^"]+)"', html)[1])


# --- What the dashboard shows ---------------------------------------------------------------


def test_progress_rate_and_eta_count_the_answers(client, researcher):
    # 4 captions, target 2 each: 8 answers needed; 3 given by two workers.
    study = vehicle_study(researcher, captions=4, target=2)
    first, second = crowd_participant(study, "w1"), crowd_participant(study, "w2")
    answer(first)
    answer(first)
    answer(second)
    client.force_login(researcher)

    html = dashboard(client, study)

    assert "Overall: 3 of 8 answers needed (37%)" in html  # 3/8 = 37.5%, rounded down
    assert 'value="3"' in html and 'max="8"' in html
    assert "Judgments in the last hour</dt><dd>3</dd>" in html
    assert "Answers finished in the last hour</dt><dd>3</dd>" in html
    # 5 answers remain at 3 per hour: 1 h 40 min from now.
    assert "the remaining 5 answers take 1\xa0hour, 39\xa0minutes" in html or (
        "the remaining 5 answers take 1\xa0hour, 40\xa0minutes" in html
    )
    assert 'hx-trigger="every 10s"' in html, "a live study's dashboard polls"


def test_catch_trials_are_listed_but_not_counted_in_the_overall_progress(client, researcher):
    study = vehicle_study(researcher, captions=2, target=1)
    # A catch trial as annotation/modes/catch.py makes one: its own kind, for one worker.
    Item.objects.create(study=study, kind="catch", position=0, target=1, judgment_count=1)
    client.force_login(researcher)

    html = dashboard(client, study)

    assert "Overall: 0 of 2 answers needed (0%)" in html
    assert '<th scope="row">Catch trials (planted captions)</th><td>1</td><td>1</td>' in html


def test_a_finished_study_says_done_and_a_closed_one_stops_polling(client, researcher):
    study = vehicle_study(researcher, captions=1, target=1)
    answer(crowd_participant(study, "w1"))
    client.force_login(researcher)
    assert '<dd class="eta">done</dd>' in dashboard(client, study)

    study_close(study=study)

    html = dashboard(client, study)
    assert "hx-trigger" not in html, "a closed study does not change: no polling"
    assert "does not update by itself" in html


def test_each_workers_judgments_median_time_checks_and_catch_trials(client, researcher):
    # HUMANr: a group is 9 comparisons and 1 attention check; the careless worker answers
    # "both equally" everywhere and so fails the check, the honest one passes it.
    study = humanr_study(researcher)
    good, bad = crowd(study, "PID-GOOD"), crowd(study, "PID-BAD")
    do_group(good, honest)
    do_group(bad, careless)
    # Dwell times set by hand: median of 1..9 s and 20 s is (5 + 6) / 2 = 5.5 s.
    for seconds, judgment in zip([*range(1, 10), 20], good.judgments.order_by("id"), strict=True):
        Judgment.objects.filter(pk=judgment.pk).update(dwell_ms=seconds * 1000)
    # Two catch trials of the bad worker (as the catch-trial scoring stores them): one missed.
    two = list(bad.judgments.order_by("id")[:2])
    for judgment, caught in zip(two, [False, True], strict=True):
        result = {**judgment.result, "catch": {"kind": "T_WP", "gamma": 0.5, "caught": caught}}
        Judgment.objects.filter(pk=judgment.pk).update(result=result)
    client.force_login(researcher)

    # HUMANr serves no catch trials (mode.dashboard.catch_trials): no column for them.
    html = dashboard(client, study, sort="pseudonym")
    assert "Catch-trial failures" not in html and "Catch trials:" not in html
    rows = worker_rows(html)
    # Columns: source, crowd id, judgments, median, checks, completed, arrived, agreement,
    # reliability, flags.
    assert rows[good.pseudonym][2:5] == ["10", "5.5 s", "0 of 1"]
    assert rows[bad.pseudonym][2] == "10"
    assert rows[bad.pseudonym][4] == "1 of 1"
    assert rows[good.pseudonym][1] == "PID-GOOD (X)", "owner sees the Prolific id and session"

    # A mode that serves them (THumB, VICR) has the column after the checks.
    with mock.patch.object(type(get_mode("humanr").dashboard), "catch_trials", True):
        html = dashboard(client, study, sort="pseudonym")
    assert "Catch-trial failures" in html and "Catch trials: planted captions" in html
    rows = worker_rows(html)
    assert rows[good.pseudonym][4:6] == ["0 of 1", "—"]
    assert rows[bad.pseudonym][4:6] == ["1 of 1", "1 of 2"]


def test_thumb_says_it_checks_captions_and_has_a_catch_trial_column(client, researcher, make_study):
    # THumB's words (mode.dashboard): its check is of captions (the third annotator), and it
    # serves catch trials, so the per-worker table has their column.
    study = thumb_study(make_study)
    assert assignment_next(participant=member(study, researcher)) is not None
    client.force_login(researcher)

    html = dashboard(client, study)

    assert "This mode checks captions (a third annotator), not participants." in html
    assert "Catch-trial failures" in html and "Catch trials: planted captions" in html
    assert "finishing one caption set (an image&#x27;s captions at one stage)" in html


def test_per_stage_progress_names_stages_in_words(client, researcher):
    study = humanr_study(researcher)
    client.force_login(researcher)

    html = dashboard(client, study)

    groups = study.items.count()
    needed = sum(study.items.values_list("target", flat=True))
    assert f'<th scope="row">Groups of comparisons</th><td>{groups}</td><td>0</td>' in html
    assert f"<td>{needed}</td>" in html


def test_agreement_and_reliability_come_from_the_latest_report(client, researcher):
    # VICR's report has each player's agreement (mode.dashboard.worker_agreement); the
    # reliability section is every mode's.
    study = vicr_study(researcher, game=1)
    ann, ben = crowd_participant(study, "w1"), crowd_participant(study, "w2")
    client.force_login(researcher)
    assert "Agreement and reliability appear once a report is computed." in dashboard(client, study)
    finished = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    Job.objects.create(
        kind=Job.Kind.REPORT,
        study=study,
        status=Job.Status.DONE,
        finished_at=finished,
        result={
            "players": [{"pseudonym": ann.pseudonym, "exact": 0.75}],
            "reliability": {
                "method": "Dawid-Skene",
                "note": "Competence: chance of matching the true label.",
                "estimable": True,
                "workers": [
                    {"participant": ann.pseudonym, "labels": 1, "competence": 0.9,
                     "flagged": False, "reason": ""},
                    {"participant": ben.pseudonym, "labels": 1, "competence": 0.2,
                     "flagged": True, "reason": "answers like a spammer"},
                ],
            },
        },
    )  # fmt: skip

    html = dashboard(client, study)

    assert f"as of the report of {finished:%-d %b %Y, %H:%M} UTC (Dawid-Skene)" in html
    rows = worker_rows(html)
    # Columns: ..., checks, catch, completed, arrived, agreement, reliability, flags.
    assert rows[ann.pseudonym][-3:-1] == ["75% exact", "0.90"]
    assert rows[ben.pseudonym][-3:-1] == ["—", "0.20 flagged : answers like a spammer"]


def test_a_mode_without_per_worker_agreement_shows_none(client, researcher):
    # The test mode's report has no per-worker agreement: a "players" key in its result is
    # not read as VICR's (the mode reads its own report).
    study = vehicle_study(researcher, captions=2)
    ann = crowd_participant(study, "w1")
    answer(ann)
    Job.objects.create(
        kind=Job.Kind.REPORT,
        study=study,
        status=Job.Status.DONE,
        finished_at=timezone.now(),
        result={"players": [{"pseudonym": ann.pseudonym, "exact": 0.75}]},
    )
    client.force_login(researcher)

    html = dashboard(client, study)

    assert "as of the report of" in html
    assert "% exact" not in html
    assert worker_rows(html)[ann.pseudonym][-3] == "—"  # the agreement column


# --- Who sees what ----------------------------------------------------------------------------


def test_raw_crowd_ids_only_for_the_owner_and_staff(client, researcher, make_user):
    study = humanr_study(researcher)
    worker = crowd(study, "PROLIFIC-SECRET-PID", meta={"SESSION_ID": "SESSION-SECRET"})
    do_group(worker)
    colleague = make_user("carl", researcher=True)
    study.members.add(colleague)  # shares the study, does not own it
    admin = make_user("root", staff=True)

    for user, sees in [(researcher, True), (admin, True), (colleague, False)]:
        client.force_login(user)
        for html in (
            dashboard(client, study),
            client.get(reverse("study_detail", args=[study.pk])).content.decode(),
        ):
            assert worker.pseudonym in html
            assert ("PROLIFIC-SECRET-PID" in html) is sees, user.username
            assert ("SESSION-SECRET" in html) is sees, user.username


def test_strangers_get_404(client, researcher, other_researcher, annotator):
    study = vehicle_study(researcher)
    url = reverse("study_dashboard", args=[study.pk])
    for user in (other_researcher, annotator):
        client.force_login(user)
        assert client.get(url).status_code == 404
    client.logout()
    assert client.get(url).status_code == 302, "anonymous: to the login page"


# --- Sorting and paging -----------------------------------------------------------------------


def test_sort_keys_are_a_whitelist(client, researcher):
    study = vehicle_study(researcher, captions=3, target=3)
    people = [crowd_participant(study, f"w{k}") for k in range(3)]
    for count, person in zip([1, 3, 2], people, strict=True):
        for _ in range(count):
            answer(person)
    client.force_login(researcher)
    by_judgments = [people[1].pseudonym, people[2].pseudonym, people[0].pseudonym]
    newest_first = [person.pseudonym for person in reversed(people)]

    assert list(worker_rows(dashboard(client, study, sort="-judgments"))) == by_judgments
    assert list(worker_rows(dashboard(client, study, sort="judgments"))) == by_judgments[::-1]
    assert list(worker_rows(dashboard(client, study, sort="pseudonym"))) == sorted(
        p.pseudonym for p in people
    )
    assert list(worker_rows(dashboard(client, study))) == newest_first, "the default"
    # Anything else is ignored (the default order, newest first): model internals, a column
    # a member must not sort by (raw ids leak through the order), SQL.
    for bad in [
        "__class__",
        "external_id",
        "-external_id",
        "id; DROP TABLE annotation_judgment",
        "pseudonym DESC",
        "--judgments",
        "judgments__participant__user__password",
        "",
    ]:
        html = dashboard(client, study, sort=bad)
        assert list(worker_rows(html)) == newest_first, bad
    assert Judgment.objects.filter(study=study).count() == 6


def test_sort_links_work_without_javascript_and_with_htmx(client, researcher):
    study = vehicle_study(researcher)
    answer(crowd_participant(study, "w1"))
    client.force_login(researcher)

    html = client.get(reverse("study_detail", args=[study.pk]), {"sort": "median"}).content
    html = html.decode()

    detail = reverse("study_detail", args=[study.pk])
    partial = reverse("study_dashboard", args=[study.pk])
    # The current column toggles to descending; both links carry it.
    assert f'href="{detail}?sort=-median#dashboard" hx-get="{partial}?sort=-median"' in html
    assert 'aria-sort="ascending"' in html
    assert f'hx-get="{partial}?sort=median" hx-trigger="every 10s"' in html, "polls keep the sort"


def test_the_worker_table_is_paged(client, researcher):
    study = vehicle_study(researcher, captions=1)
    for k in range(55):
        crowd_participant(study, f"w{k:02d}")
    client.force_login(researcher)

    first = dashboard(client, study, sort="pseudonym")
    second = dashboard(client, study, sort="pseudonym", page="2")

    assert len(worker_rows(first)) == 50 and len(worker_rows(second)) == 5
    assert "55 participants; 51 to 55 shown (page 2 of 2)" in second
    assert not set(worker_rows(first)) & set(worker_rows(second))
    for bad in ["abc", "-1", "0", "２", "99999999999"]:
        assert len(worker_rows(dashboard(client, study, page=bad))) == 50, bad
    assert len(worker_rows(dashboard(client, study, page="9"))) == 5, "past the end: last page"


# --- Leases ------------------------------------------------------------------------------------


def test_a_lease_is_released_from_the_dashboard(client, researcher):
    study = vehicle_study(researcher)
    worker = crowd_participant(study, "away")
    lease = assignment_next(participant=worker)
    client.force_login(researcher)
    html = dashboard(client, study)
    action = reverse("study_release_lease", args=[study.pk, lease.pk])
    assert f'action="{action}"' in html
    assert f"Release the lease of {worker.pseudonym}" in html

    response = client.post(action)

    assert response.status_code == 302
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.RELEASED
    assert "No item is held by anyone now." in dashboard(client, study)


# --- The crowd setup panel ----------------------------------------------------------------------


def test_the_crowd_link_is_stable_and_works(client, researcher):
    study = vehicle_study(researcher)
    client.force_login(researcher)
    detail = reverse("study_detail", args=[study.pk])
    first = crowd_link_of(client.get(detail).content.decode())
    # The old link was signed with the time of each page load: a second later, another one.
    later = timezone.now() + timedelta(days=3)
    with (
        mock.patch("django.utils.timezone.now", return_value=later),
        mock.patch("django.core.signing.time.time", return_value=later.timestamp()),
    ):
        second = crowd_link_of(client.get(detail).content.decode())
    assert first == second

    study_close(study=study)
    study_reopen(study=study)
    assert crowd_link_of(client.get(detail).content.decode()) == first, "reopening keeps it"

    client.logout()
    path = first.split("testserver", 1)[1]
    entered = client.get(path, PROLIFIC)
    assert entered.status_code in (200, 302)
    assert Participant.objects.filter(study=study, external_id="PID-NEW").exists()


def test_the_crowd_link_expires_and_says_when(client, researcher, settings):
    study = vehicle_study(researcher)
    client.force_login(researcher)
    expires = Study.objects.get(pk=study.pk).updated_at + timedelta(
        seconds=settings.CAPEVAL_LINK_MAX_AGE
    )
    html = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert f"Valid until {expires:%-d %B %Y, %H:%M} UTC" in html
    path = reverse("crowd_entry", args=[crowd_link_token(study)])

    long_ago = timezone.now() - timedelta(seconds=settings.CAPEVAL_LINK_MAX_AGE + 60)
    Study.objects.filter(pk=study.pk).update(updated_at=long_ago)

    refused = client.get(path, PROLIFIC)
    assert refused.status_code == 400 and "expired" in refused.content.decode()
    assert not Participant.objects.filter(study=study).exists()
    html = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert "This link expired on" in html


def test_links_signed_the_old_way_stay_valid_until_they_expire(client, researcher, settings):
    study = vehicle_study(researcher)
    old = signing.TimestampSigner(salt=LINK_SALT).sign(str(study.public_id))

    assert client.get(reverse("crowd_entry", args=[old]), PROLIFIC).status_code in (200, 302)

    stale_time = timezone.now().timestamp() - settings.CAPEVAL_LINK_MAX_AGE - 60
    with mock.patch("django.core.signing.time.time", return_value=stale_time):
        stale = signing.TimestampSigner(salt=LINK_SALT).sign(str(study.public_id))
    refused = client.get(reverse("crowd_entry", args=[stale]), {**PROLIFIC, "PROLIFIC_PID": "B"})
    assert refused.status_code == 400 and "expired" in refused.content.decode()


def test_a_stable_link_of_one_study_cannot_name_another(client, researcher):
    study = vehicle_study(researcher)
    other = vehicle_study(researcher, name="Other")
    value, signature = crowd_link_token(study).split(":", 1)
    assert value == str(study.public_id)

    forged = client.get(reverse("crowd_entry", args=[f"{other.public_id}:{signature}"]), PROLIFIC)

    assert forged.status_code == 400 and "not valid" in forged.content.decode()
    assert not Participant.objects.exists()


def test_the_mturk_snippet_is_xml_naming_the_crowd_link(client, researcher):
    study = vehicle_study(researcher)
    client.force_login(researcher)
    html = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    snippet = unescape(re.search(r'id="mturk-question"[^>]*>(.*?)</textarea>', html, re.S)[1])

    root = ET.fromstring(snippet)

    assert root.tag == f"{MTURK_NS}ExternalQuestion"
    assert root.find(f"{MTURK_NS}ExternalURL").text == crowd_link_of(html)
    assert int(root.find(f"{MTURK_NS}FrameHeight").text) >= 0
    assert 'data-copy-target="crowd-link"' in html and 'data-copy-target="mturk-question"' in html


def test_the_prolific_settings_are_shown(client, researcher):
    study = vehicle_study(researcher, prolific_study_id="65f0c0ffee", completion_code="CODE42")
    client.force_login(researcher)

    html = client.get(reverse("study_detail", args=[study.pk])).content.decode()

    assert "<code>65f0c0ffee</code>: workers arriving with another" in html
    assert "https://app.prolific.com/submissions/complete?cc=CODE42" in html
    assert ">CODE42</strong>" in html


def test_a_draft_says_where_the_link_will_be(client, researcher):
    study = vehicle_study(researcher, live=False)
    client.force_login(researcher)

    html = client.get(reverse("study_detail", args=[study.pk])).content.decode()

    assert "The crowd link appears here when the study opens" in html
    assert 'id="crowd-link"' not in html


# --- Query budget ------------------------------------------------------------------------------


def judged(researcher, *, captions, workers, name):
    """A live vehicle study of ``captions`` items, each worker answering ``captions``
    items (two of them left as open leases), and a finished report."""
    study = vehicle_study(researcher, captions=captions, target=workers, name=name)
    for k in range(workers):
        person = crowd_participant(study, f"{name}-{k}")
        for _ in range(captions - (1 if k < 2 else 0)):
            answer(person)
        if k < 2:
            assignment_next(participant=person)
    enqueue(report_request(study=study, user=researcher))
    return study


def queries_of(client, url):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured)


def test_pages_cost_the_same_queries_for_a_small_and_a_larger_study(client, researcher):
    small = judged(researcher, captions=3, workers=3, name="small")
    large = judged(researcher, captions=24, workers=12, name="large")
    assert Judgment.objects.filter(study=large).count() == 24 * 12 - 2
    client.force_login(researcher)

    for name in ("study_detail", "study_dashboard", "study_report"):
        # The first request of a page may fill caches (sessions, content types): not counted.
        queries_of(client, reverse(name, args=[small.pk]))
        counts = [queries_of(client, reverse(name, args=[s.pk])) for s in (small, large)]
        assert counts[0] == counts[1], f"{name}: {counts[0]} queries vs {counts[1]}"
