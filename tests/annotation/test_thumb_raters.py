"""THumB's raters: ``User.native_english`` moved to the thumb app's own table (issue 44)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from annotation.models import Participant
from annotation.modes.thumb.models import Rater
from annotation.modes.thumb.protocol import _is_native

# Before the move: the column on the User, no thumb table yet.
BEFORE = [("annotation", "0018_guidelines"), ("capeval_thumb", None)]
AFTER = [("annotation", "0019_move_native_english")]


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    # ``(app, None)``, "none of the app's migrations", is a target but names no state.
    return executor.loader.project_state([node for node in target if node[1]]).apps


def _back_to_latest():
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_move_keeps_every_value_and_goes_back():
    apps = _migrate(BEFORE)
    User = apps.get_model("annotation", "User")
    old = {
        name: User.objects.create(username=name, password="!", native_english=native).pk
        for name, native in [("nat1", True), ("nat2", True), ("not1", False), ("not2", False)]
    }
    natives = {pk for name, pk in old.items() if name.startswith("nat")}

    apps = _migrate(AFTER)
    raters = apps.get_model("capeval_thumb", "Rater").objects.all()
    # A row per native speaker; no row reads as not native (see the migration).
    assert {rater.user_id: rater.native_english for rater in raters} == dict.fromkeys(natives, True)
    assert apps.get_model("annotation", "User").objects.count() == len(old)

    apps = _migrate(BEFORE)
    restored = dict(
        apps.get_model("annotation", "User").objects.values_list("pk", "native_english")
    )
    assert restored == {pk: pk in natives for pk in old.values()}
    _back_to_latest()


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("root", staff=True))
    return client


def test_an_admin_marks_a_native_speaker_on_thumbs_page(admin_client, make_user):
    annotator = make_user("nadia")
    assert admin_client.get(reverse("admin:capeval_thumb_rater_add")).status_code == 200

    response = admin_client.post(
        reverse("admin:capeval_thumb_rater_add"),
        {"user": annotator.pk, "native_english": "on"},
    )

    assert response.status_code == 302, response.content[:500]
    assert Rater.objects.get(user=annotator).native_english
    listing = admin_client.get(reverse("admin:capeval_thumb_rater_changelist"))
    assert "nadia" in listing.content.decode()


def test_make_user_marks_native_speakers_through_thumbs_table(make_user):
    assert make_user("ann", native_english=True).thumb_rater.native_english
    assert not Rater.objects.filter(user=make_user("bob")).exists()


@pytest.mark.parametrize("native", [True, False])
def test_the_fluency_rule_reads_a_participant_in_one_query(
    make_study, make_user, django_assert_num_queries, native
):
    # One query, as reading ``participant.user.native_english`` was: the rule runs on every
    # THumB item request of a registered annotator.
    study = make_study("thumb")
    user = make_user("ann", native_english=native)
    Participant.objects.create(study=study, user=user, source=Participant.Source.ACCOUNT)
    participant = Participant.objects.get(user=user)

    with django_assert_num_queries(1):
        assert _is_native(participant) is native
