"""An index that finds a study's battles of one system pair (issue 48).

The arena serves a battle of the pair its design drew (``protocol.ArenaProtocol``'s
``eligible_items``), filtering on ``spec -> 'system_a'`` and ``spec -> 'system_b'``. Without
an index PostgreSQL read every item of the study for each serve: 21 ms on a 45,000-battle
study, where the pair holds 3,000. The index lives here, in the arena's own app, because
only the arena knows those keys of ``Item.spec``. Its expressions are exactly the ones the
ORM writes for ``spec__system_a=...``, so the planner can match them.

PostgreSQL only: SQLite, the embedded default, is for studies a laptop holds, and its JSON
lookups compile to expressions an index would have to copy from Django's SQLite backend.
"""

from django.db import migrations

NAME = "arena_battle_pair"


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f'CREATE INDEX IF NOT EXISTS "{NAME}" ON "annotation_item" '
        '("study_id", ("spec" -> \'system_a\'), ("spec" -> \'system_b\')) '
        "WHERE \"kind\" = 'battle'"
    )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f'DROP INDEX IF EXISTS "{NAME}"')


class Migration(migrations.Migration):
    dependencies = [("annotation", "0023_pairjudgment_labels")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
