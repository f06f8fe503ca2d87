"""Who may spend a judge endpoint's stored API key (issue 25's run, followed up).

The attack: a rival researcher the study is shared with runs the judge, again and again
(a new prompt version each time, so the cache answers nothing), on the key the owner
saved: every run is paid by the owner. A shared study lets a member manage it, not spend
another researcher's money. So a stored key is spent only by the researcher who saved it
(a key saved before that was recorded, or by a command, by the study's owner); anyone
else who manages the study may save their own key and run on that. The second attack
keeps the owner's key but changes what it pays for (more repeats, a dearer model, zeroed
prices, a padded prompt): such a change by anyone but the saver drops the key.

Every case goes through the real views (the page's run button and the API), against the
loopback judge server of ``tests/factories/judge_server.py``, which counts what reaches it.
"""

from __future__ import annotations

import pytest
from django.test import TestCase
from django.urls import reverse

from annotation.models import Job, JudgeEndpoint
from annotation.modes import get_mode
from annotation.services.judge_endpoints import judge_endpoint_save
from annotation.services.judge_runs import MAX_PROMPT
from tests.annotation.test_judge_runs import write_images
from tests.factories.judge_server import KEY, fake_judge, judge_on_loopback  # noqa: F401
from tests.factories.vicr import vicr_study

# The fake judge listens on the loopback, which the deployment must list to be reached.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("judge_on_loopback")]

OTHER_KEY = "sk-member-" + "9" * 24


def _settings_form(url: str, key: str = "") -> dict[str, str]:
    return {
        "name": "toy-vlm",
        "base_url": url,
        "model": "judge-7b",
        "api_key": key,
        "concurrency": "2",
        "timeout": "5",
        "max_retries": "0",
        "temperature": "0",
        "repeats": "1",
        "price_prompt_per_1k": "0",
        "price_completion_per_1k": "0",
    }


def _run_from_page(client, study):
    # No broker in tests: a queued job runs when the request's transaction commits.
    with TestCase.captureOnCommitCallbacks(execute=True):
        return client.post(reverse("study_judge_run", args=[study.pk]))


def _run_from_api(client, study):
    with TestCase.captureOnCommitCallbacks(execute=True):
        return client.post(f"/api/studies/{study.pk}/judges/runs/")


@pytest.fixture
def shared(researcher, other_researcher):
    study = vicr_study(researcher, game=3)
    study.members.add(other_researcher)
    write_images(study)  # the judge is sent each pair's image
    return study


@pytest.mark.parametrize("route", [_run_from_page, _run_from_api])
def test_a_member_cannot_spend_the_key_the_owner_saved(
    route, shared, researcher, other_researcher, client
):
    with fake_judge(lambda prompt, n: "4") as server:
        client.force_login(researcher)
        saved = client.post(reverse("study_judge_settings", args=[shared.pk]),
                            _settings_form(server.url, KEY))  # fmt: skip
        assert saved.status_code == 302
        client.force_login(other_researcher)

        answer = route(client, shared)

        assert answer.status_code == 403
        body = answer.content.decode()
        assert "saved by" in body and researcher.username in body
        assert "Traceback" not in body and KEY not in body
        assert not Job.objects.filter(study=shared, kind=Job.Kind.JUDGE).exists()
        assert server.total == 0, "nothing reached the paid endpoint"
        # The owner, who saved it, still runs the judge on it: the 3 game pairs are asked.
        client.force_login(researcher)
        assert route(client, shared).status_code in (202, 302)
        assert server.total == 3


def _keys_sent(server) -> set[str]:
    return {headers.get("Authorization", "") for headers in server.headers}


