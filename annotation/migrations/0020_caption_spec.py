# VICR's caption columns (primed ratings, a gate pair's truth and explanation) move into
# Caption.spec, the mode's own data of a caption (issue 44), and Caption.purpose takes its
# choices from the registered modes. Every non-default value is copied before the columns
# go, and copied back when the migration is reversed.

import annotation.registry
from django.db import migrations, models

# The old columns and their defaults: a default value was never set, so it is not copied.
COLUMNS = {"prime_ratings": [], "truth": None, "explanation": ""}
BATCH = 1000


def columns_to_spec(apps, schema_editor):
    Caption = apps.get_model("annotation", "Caption")
    changed = []
    for caption in Caption.objects.only("id", "spec", *COLUMNS).iterator(chunk_size=BATCH):
        values = {
            name: getattr(caption, name)
            for name, default in COLUMNS.items()
            if getattr(caption, name) not in (default, None)
        }
        if values:
            caption.spec = {**(caption.spec or {}), **values}
            changed.append(caption)
    Caption.objects.bulk_update(changed, ["spec"], batch_size=BATCH)


def spec_to_columns(apps, schema_editor):
    Caption = apps.get_model("annotation", "Caption")
    changed = []
    for caption in Caption.objects.only("id", "spec", *COLUMNS).iterator(chunk_size=BATCH):
        spec = dict(caption.spec or {})
        if not any(name in spec for name in COLUMNS):
            continue
        for name, default in COLUMNS.items():
            setattr(caption, name, spec.pop(name, default))
        caption.spec = spec
        changed.append(caption)
    Caption.objects.bulk_update(changed, ["spec", *COLUMNS], batch_size=BATCH)


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0019_move_native_english"),
    ]

    operations = [
        migrations.AddField(
            model_name="caption",
            name="spec",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(columns_to_spec, spec_to_columns),
        migrations.RemoveField(model_name="caption", name="prime_ratings"),
        migrations.RemoveField(model_name="caption", name="truth"),
        migrations.RemoveField(model_name="caption", name="explanation"),
        migrations.AlterField(
            model_name="caption",
            name="purpose",
            field=models.CharField(
                choices=annotation.registry.caption_purpose_choices,
                default="study",
                max_length=10,
            ),
        ),
    ]
