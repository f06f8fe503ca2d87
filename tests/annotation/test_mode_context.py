"""The context mode (issue 43) through its real services and views: import, items, who
gets which, validation, the reading floor, the after-image part's protection.

Studies are built through the real import service (``tests/factories/context.py``) and
raters declare their vision through ``participant_declare_vision``.
"""

from __future__ import annotations

import html
import io
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.errors import Forbidden, ServiceError
from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant, Study
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next
from annotation.services.imports import study_import
from annotation.services.judgments import judgment_submit
from annotation.services.participants import crowd_link_token, participant_declare_vision
from annotation.services.simulation import crowd_simulate
from rubrics.context.questions import QUESTIONS
from tests.factories.context import (
    AFTER_ANSWER,
    BEFORE_ANSWER,
    CONTEXTS,
    DESCRIPTIONS,
    context_study,
    rate,
    rater,
)
from tests.factories.core import crowd_participant

pytestmark = pytest.mark.django_db
MODE = get_mode("context")


def test_import_stores_contexts_with_domain_and_title(researcher):
    study = context_study(researcher, images=2, live=False)
    contexts = Caption.objects.filter(study=study, purpose="context").order_by("id")
    assert contexts.count() == 2 * len(CONTEXTS)
    first = contexts[0]
    system, domain, title, passage = CONTEXTS[0]
    assert first.spec == {"domain": domain.lower(), "title": title}
    assert first.raw_text == passage
    assert first.system == f"{system}-0"
    assert Caption.objects.filter(study=study, purpose="study").count() == 2 * len(DESCRIPTIONS)


def test_items_one_per_description_context_and_group(researcher):
    study = context_study(researcher, images=2, blv_ratings=2, sighted_ratings=3)
    items = list(Item.objects.filter(study=study))
    # 2 images x 2 descriptions x 2 contexts x 2 groups.
    assert len(items) == 2 * len(DESCRIPTIONS) * len(CONTEXTS) * 2
    by_kind = {kind: [i for i in items if i.kind == kind] for kind in ("blv", "sighted")}
    assert {i.target for i in by_kind["blv"]} == {2}
    assert {i.target for i in by_kind["sighted"]} == {3}
    assert {i.spec["parts"] for i in by_kind["blv"]} == {1}
    assert {i.spec["parts"] for i in by_kind["sighted"]} == {2}
    for item in items:
        description = Caption.objects.get(pk=item.spec["caption"])
        context = Caption.objects.get(pk=item.spec["context"])
        assert description.purpose == "study" and context.purpose == "context"
        assert description.image_id == context.image_id == item.image_id
        assert item.spec["domain"] == context.spec["domain"]
    # The same image in two contexts is two items (per group).
    pairs = {(i.spec["caption"], i.spec["context"], i.kind) for i in items}
    assert len(pairs) == len(items)


def test_a_group_with_no_target_has_no_items(researcher):
    study = context_study(researcher, images=1, blv_ratings=0, sighted_ratings=1)
    assert set(Item.objects.filter(study=study).values_list("kind", flat=True)) == {"sighted"}


def test_no_group_at_all_is_refused(researcher):
    with pytest.raises(ServiceError) as refused:
        MODE.clean_settings({"blv_ratings": 0, "sighted_ratings": 0})
    assert refused.value.field == "blv_ratings"


def test_a_context_without_domain_or_title_is_refused_with_its_line(researcher, tmp_path):
    study = context_study(researcher, images=1, live=False)
    image = study.images.first().name
    path = tmp_path / "contexts.csv"
    path.write_text(
        f"image,system,domain,title,caption\n{image},x,,A title,A passage.\n"
        f"{image},y,news,,Another passage.\n",
        encoding="utf-8",
    )
    with pytest.raises(ServiceError) as refused:
        study_import(study=study, captions=path, purpose="context")
    errors = refused.value.details["errors"]
    assert any(e.startswith("line 2:") and "domain is empty" in e for e in errors)
    assert any(e.startswith("line 3:") and "title is empty" in e for e in errors)