def test_a_member_runs_on_their_own_key_and_then_the_owner_cannot_spend_it(
    shared, researcher, other_researcher, client
):
    with (
        fake_judge(lambda prompt, n: "4") as owners,
        fake_judge(lambda prompt, n: "4", key=OTHER_KEY) as members,
    ):
        client.force_login(researcher)
        settings_url = reverse("study_judge_settings", args=[shared.pk])
        client.post(settings_url, _settings_form(owners.url, KEY))
        client.force_login(other_researcher)
        # Same address, no key: the owner's key stays, and stays the owner's to spend.
        client.post(reverse("study_judge_settings", args=[shared.pk]), _settings_form(owners.url))
        assert _run_from_page(client, shared).status_code == 403
        assert JudgeEndpoint.objects.get(study=shared).api_key_saved_by == researcher

        client.post(reverse("study_judge_settings", args=[shared.pk]),
                    _settings_form(members.url, OTHER_KEY))  # fmt: skip
        assert _run_from_page(client, shared).status_code == 302
        job = Job.objects.get(study=shared, kind=Job.Kind.JUDGE)
        assert job.status == Job.Status.DONE, job.error
        assert members.total == 3 and _keys_sent(members) == {f"Bearer {OTHER_KEY}"}
        assert owners.total == 0

        client.force_login(researcher)
        assert _run_from_page(client, shared).status_code == 403
        assert Job.objects.filter(study=shared, kind=Job.Kind.JUDGE).count() == 1


def test_a_key_saved_by_no_researcher_is_nobodys_and_an_endpoint_without_key_is_anyones(
    shared, researcher, other_researcher, client
):
    with fake_judge(lambda prompt, n: "4") as server:
        # Saved with no user (a command on the server): no researcher may spend it.
        judge_endpoint_save(study=shared, name="toy-vlm", base_url=server.url,
                            model="judge-7b", api_key=KEY)  # fmt: skip
        for user in (researcher, other_researcher):
            client.force_login(user)
            answer = _run_from_page(client, shared)
            assert answer.status_code == 403
            assert "saved by a command on the server" in answer.content.decode()
        assert server.total == 0

        # No key (a local server nobody pays for): any researcher of the study may run it.
        judge_endpoint_save(study=shared, name="toy-vlm", base_url=server.url,
                            model="judge-7b", clear_key=True)  # fmt: skip
        client.force_login(other_researcher)
        assert _run_from_page(client, shared).status_code == 302
        job = Job.objects.get(study=shared, kind=Job.Kind.JUDGE)
        assert job.created_by == other_researcher
        assert server.total == 3 and _keys_sent(server) == {""}, "no key was sent"


def test_a_queued_run_does_not_spend_a_key_saved_after_it_was_requested(
    shared, researcher, other_researcher
):
    """The member queues a run on their own key; before it starts the owner saves theirs.
    The run must not go out on the owner's key, which the member may not spend."""
    from annotation.services.judge_runs import judge_run_request
    from annotation.services.runner import job_run

    with fake_judge(lambda prompt, n: "4") as server:
        judge_endpoint_save(study=shared, name="toy-vlm", base_url=server.url,
                            model="judge-7b", api_key=OTHER_KEY, by=other_researcher)  # fmt: skip
        job = judge_run_request(study=shared, by=other_researcher)
        judge_endpoint_save(study=shared, name="toy-vlm", base_url=server.url,
                            model="judge-7b", api_key=KEY, by=researcher)  # fmt: skip

        job_run(job=job)

        job.refresh_from_db()
        assert job.status == Job.Status.FAILED
        assert "saved by" in job.error and KEY not in job.error
        assert server.total == 0


