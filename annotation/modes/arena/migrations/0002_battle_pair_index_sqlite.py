"""The battle-pair index on SQLite too, the embedded default.

Migration 0001 left SQLite out because its JSON lookups were the ORM's, whose expressions
an index would have had to copy from Django's SQLite backend. Serving now writes its own
``JSON_EXTRACT("spec", '$.system_a') = %s`` (``serving.VENDOR``), so the index below holds
exactly that expression. Without it, the claim of a battle of the drawn pair read every
battle of the study, evaluating both JSON keys of each: 20-25 ms per serve on a laptop
study of 400 images and 14 systems (36,400 battles), against 0.3 ms through the index.
"""

from django.db import migrations

NAME = "arena_battle_pair"


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    schema_editor.execute(
        f'CREATE INDEX IF NOT EXISTS "{NAME}" ON "annotation_item" ("study_id", '
        "JSON_EXTRACT(\"spec\", '$.system_a'), JSON_EXTRACT(\"spec\", '$.system_b')) "
        "WHERE \"kind\" = 'battle'"
    )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    schema_editor.execute(f'DROP INDEX IF EXISTS "{NAME}"')


class Migration(migrations.Migration):
    dependencies = [("capeval_arena", "0001_battle_pair_index")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
