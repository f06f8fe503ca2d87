"""THumB's raters: ``User.native_english`` moved to the thumb app's own table (issue 44)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from annotation.modes.thumb.models import Rater

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
