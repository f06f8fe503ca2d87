"""Record who saved a judge endpoint's API key: only they may spend it.

Keys saved before this was recorded become the study owner's, who could always run them.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def keys_to_owners(apps, schema_editor):
    JudgeEndpoint = apps.get_model("annotation", "JudgeEndpoint")
    for endpoint in JudgeEndpoint.objects.exclude(api_key_token="").select_related("study"):
        endpoint.api_key_saved_by_id = endpoint.study.owner_id
        endpoint.save(update_fields=["api_key_saved_by"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0013_judge_runs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="judgeendpoint",
            name="api_key_saved_by",
            field=models.ForeignKey(
                blank=True,
                help_text="Who saved the key; only they may spend it (empty: no researcher may).",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(keys_to_owners, migrations.RunPython.noop),
    ]