def test_worker_is_served_only_their_group_and_never_a_description_twice(researcher):
    study = context_study(researcher, images=2, blv_ratings=3, sighted_ratings=3)
    for vision, kind in (("blind", "blv"), ("low_vision", "blv"), ("sighted", "sighted")):
        participant = rater(study, vision)
        seen = []
        while (lease := rate(participant)) is not None:
            assert lease.item.kind == kind
            seen.append(lease.item.spec["caption"])
        # Every description once, never in its second context.
        assert sorted(seen) == sorted(
            Caption.objects.filter(study=study, purpose="study").values_list("pk", flat=True)
        )


def test_undeclared_participant_gets_nothing(researcher):
    study = context_study(researcher, images=1)
    assert assignment_next(participant=crowd_participant(study, "nobody")) is None


def test_validation_names_each_field(researcher):
    study = context_study(researcher, images=1)
    participant = rater(study, "sighted")
    lease = assignment_next(participant=participant)
    later = timezone.now() + timedelta(minutes=5)
    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=participant,
            token=lease.token,
            data={"overall": "6", "imaginability": "", "relevance": "3", "irrelevance": "x"},
            part=0,
            now=later,
        )
    named = [p["field"] for p in refused.value.details["fields"]]
    assert named == ["overall", "imaginability", "irrelevance"]
    assert refused.value.field == "overall"
    assert not Judgment.objects.filter(item__study=study).exists()
    judgment_submit(
        participant=participant, token=lease.token, data=BEFORE_ANSWER, part=0, now=later
    )
    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=participant,
            token=lease.token,
            data={**AFTER_ANSWER, "missing": "bad \u202e text"},
            part=1,
            now=later + timedelta(minutes=1),
        )
    assert refused.value.field == "missing"


def test_stored_payloads_are_the_spec(researcher):
    study = context_study(researcher, images=1, blv_ratings=0)
    participant = rater(study, "sighted")
    rate(participant)
    before, after = Judgment.objects.filter(participant=participant).order_by("part")
    assert before.payload == {k: int(v) for k, v in BEFORE_ANSWER.items()}
    assert after.payload == {"overall": 3, "accuracy": 4, "missing": "The umbrella's colour."}
    participant.refresh_from_db()
    assert participant.state["rated"] == 1


# ---------------------------------------------------------------------- the pages


def arrive(study, vision: str, pid: str):
    """A browser that joined through the crowd link and declared ``vision``."""
    client = Client()
    response = client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": f"se-{pid}"},
    )
    assert response.status_code == 302, response.content.decode()[:300]
    participant = Participant.objects.get(study=study, external_id=pid)
    participant_declare_vision(
        participant, vision=vision, screen_reader=vision != "sighted", consent=True
    )
    return client, participant


def item_page(client, study):
    response = client.get(reverse("participate_next", args=[study.public_id]))
    assert response.status_code == 200
    return response, response.content.decode()


def submit_url(study, response):
    token = response.context["assignment"].token
    return reverse("participate_submit", args=[study.public_id, token])


def image_urls(study) -> list[str]:
    """Every address of every image of the study a page could carry."""
    urls = []
    for image in Image.objects.filter(study=study):
        urls += [image.display, image.file, image.sha256]
        urls.append(reverse("participant_image", args=[study.public_id, image.pk]))
    return [url for url in urls if url]


def headings(page: str) -> list[tuple[int, str]]:
    """The page's headings in order, outside dialogs (a closed dialog is not read; the
    zoom's and the guidelines' have their own)."""
    page = re.sub(r"<dialog.*?</dialog>", "", page, flags=re.S)
    return [
        (int(level), re.sub(r"<[^>]+>", "", text).strip())
        for level, text in re.findall(r"<h([1-6])[^>]*>(.*?)</h\1>", page, re.S)
    ]


