"""THumB's raters: ``User.native_english`` moves to the mode's own table (issue 44).

The copy makes a row for every user marked a native speaker and none for the others: an
account without a row is not a native speaker (as every account made later without one),
so rows for ``False`` would say nothing and would be the one place absence and ``False``
both mean the same. ``annotation.0019_move_native_english`` then drops the column; going
back, that restores the column (all ``False``) and this copies the rows' ``True`` into it.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def copy_to_raters(apps, schema_editor):
    User = apps.get_model("annotation", "User")
    Rater = apps.get_model("capeval_thumb", "Rater")
    natives = User.objects.filter(native_english=True).values_list("pk", flat=True)
    Rater.objects.bulk_create(
        [Rater(user_id=pk, native_english=True) for pk in natives.iterator()], batch_size=500
    )


def copy_to_users(apps, schema_editor):
    User = apps.get_model("annotation", "User")
    Rater = apps.get_model("capeval_thumb", "Rater")
    natives = Rater.objects.filter(native_english=True).values("user_id")
    User.objects.filter(pk__in=natives).update(native_english=True)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("annotation", "0018_guidelines"),
    ]

    operations = [
        migrations.CreateModel(
            name="Rater",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "native_english",
                    models.BooleanField(
                        default=False, help_text="Native English speaker (THumB's fluency rule)."
                    ),
                ),
                (
                    "user",
                    models.OneToOneField(
                        help_text="The registered annotator.",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="thumb_rater",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "THumB rater",
            },
        ),
        migrations.RunPython(copy_to_raters, copy_to_users),
    ]
