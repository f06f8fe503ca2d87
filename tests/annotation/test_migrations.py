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