def shown_ago(assignment, seconds: float) -> None:
    """Make the lease's current part look shown ``seconds`` ago on the server's clock."""
    at = timezone.now() - timedelta(seconds=seconds)
    Assignment.objects.filter(pk=assignment.pk).update(served_at=at)
    Judgment.objects.filter(assignment_id=assignment.pk).update(created_at=at)


OPEN = {"crowd_arrivals_per_address_per_hour": 1000, "crowd_open_leases_per_address": 1000}


def test_part_0_shows_context_and_description_but_no_image(researcher):
    study = context_study(researcher, images=1, **OPEN)
    for vision, pid in (("blind", "b1"), ("sighted", "s1")):
        client, participant = arrive(study, vision, pid)
        response, page = item_page(client, study)
        assert "<img" not in page
        assert not [url for url in image_urls(study) if url in page]
        assert "image_url" not in response.context or not response.context["image_url"]
        item = response.context["assignment"].item
        context = Caption.objects.get(pk=item.spec["context"])
        assert context.raw_text.split(".")[0] in page
        assert context.spec["title"] in page
        assert html.escape(Caption.objects.get(pk=item.spec["caption"]).text) in page
        # One h1, then the regions in reading order, each a section named by its heading.
        found = headings(page)
        assert [level for level, _ in found].count(1) == 1
        names = [text for _, text in found]
        assert names[:4] == [
            "Rate a description in its context",
            "Where the image appears",
            "The description",
            "Your ratings",
        ]
        assert '<section class="context-where" aria-labelledby="where-heading">' in page
        assert 'aria-labelledby="description-heading"' in page
        # Each rating a native radio group: the question as legend, number and word labels.
        assert page.count("<fieldset") == 4
        for question in QUESTIONS[0].values():
            assert html.escape(question.text) in page
            for number, word in enumerate(question.scale, start=1):
                label = f'<label for="{question.name}-{number}">{number} - {word}</label>'
                assert (
                    html.escape(label, quote=False).replace("&lt;", "<").replace("&gt;", ">")
                    in page
                    or label in page
                )
        # The minimum time in words.
        seconds = response.context["minimum_seconds"]
        assert seconds > 0
        assert f"You can send your ratings after {seconds} seconds" in page


def test_part_1_shows_the_image_to_a_sighted_rater(researcher):
    study = context_study(researcher, images=1, blv_ratings=0, **OPEN)
    client, participant = arrive(study, "sighted", "s1")
    response, _ = item_page(client, study)
    item = response.context["assignment"].item
    shown_ago(response.context["assignment"], 120)
    stored = client.post(submit_url(study, response), {"part": "0", **BEFORE_ANSWER})
    assert stored.status_code == 302
    response, page = item_page(client, study)
    assert response.context["part"] == 1
    assert "<img" in page and item.image.display in page
    assert [text for _, text in headings(page)][:4] == [
        "Rate the description with the image",
        "Where the image appears",
        "The image",
        "The description",
    ]
    assert '<textarea name="missing"' in page
    assert page.count("<fieldset") == 2


def test_blv_rater_is_never_given_the_image_part_or_the_image(researcher):
    """The attack: a rater who declared blind posts part 1 of their item and asks for its
    image; both are refused and nothing is stored."""
    study = context_study(researcher, images=1, **OPEN)
    client, participant = arrive(study, "blind", "b1")
    response, _ = item_page(client, study)
    assignment = response.context["assignment"]
    assert assignment.item.kind == "blv" and assignment.item.spec["parts"] == 1
    url = submit_url(study, response)
    shown_ago(assignment, 120)
    refused = client.post(url, {"part": "1", **AFTER_ANSWER})
    assert refused.status_code in (400, 403)
    assert "<img" not in refused.content.decode()
    assert not Judgment.objects.filter(participant=participant).exists()
    # The zoom's full-size image of their own item, and of any image of the study.
    for image in Image.objects.filter(study=study):
        shown = client.get(reverse("participant_image", args=[study.public_id, image.pk]))
        assert shown.status_code == 404
    # Part 0 then still works: the refusal stored nothing and broke nothing.
    stored = client.post(url, {"part": "0", **BEFORE_ANSWER})
    assert stored.status_code == 302
    assert Judgment.objects.filter(participant=participant).count() == 1


