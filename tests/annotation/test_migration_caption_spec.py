"""0020 moves VICR's caption columns into ``Caption.spec`` and back, keeping every value.

One migration step each way from its predecessor (0019), so the test costs two small
schema changes, not a replay of the whole history; run on SQLite and PostgreSQL.
"""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("annotation", "0019_move_native_english")]
AFTER = [("annotation", "0020_caption_spec")]
#: The old columns of each caption made below, and the ``spec`` each must get: a column
#: at its default (no primes, no truth, no explanation) adds no key.
OLD = [
    ("study", {"prime_ratings": [3, 4], "truth": None, "explanation": ""}),
    ("study", {"prime_ratings": [4.5, 1], "truth": None, "explanation": ""}),
    ("study", {"prime_ratings": [], "truth": None, "explanation": ""}),
    ("tutorial", {"prime_ratings": [], "truth": 5, "explanation": "Exactly right."}),
    ("probation", {"prime_ratings": [], "truth": 1, "explanation": ""}),
    ("probation", {"prime_ratings": [2], "truth": 2, "explanation": "Line\nbreak, ünicode."}),
]


def expected_spec(columns: dict) -> dict:
    defaults = {"prime_ratings": [], "truth": None, "explanation": ""}
    return {name: value for name, value in columns.items() if value != defaults[name]}


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


@pytest.mark.django_db(transaction=True)
def test_0020_copies_every_vicr_column_into_spec_and_back():
    apps = migrate(BEFORE)
    owner = apps.get_model("annotation", "User").objects.create(username="old-owner")
    study = apps.get_model("annotation", "Study").objects.create(
        name="old", mode="vicr", owner=owner
    )
    image = apps.get_model("annotation", "Image").objects.create(
        study=study,
        name="a.jpg",
        sha256="0",
        file="f",
        display="d",
        width=1,
        height=1,
        format="JPEG",
    )
    Caption = apps.get_model("annotation", "Caption")
    made = {
        Caption.objects.create(
            study=study,
            image=image,
            system="S",
            raw_text=f"c{n}",
            text=f"c{n}",
            purpose=purpose,
            line=n,
            **columns,
        ).pk: (purpose, columns)
        for n, (purpose, columns) in enumerate(OLD)
    }

    apps = migrate(AFTER)
    after = {
        pk: (purpose, spec)
        for pk, purpose, spec in apps.get_model("annotation", "Caption").objects.values_list(
            "pk", "purpose", "spec"
        )
    }
    assert after == {pk: (purpose, expected_spec(cols)) for pk, (purpose, cols) in made.items()}

    apps = migrate(BEFORE)
    back = {
        caption.pk: (caption.purpose, {name: getattr(caption, name) for name in OLD[0][1]})
        for caption in apps.get_model("annotation", "Caption").objects.all()
    }
    assert back == made

    # Leave the test database at the latest migration for the tests that follow.
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