def test_keys_saved_before_the_saver_was_recorded_become_the_owners(shared, researcher):
    """The migration gives each stored key to the study's owner, who could always run it;
    an endpoint with no key stays no one's."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("annotation.migrations.0014_judge_key_saved_by")
    with fake_judge(lambda prompt, n: "4") as server:
        endpoint = judge_endpoint_save(study=shared, name="toy-vlm", base_url=server.url,
                                       model="judge-7b", api_key=KEY)  # fmt: skip
    keyless_study = vicr_study(researcher, game=1)
    keyless = judge_endpoint_save(study=keyless_study, name="local", base_url=server.url,
                                  model="judge-7b")  # fmt: skip
    assert endpoint.api_key_saved_by is None

    migration.keys_to_owners(apps, None)

    endpoint.refresh_from_db()
    keyless.refresh_from_db()
    assert endpoint.api_key_saved_by == researcher == shared.owner
    assert keyless.api_key_saved_by is None


def test_a_member_who_changes_what_the_key_pays_for_drops_it(
    shared, researcher, other_researcher, client
):
    """The attack: the member keeps the owner's key but raises the repeats (each question
    asked ten times), sets the prices to 0 (the run then reports no cost) and picks another
    model; the owner, trusting the settings they saved, runs the judge and pays ten times
    over. A key pays only for the settings its saver last saved: another researcher's change
    to the model or a number drops it, and the page says so."""
    with fake_judge(lambda prompt, n: "4") as server:
        settings_url = reverse("study_judge_settings", args=[shared.pk])
        client.force_login(researcher)
        client.post(settings_url, _settings_form(server.url, KEY))
        client.force_login(other_researcher)
        costly = {**_settings_form(server.url), "repeats": "10", "price_prompt_per_1k": "0",
                  "model": "judge-70b"}  # fmt: skip

        answer = client.post(settings_url, costly, follow=True)
        client.force_login(researcher)
        _run_from_page(client, shared)

        assert f"Bearer {KEY}" not in _keys_sent(server), "the owner's key paid for it"
        endpoint = JudgeEndpoint.objects.get(study=shared)
        assert endpoint.repeats == 10 and endpoint.model == "judge-70b", "the change is saved"
        assert not endpoint.api_key_token and endpoint.api_key_saved_by is None
        assert answer.status_code == 200
        page = answer.content.decode()
        assert f"The API key saved by {researcher.username} was removed" in page

        # The owner saves the key again with the settings now shown: it pays for them.
        client.post(settings_url, {**costly, "api_key": KEY})
        endpoint.refresh_from_db()
        assert endpoint.api_key_saved_by == researcher and endpoint.repeats == 10


def test_the_savers_own_changes_and_a_members_unchanged_save_keep_the_key(
    shared, researcher, other_researcher, client
):
    with fake_judge(lambda prompt, n: "4") as server:
        settings_url = reverse("study_judge_settings", args=[shared.pk])
        client.force_login(researcher)
        client.post(settings_url, _settings_form(server.url, KEY))
        client.post(settings_url, {**_settings_form(server.url), "repeats": "3"})
        endpoint = JudgeEndpoint.objects.get(study=shared)
        assert endpoint.api_key_saved_by == researcher and endpoint.repeats == 3

        client.force_login(other_researcher)
        # Only the name, which costs nothing, differs.
        client.post(settings_url, {**_settings_form(server.url), "repeats": "3", "name": "v2"})
        endpoint.refresh_from_db()
        assert endpoint.name == "v2" and endpoint.api_key_saved_by == researcher
        assert endpoint.api_key_token


def test_a_members_new_prompt_is_not_run_on_the_owners_key(
    shared, researcher, other_researcher, client
):
    """The same attack through the prompt: the member pads it to the longest allowed, so
    every question the owner's next run asks is paid at many times its tokens."""
    prompts = []
    with fake_judge(lambda prompt, n: prompts.append(prompt) or "4") as server:
        client.force_login(researcher)
        client.post(reverse("study_judge_settings", args=[shared.pk]),
                    _settings_form(server.url, KEY))  # fmt: skip
        prompt_url = reverse("study_judge_prompt", args=[shared.pk])
        default = get_mode(shared.mode).judging.default_prompt(shared)
        client.post(prompt_url, {"text": default})  # the owner's own version keeps the key
        assert JudgeEndpoint.objects.get(study=shared).api_key_saved_by == researcher
        client.force_login(other_researcher)
        client.post(prompt_url, {"text": default})  # the same text: no new version
        assert JudgeEndpoint.objects.get(study=shared).api_key_saved_by == researcher
        # As long as a prompt may be (the default now holds the study's guidelines).
        filler = "Consider every detail of the image. "
        padded = default + "\n" + filler * ((MAX_PROMPT - len(default) - 1) // len(filler))

        answer = client.post(prompt_url, {"text": padded}, follow=True)
        client.force_login(researcher)
        _run_from_page(client, shared)

        assert f"Bearer {KEY}" not in _keys_sent(server), "the owner's key paid for it"
        assert not JudgeEndpoint.objects.get(study=shared).api_key_token
        assert f"The API key saved by {researcher.username} was removed" in answer.content.decode()
        # Having read the prompt, the owner enters the key again and runs on it.
        client.post(reverse("study_judge_settings", args=[shared.pk]),
                    _settings_form(server.url, KEY))  # fmt: skip
        assert _run_from_page(client, shared).status_code == 302
        assert f"Bearer {KEY}" in _keys_sent(server)
        assert any("Consider every detail" in text for text in prompts)