def test_blv_rater_holding_a_sighted_lease_is_refused_either_part(researcher):
    """Defence in depth: even a lease of a sighted item (never served to them) carries no
    answer of a rater who declared low vision, and the mode refuses them part 1 itself
    (the service asks for part 0 first, so part 1 is checked on the mode)."""
    study = context_study(researcher, images=1, **OPEN)
    lease = assignment_next(participant=rater(study, "sighted"))
    blv = rater(study, "low_vision")
    Assignment.objects.filter(pk=lease.pk).update(participant=blv)
    later = timezone.now() + timedelta(minutes=2)
    with pytest.raises(Forbidden):
        judgment_submit(participant=blv, token=lease.token, data=BEFORE_ANSWER, part=0, now=later)
    lease.refresh_from_db()
    lease.participant = blv
    with pytest.raises(Forbidden) as refused:
        MODE.validate(lease, 1, AFTER_ANSWER)
    assert refused.value.field == "part"
    assert not Judgment.objects.filter(participant=blv).exists()


def test_an_answer_sent_before_the_reading_time_is_refused_and_said(researcher):
    study = context_study(researcher, images=1, **OPEN)
    client, participant = arrive(study, "blind", "b1")
    response, _ = item_page(client, study)
    assignment = response.context["assignment"]
    description, context = (
        Caption.objects.get(pk=assignment.item.spec[k]) for k in ("caption", "context")
    )
    words = sum(
        len(text.split()) for text in (context.spec["title"], context.raw_text, description.text)
    )
    minimum = words * 60 / 500  # the default rate
    shown_ago(assignment, minimum - 1)
    refused = client.post(submit_url(study, response), {"part": "0", **BEFORE_ANSWER})
    assert refused.status_code == 429
    page = refused.content.decode()
    assert 'role="alert"' in page and "Nothing was saved" in page
    assert "Please take at least" in page
    # The answers come back as sent.
    assert 'value="4" checked' in page
    assert not Judgment.objects.filter(participant=participant).exists()
    shown_ago(assignment, minimum + 1)
    stored = client.post(submit_url(study, response), {"part": "0", **BEFORE_ANSWER})
    assert stored.status_code == 302


def test_refused_answers_name_each_field_on_the_page(researcher):
    study = context_study(researcher, images=1, **OPEN)
    client, participant = arrive(study, "sighted", "s1")
    response, _ = item_page(client, study)
    shown_ago(response.context["assignment"], 120)
    refused = client.post(
        submit_url(study, response), {"part": "0", "overall": "3", "relevance": "9"}
    )
    assert refused.status_code == 400
    page = refused.content.decode()
    assert 'role="alert"' in page
    for field in ("imaginability", "relevance", "irrelevance"):
        assert f'href="#q-{field}"' in page
        assert f'id="error-{field}"' in page
    assert 'id="error-overall"' not in page
    assert 'value="3" checked' in page


# ---------------------------------------------------------------------- the crowd


