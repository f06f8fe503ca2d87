# Each item's sampling probability and design (issue 40, services/people_design.py).
# Existing items were never drawn: null probability (every item goes to people), no design.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0021_participant_vision"),
    ]

    operations = [
        migrations.AddField(
            model_name="item",
            name="sampling_design",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
        migrations.AddField(
            model_name="item",
            name="sampling_probability",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
