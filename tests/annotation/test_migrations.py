"""Data migrations: rows written by earlier code get what the current code expects."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("annotation", "0003_item_serving_order_index")]
AFTER = [("annotation", "0004_crowd_integrity")]


@pytest.mark.django_db(transaction=True)
def test_0004_gives_old_studies_their_own_codes_and_old_humanr_groups_their_images():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    User = apps.get_model("annotation", "User")
    Study = apps.get_model("annotation", "Study")
    Image = apps.get_model("annotation", "Image")
    Item = apps.get_model("annotation", "Item")
    owner = User.objects.create(username="old-owner")
    studies = [Study.objects.create(name=f"s{n}", mode="humanr", owner=owner) for n in range(2)]
    images = [
        Image.objects.create(
            study=studies[0],
            name=f"{n}.jpg",
            sha256=str(n),
            file="f",
            display="d",
            width=1,
            height=1,
            format="JPEG",
        )
        for n in range(4)
    ]
    trials = [
        {"kind": "comparison", "image_id": images[0].pk},
        {"kind": "comparison", "image_id": images[1].pk},
        {"kind": "attention_check", "image_id": images[2].pk, "distractor_image_id": images[3].pk},
    ]
    group = Item.objects.create(study=studies[0], kind="group", spec={"trials": trials})

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
    codes = list(apps.get_model("annotation", "Study").objects.values_list("completion_code"))
    linked = set(
        apps.get_model("annotation", "ItemImage")
        .objects.filter(item_id=group.pk)
        .values_list("image_id", flat=True)
    )

    assert len(set(codes)) == 2, "each study its own secret, not one shared default"
    assert linked == {image.pk for image in images}

    # Leave the test database at the latest migration for the tests that follow.
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def _old_judgment(apps, *, kind: str, phase: str, state: dict):
    """A study with one item of ``kind``, a lease with ``state`` and a judgment in ``phase``."""
    owner = apps.get_model("annotation", "User").objects.create(username=f"owner-{phase}")
    study = apps.get_model("annotation", "Study").objects.create(
        name="old", mode="vicr", owner=owner
    )
    item = apps.get_model("annotation", "Item").objects.create(study=study, kind=kind)
    participant = apps.get_model("annotation", "Participant").objects.create(
        study=study, source="prolific", external_id=f"w-{phase}", pseudonym=f"P-{phase}"
    )
    lease = apps.get_model("annotation", "Assignment").objects.create(
        participant=participant,
        item=item,
        token=f"t-{phase}",
        served_at="2026-01-01T00:00:00Z",
        expires_at="2026-01-01T00:05:00Z",
        state=state,
    )
    apps.get_model("annotation", "Judgment").objects.create(
        study=study,
        item=item,
        participant=participant,
        assignment=lease,
        phase=phase,
        payload={},
        dwell_ms=0,
    )
    return lease


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def _back_to_latest():
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_0005_keeps_who_released_a_lease_and_drops_a_phase_equal_to_the_item_kind():
    apps = _migrate(AFTER)
    lease = _old_judgment(apps, kind="game", phase="game", state={"released_by": "rita"})

    apps = _migrate([("annotation", "0005_structure")])

    moved = apps.get_model("annotation", "Assignment").objects.get(pk=lease.pk)
    assert moved.released_by == "rita"
    judgment = apps.get_model("annotation", "Judgment").objects.get(assignment_id=lease.pk)
    assert judgment.item.kind == "game"
    _back_to_latest()


@pytest.mark.django_db(transaction=True)
def test_0005_refuses_to_drop_a_phase_its_item_does_not_have():
    apps = _migrate(AFTER)
    _old_judgment(apps, kind="game", phase="probation", state={})

    with pytest.raises(RuntimeError, match="phase other than their item's kind"):
        _migrate([("annotation", "0005_structure")])

    apps = MigrationExecutor(connection).loader.project_state(AFTER).apps
    assert apps.get_model("annotation", "Judgment").objects.filter(phase="probation").exists()
    # Resolved (here: the item kind was right), the migration goes through.
    apps.get_model("annotation", "Judgment").objects.update(phase="game")
    _back_to_latest()