def correlation(xs: list[float], ys: list[float]) -> float:
    """Pearson's r, written out (no library of the code under test)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5


def test_simulated_crowd_of_both_groups_completes_a_study(researcher):
    descriptions = {
        "good-detail": DESCRIPTIONS["good-detail"],
        "bad-short": DESCRIPTIONS["bad-short"],
        "mid-plain": "A person with an umbrella in the rain.",
        "Human": "A woman in a red coat walks under a black umbrella through the rain.",
    }
    study = context_study(
        researcher,
        images=3,
        descriptions=descriptions,
        blv_ratings=3,
        sighted_ratings=3,
        completion_after=4,
        **OPEN,
    )
    summary = crowd_simulate(study=study, workers=16, seed=7)
    assert not summary.refusals
    items = Item.objects.filter(study=study)
    assert all(item.judgment_count == item.target for item in items)
    judgments = Judgment.objects.filter(item__study=study).select_related("item", "participant")
    by_group: dict[str, list] = {"blv": [], "sighted": []}
    for judgment in judgments:
        # Every judgment is of the rater's own group; part 1 only for sighted raters.
        assert judgment.item.kind == judgment.participant.vision_group
        assert judgment.part == 0 or judgment.item.kind == "sighted"
        if judgment.part == 0:
            by_group[judgment.item.kind].append(judgment.payload)
    # Nobody rated a description in two contexts.
    seen = {}
    for judgment in judgments.filter(part=0):
        key = (judgment.participant_id, judgment.item.spec["caption"])
        assert seen.setdefault(key, judgment.item.spec["context"]) == judgment.item.spec["context"]
    # The two groups weigh context differently: BLV raters' overall follows relevance more,
    # sighted raters' the description's detail (what the report's difference rests on).
    leaning = {}
    for group, payloads in by_group.items():
        overall = [p["overall"] for p in payloads]
        leaning[group] = correlation(overall, [p["relevance"] for p in payloads]) - correlation(
            overall, [p["imaginability"] for p in payloads]
        )
    assert leaning["blv"] > leaning["sighted"] + 0.2, leaning
    # Every worker who rated earned the code or ran out of descriptions.
    for participant in Participant.objects.filter(study=study, judgments__isnull=False).distinct():
        assert MODE.completion_earned(participant)


def test_dashboard_panel_counts_items_by_domain_and_group(client, researcher):
    study = context_study(researcher, images=1, blv_ratings=1, sighted_ratings=2, **OPEN)
    rate(rater(study, "blind"))
    client.force_login(researcher)
    page = client.get(reverse("study_dashboard", args=[study.pk])).content.decode()
    assert "Progress by kind of site and rater group" in page
    # One image: 2 descriptions in each domain; one BLV rating given (one item finished).
    row = re.search(r"<tr><th scope=\"row\">(News|Shopping)</th>(.*?)</tr>", page, re.S)
    rows = dict(re.findall(r"<tr><th scope=\"row\">(\w+)</th>(.*?)</tr>", page, re.S))
    assert row is not None
    cells = {name: re.findall(r"<td>(.*?)</td>", html_row) for name, html_row in rows.items()}
    finished = [cells[d][0] for d in ("News", "Shopping")]
    assert sorted(finished) == [
        "0 of 2 finished; 0 of 2 ratings",
        "1 of 2 finished; 1 of 2 ratings",
    ]
    assert [cells[d][1] for d in ("News", "Shopping")] == ["0 of 2 finished; 0 of 4 ratings"] * 2
    # Items only: no participant's vision on the page.
    assert "blind" not in page.lower().replace("blind or low-vision raters", "")


def test_the_demo_shows_every_photograph_in_two_contexts():
    call_command("load_demo", no_finished=True, no_published=True, stdout=io.StringIO())
    study = Study.objects.get(name=MODE.demo.live)
    contexts = study.captions.filter(purpose="context")
    assert contexts.count() == 18
    for image in study.images.all():
        domains = [c.spec["domain"] for c in contexts.filter(image=image)]
        assert len(domains) == 2 and len(set(domains)) == 2, image.name
    descriptions = study.captions.filter(purpose="study").count()
    # Each description in both contexts of its photograph, for each of the two groups.
    assert Item.objects.filter(study=study).count() == descriptions * 2 * 2
    assert study.status == Study.Status.LIVE


def test_the_code_is_capped_by_the_descriptions_one_worker_can_rate(researcher):
    study = context_study(researcher, images=1, completion_after=6, **OPEN)
    # One image: 2 descriptions, each in 2 contexts; a worker rates each description once.
    reach = MODE.completion_reach(study)
    assert "asks for 6 descriptions" in reach and "at most 2" in reach
    participant = rater(study, "blind")
    rate(participant)
    participant.refresh_from_db()
    assert not MODE.completion_earned(participant)
    progress = MODE.completion_progress(participant)
    assert (progress.done, progress.needed, progress.unit) == (1, 2, "descriptions")
    rate(participant)
    participant.refresh_from_db()
    assert MODE.completion_earned(participant) and participant.completed_at is not None
    assert rate(participant) is None


def test_the_researchers_preview_shows_the_first_part(client, researcher):
    study = context_study(researcher, images=1, **OPEN)
    client.force_login(researcher)
    response = client.get(reverse("study_preview", args=[study.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Where the image appears" in page and "<img" not in page


def test_the_study_page_gives_each_group_its_own_prolific_url(client, researcher):
    study = context_study(researcher, images=1, **OPEN)
    client.force_login(researcher)
    page = html.unescape(client.get(reverse("study_detail", args=[study.pk])).content.decode())
    urls = dict(
        re.findall(r"Study URL for ([\w -]+?) raters only</dt><dd><code>(\S+?)</code>", page)
    )
    assert set(urls) == {"blind and low-vision", "sighted"}
    blv_url = urls["blind and low-vision"]
    assert blv_url.endswith("&group=blv") and urls["sighted"].endswith("&group=sighted")

    # What Prolific does with the URL: its placeholders filled, the path kept.
    filled = blv_url.replace("{{%PROLIFIC_PID%}}", "pid-1").replace("{{%STUDY_ID%}}", "st")
    filled = filled.replace("{{%SESSION_ID%}}", "se-1").split("://", 1)[1].split("/", 1)[1]
    worker = Client(REMOTE_ADDR="198.51.100.9")
    assert worker.get("/" + filled).status_code == 302
    vision = reverse("participate_vision", args=[study.public_id])
    sighted = worker.post(vision, {"vision": "sighted", "screen_reader": "no", "consent": "yes"})
    blind = worker.post(vision, {"vision": "blind", "screen_reader": "yes", "consent": "yes"})

    assert sighted.status_code == 403
    assert blind.status_code == 302
    assert Participant.objects.get(study=study).vision == "blind"


def answer_until_done(client, study, ratings) -> str:
    """Rate item after item through the pages with ``ratings(n)`` (a dict of the four
    before-image answers of the n-th description) until no item is left; the last page."""
    for n in range(50):
        page = client.get(reverse("participate_next", args=[study.public_id]))
        assignment = page.context.get("assignment") if page.context else None
        if assignment is None or "part" not in page.context:
            return page.content.decode()
        shown_ago(assignment, 600)
        sent = client.post(submit_url(study, page), {"part": "0", **ratings(n)})
        assert sent.status_code == 302, sent.content.decode()[:500]
    raise AssertionError("the study never ran out of items")


def test_a_constant_rater_never_sees_the_code_and_an_honest_one_does(researcher):
    # Three images x two descriptions: six descriptions, the code after four.
    study = context_study(researcher, images=3, completion_after=4, **OPEN)
    code = study.completion_code

    bot, bot_participant = arrive(study, "blind", "bot")
    finished = answer_until_done(
        bot,
        study,
        lambda n: dict.fromkeys(("overall", "imaginability", "relevance", "irrelevance"), "3"),
    )
    honest, _ = arrive(study, "blind", "honest")
    varied = answer_until_done(
        honest,
        study,
        lambda n: {
            "overall": str(1 + n % 5),
            "imaginability": "4",
            "relevance": str(5 - n % 3),
            "irrelevance": "2",
        },
    )

    bot_participant.refresh_from_db()
    assert code not in finished
    assert "did not pass this study" in finished and "the rating 3 on 100%" in finished
    assert [flag["kind"] for flag in bot_participant.flags] == ["rating_pattern"]
    assert bot_participant.completed_at is None
    # The bot's judgments stay, excluded with the reason, and it is served nothing more.
    kept = Judgment.objects.filter(participant=bot_participant)
    assert kept.count() == 4
    assert {j.exclusion_reason for j in kept} == {
        "rating pattern: the rating 3 on 100% of 16 ratings (every question of every description)"
    }
    assert code in varied
